"""A corpus with a 10k-item band bucket keeps recall (issue 15).

Every item starts with the same eight 5-token "anchor" shingles, each picked (from a million
candidates) for the lowest value under one of the first eight MinHash permutations, so every
item has the same minimum in slots 0-7: all ~10k items share one band-0 bucket, far over
`bucket_cap` (64). The rest of an item is its own: 20 families of 100 near duplicates (one
varying token, J ~ 0.95) and 8,100 items with no near duplicate (J ~ 0.1 to any other), so the
bucket mixes near duplicates with items far apart. A family's own buckets in the other bands
are over the cap too, and their pairs are left to band 0 (the first band they share): if the
10k bucket were skipped, or oversized buckets were skipped at all, recall would collapse.

Truth is computed here, not by the stage: reference shingles (pure Python), exact Jaccard of
every pair within a family, and a check that two families (or loners) share only the anchor
shingles, so no other pair can reach the threshold.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from pipeline.config import DedupConfig
from pipeline.dedup import stage
from pipeline.dedup.minhash import permutations
from pipeline.dedup.shingles import item_shingles, shingle_sets
from tests.conftest import make_item_table

FIELDS = ["before", "after"]
FAMILIES, MEMBERS, LONERS = 20, 100, 8_100
THRESHOLD = 0.8


def anchor_text() -> str:
    """Eight 5-token shingles of `before`: for k in 0..7, the candidate lowest under the stage's
    seeded permutation k (datasketch affine32: a * fmix32(h) + b mod 2^32)."""
    cands = pa.array([f"pin{k} a b c d" for k in range(1_000_000)])
    offsets, h = shingle_sets([cands], ["before"], 5)  # exactly one shingle per candidate
    assert (np.diff(offsets) == 1).all()
    h = h.copy()
    for shift, mul in ((16, 0x85EBCA6B), (13, 0xC2B2AE35)):
        h ^= h >> np.uint32(shift)
        h *= np.uint32(mul)
    h ^= h >> np.uint32(16)
    a, b = permutations(DedupConfig().num_perm, DedupConfig().seed)
    return " ".join(f"pin{int(np.argmin(a[p] * h + b[p]))} a b c d" for p in range(8))


def family(f: int) -> range:
    """The rows of family f (the loners are families of one after the FAMILIES)."""
    if f < FAMILIES:
        return range(f * MEMBERS, (f + 1) * MEMBERS)
    start = FAMILIES * MEMBERS + f - FAMILIES
    return range(start, start + 1)


@pytest.fixture(scope="module")
def corpus() -> tuple[list[dict], pa.Table]:
    anchors = anchor_text()
    rows = []
    for f in range(FAMILIES + LONERS):
        for m in range(len(family(f))):
            body = "\n".join(
                f"    v{f}_{i} = call(x{f}_{i}, {m if i == 10 else i})" for i in range(20)
            )
            rows.append(dict(before=f"{anchors}\n{body}", after="    return None", change=f"{f}"))
    return rows, make_item_table(rows)


@pytest.fixture(scope="module")
def truth(corpus) -> set[tuple[int, int]]:
    """Every pair (row i < row j) with exact Jaccard >= THRESHOLD, from reference shingles."""
    rows, _ = corpus
    sets = [item_shingles(r, FIELDS, 5) for r in rows]
    shared = set.intersection(*sets)  # the anchor shingles and `after`
    own = [set().union(*(sets[i] for i in family(f))) - shared for f in range(FAMILIES + LONERS)]
    assert len(set().union(*own)) == sum(map(len, own)), "families overlap"
    smallest = min(len(s) for s in sets)
    assert len(shared) / (2 * smallest - len(shared)) < THRESHOLD  # no pair across families
    pairs = set()
    for f in range(FAMILIES):
        members = family(f)
        vocab = {x: k for k, x in enumerate(own[f] | shared)}
        m = np.zeros((MEMBERS, len(vocab)), dtype=np.int32)
        for r, i in enumerate(members):
            m[r, [vocab[x] for x in sets[i]]] = 1
        inter = m @ m.T
        size = m.sum(axis=1)
        jac = inter / (size[:, None] + size[None, :] - inter)
        for p, q in zip(*np.nonzero(np.triu(jac >= THRESHOLD, k=1)), strict=True):
            pairs.add((members[p], members[q]))
    return pairs


def find(table: pa.Table, **cfg):
    d = DedupConfig(**cfg)
    res = stage.find_duplicates(pl.from_arrow(table.select(stage.needed_columns(d))), d)
    row = {i: k for k, i in enumerate(table["id"].to_pylist())}
    e = res.edges.filter(pl.col("exact_j") >= d.threshold)
    found = {tuple(sorted((row[a], row[b]))) for a, b in e.select("a", "b").iter_rows()}
    return res, found


def test_a_10k_item_bucket_is_scanned_and_keeps_recall(corpus, truth):
    _, table = corpus
    res, found = find(table)
    big = res.oversized.filter(pl.col("size") >= 10_000)
    assert big.height == 1, "the corpus no longer builds a 10k-item bucket"
    assert big["band"][0] == 0 and big["scanned"][0]
    assert big["compared"][0] > 0 and big["found"][0] > 0
    assert res.counts["oversized_skipped"] == 0 and res.counts["oversized_skipped_pairs"] == 0
    assert len(truth) >= FAMILIES * MEMBERS * (MEMBERS - 1) // 2 * 0.99
    assert found <= truth  # verified pairs only
    recall = len(found & truth) / len(truth)
    assert recall >= 0.995, f"recall {recall:.4f} ({len(found & truth)}/{len(truth)})"


def test_a_skipped_10k_bucket_is_reported_with_what_it_may_hide(corpus, truth):
    _, table = corpus
    res, found = find(table, max_bucket=5_000)
    big = res.oversized.filter(pl.col("size") >= 10_000)
    assert big.height == 1 and not big["scanned"][0] and big["compared"][0] == 0
    c = res.counts
    assert c["oversized_skipped"] >= 1
    lost = truth - found
    assert len(lost) <= c["oversized_skipped_pairs"]  # no pair lost outside a reported skip

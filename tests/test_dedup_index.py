"""The dedup index (pipeline/dedup/index.py): matches against brute-force exact Jaccard."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config import DedupConfig
from pipeline.dedup import index as ix
from pipeline.dedup.change import change_elements, change_jaccard, change_sets
from pipeline.dedup.lsh import scan_cross
from pipeline.dedup.shingles import item_shingles
from tests.test_dedup_incremental import code, near_twin

FIELDS = ["before", "after"]


def items(n: int, seed: int, family: int = 0) -> list[dict]:
    """n items; the first `family` are near twins of one another (one template)."""
    rng = random.Random(seed)
    base = {"before": code(rng, 12), "after": code(rng, 12)}
    out = []
    for k in range(n):
        it = {"before": code(rng, 12), "after": code(rng, 12)}
        if k < family:
            it = {**base, "after": base["after"] + f"\nextra_{k} = {k}"}
        out.append({"id": f"{seed}-{k}", "source": "s", "source_ref": f"row {k}", **it})
    return out


def frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows)


def build(rows: list[dict], d: DedupConfig) -> ix.Index:
    f = frame(rows)
    offsets, _, sig = ix.shingle_and_sign(f, np.arange(f.height), d)
    return ix.Index.of([ix.index_table(f.to_arrow(), sig, np.diff(offsets), d)], d)


def query(rows: list[dict], index: ix.Index, d: DedupConfig) -> tuple[set, dict]:
    f = frame(rows)
    offsets, values, sig = ix.shingle_and_sign(f, np.arange(f.height), d)
    change = change_sets(f["before"].to_arrow(), f["after"].to_arrow(), d.ngram)
    m = ix.match(index, sig, offsets, values, np.flatnonzero(np.diff(offsets) > 0), d, change)
    got = zip(m.q, m.r, m.j, strict=True)
    return {(int(q), int(r), round(float(j), 9)) for q, r, j in got}, m.counts


def brute(queries: list[dict], indexed: list[dict], t: float, ct: float = 0.5) -> set:
    """Pairs at or above t whose changes (change.change_elements) are at or above ct."""
    sets = [item_shingles(x, FIELDS, 5) for x in indexed]
    changes = [change_elements(x["before"], x["after"], 5) for x in indexed]
    out = set()
    for q, x in enumerate(queries):
        a = item_shingles(x, FIELDS, 5)
        ca = change_elements(x["before"], x["after"], 5)
        for r, b in enumerate(sets):
            j = len(a & b) / len(a | b)
            cb = changes[r]
            cj = change_jaccard(ca, cb)
            if j >= t and cj >= ct:
                out.add((q, r, round(j, 9)))
    return out


def corpus():
    indexed = items(60, seed=1, family=30)  # a templated family: one big bucket per band
    queries = items(20, seed=2)
    queries += [{**near_twin(x, str(k)), "id": f"t{k}"} for k, x in enumerate(indexed[25:45:2])]
    queries += [dict(indexed[3], id="copy")]
    return indexed, queries


def test_matches_are_exactly_the_pairs_at_or_above_the_threshold():
    indexed, queries = corpus()
    truth = brute(queries, indexed, 0.8)
    assert len(truth) > 30  # twins of family members match the whole family
    for cap in (1000, 2):  # the family's buckets: expanded, or scanned on signatures
        d = DedupConfig(bucket_cap=cap)
        got, counts = query(queries, build(indexed, d), d)
        assert got == truth
        assert (counts["oversized_buckets"] > 0) == (cap == 2)
        assert counts["oversized_skipped"] == 0
    d = DedupConfig(bucket_cap=2, max_bucket=2)  # skipped, and counted, never silently
    got, counts = query(queries, build(indexed, d), d)
    assert got < truth and counts["oversized_skipped"] > 0
    assert counts["oversized_skipped_pairs"] >= len(truth - got)


def test_the_index_on_disk_reads_back_row_by_row(tmp_path, monkeypatch):
    monkeypatch.setattr(ix, "GROUP_ROWS", 7)  # several row groups per part
    indexed, queries = corpus()
    d = DedupConfig()
    t = build(indexed, d).parts[0]
    assert isinstance(t, pa.Table)
    ix.write_parts(tmp_path / "a", [t.slice(0, 25)], {})
    ix.write_parts(tmp_path / "b", [t.slice(25)], {})
    disk = ix.Index.of(
        [tmp_path / "a" / "part-00000.parquet", tmp_path / "b" / "part-00000.parquet"], d
    )
    rows = np.array([0, 6, 7, 24, 25, 31, 59])
    assert disk.take(rows, ["id", "before"]).to_pylist() == [
        {"id": indexed[r]["id"], "before": indexed[r]["before"]} for r in rows
    ]
    f = frame(indexed)
    made = ix.shingle_and_sign(f, np.arange(f.height), d)[2]  # as dedup signed them
    assert np.array_equal(disk.signatures(rows), made[rows])
    assert np.array_equal(build(indexed, d).signatures(rows), made[rows])
    assert query(queries, disk, d)[0] == brute(queries, indexed, 0.8)


def test_the_index_stores_no_signature_and_an_older_one_with_them_reads_alike(tmp_path):
    """Signatures (1 KB a row, 72% of the index) are made again from the stored text, for
    the rows of the buckets a match scans; an index written with them matches the same."""
    indexed, queries = corpus()
    d = DedupConfig(bucket_cap=2)  # the family's buckets scanned on signatures
    t = build(indexed, d).parts[0]
    assert isinstance(t, pa.Table)
    assert t.column_names == ["id", "source", "source_ref", *FIELDS, "shingles", "band_keys"]
    ix.write_parts(tmp_path / "new" / "dedup" / "index", [t], {})
    f = frame(indexed)
    sig = ix.shingle_and_sign(f, np.arange(f.height), d)[2]
    old = t.append_column("signature", pa.FixedSizeListArray.from_arrays(sig.reshape(-1), 256))
    ix.write_parts(tmp_path / "old" / "dedup" / "index", [old], {})
    truth = brute(queries, indexed, 0.8)
    for where in ("new", "old"):
        got, counts = query(queries, ix.load([tmp_path / where], d), d)
        assert got == truth and counts["oversized_buckets"] > 0, where


def test_best_picks_the_highest_j_then_the_first_row_and_same_text_compares_fields():
    m = ix.Matches(np.array([0, 0, 0, 2]), np.array([5, 3, 4, 1]), np.array([0.9, 0.95, 0.95, 1.0]))
    row, j = ix.best(m, 3)
    assert row.tolist() == [3, -1, 1] and j.tolist() == [0.95, 0.0, 1.0]
    indexed = items(3, seed=4)
    index = build(indexed, DedupConfig())
    mine = frame([indexed[2], {**indexed[0], "after": indexed[0]["after"] + " "}]).select(FIELDS)
    assert ix.same_text(index, np.array([2, 0]), mine).tolist() == [True, False]


def test_scan_cross_is_a_brute_force_comparison_of_signatures():
    rng = np.random.default_rng(0)
    sq = rng.integers(0, 4, size=(6, 16), dtype=np.uint32)
    si = rng.integers(0, 4, size=(5, 16), dtype=np.uint32)
    qs, rs = np.array([0, 2, 5]), np.array([1, 3, 4])
    pairs, compared = scan_cross(sq, qs, si, rs, 0, 4, 6)
    got = {(int(p >> 32), int(rs[p & 0xFFFFFFFF])) for p in pairs}
    want = {(q, r) for q in qs for r in rs if (sq[q] == si[r]).sum() >= 6}
    assert got == want and compared == 9


def test_shingle_and_sign_reads_any_rows_in_any_batches_alike():
    f = frame(items(40, 9))
    d = DedupConfig(fields=FIELDS)
    whole = ix.shingle_and_sign(f, np.arange(f.height), d)
    for rows, batch in ((np.arange(3, 37), 5), (np.array([7, 3, 3, 30, 12]), 2)):
        offs, vals, sig = ix.shingle_and_sign(f, rows, d.model_copy(update={"batch_size": batch}))
        sets = [vals[offs[k] : offs[k + 1]].tolist() for k in range(len(rows))]
        assert sets == [whole[1][whole[0][r] : whole[0][r + 1]].tolist() for r in rows]
        assert np.array_equal(sig, whole[2][rows])

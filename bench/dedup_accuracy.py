"""Dedup accuracy at scale: the pairs the stage finds against exact truth by prefix filtering.

Corpus: bench/dedup_speed.generate (planted near and exact copies, version bumps) plus
templated families: hundreds of edits of one template a word or two apart, whose LSH buckets
go far over `bucket_cap` (where skipping oversized buckets lost recall: 0.38 at 100k).
Truth: every pair of distinct edits (unique before/after) whose exact Jaccard over the stage's
own shingles is >= the threshold, by the prefix-filter all-pairs join of bench/dedup_truth.py
(not brute force; `--check-brute` asserts it equals brute force over all pairs, small N only).
Found: the stage's verified edges at or above the threshold, between distinct edits (the exact
groups it collapses first are one edit). The stage is run once per threshold (its banding,
big-bucket scan floor and clusters depend on it). Per threshold: recall, precision, P(candidate
| J), the true pairs whose two edits the stage both kept, buckets over `bucket_cap` (scanned,
skipped over `max_bucket`, pairs compared in them) and the stage's time.

    python bench/dedup_accuracy.py [--items 100000,1000000] [--thresholds 0.7,0.75,0.8,0.85,0.9]
                                   [--families 40] [--family-size 300] [--check-brute]

Goal (issue 15): pair recall >= 0.995 at J 0.8, at 100k and 1M items; precision 1.0.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dedup_speed import WORDS, generate  # noqa: E402
from dedup_truth import brute_pairs, codes, truth_pairs  # noqa: E402

from pipeline.config import DedupConfig  # noqa: E402
from pipeline.dedup.find import find_duplicates, needed_columns  # noqa: E402
from pipeline.dedup.lsh import p_candidate  # noqa: E402
from pipeline.dedup.shingles import shingle_sets  # noqa: E402
from pipeline.schema import ITEM_SCHEMA, item_id  # noqa: E402

FIELDS = list(DedupConfig().fields)  # the stage's default: the edit (before, after)


def templated(families: int, size: int, seed: int = 5) -> pa.Table:
    """Families of `size` edits of one template, each member a word or two away from it."""
    rnd = random.Random(seed)
    rows: list[dict] = []
    for f in range(families):
        lines = [
            f"    {rnd.choice(WORDS)}_{k} = {rnd.choice(WORDS)}({rnd.choice(WORDS)}, {k})"
            for k in range(10)
        ]
        for m in range(size):
            body = list(lines)
            for _ in range(rnd.randint(1, 2)):
                i = rnd.randrange(len(body))
                body[i] = body[i].replace("(", f"({rnd.choice(WORDS)}_", 1)
            before, after = "\n".join(body), "\n".join(body[:-1])
            change = f"fam{f}-{m}"
            rows.append(
                dict(
                    id=item_id("org/t", change, "t.py", before, after, "c"),
                    source="bench",
                    source_ref=change,
                    repo="org/t",
                    change=change,
                    path="t.py",
                    language="python",
                    before=before,
                    after=after,
                    context="",
                    comment="c",
                    author="dev",
                    author_is_bot=False,
                    lines_removed=10,
                    lines_added=9,
                    created_at=None,
                )
            )
    return pa.Table.from_pylist(rows, schema=ITEM_SCHEMA)


def corpus(n: int, families: int, size: int) -> tuple[pa.Table, int]:
    """n items: generate(...) and templated families (at most a quarter of n)."""
    families = min(families, max(1, n // (4 * size)))
    fam = templated(families, size)
    return pa.concat_tables([generate(n - fam.num_rows, seed=7), fam]), families


def edits(table: pa.Table) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(distinct, rows): the distinct edits (unique content over FIELDS, in first-seen order,
    `edit` = their index) and every row's `id` and `edit`."""
    frame = pl.from_arrow(table.select(["id", *FIELDS]))
    assert isinstance(frame, pl.DataFrame)
    frame = frame.with_columns(pl.col(f).fill_null("") for f in FIELDS)
    distinct = (
        frame.select(FIELDS).unique(maintain_order=True).with_row_index("edit", offset=0)
    ).with_columns(pl.col("edit").cast(pl.Int64))
    rows = frame.join(distinct, on=FIELDS, how="left", maintain_order="left")
    return distinct, rows.select("id", "edit")


def run_stage(table: pa.Table, rows: pl.DataFrame, th: float) -> dict:
    """The stage at threshold th: its pairs (codes over edits), kept edits, bucket counts."""
    d = DedupConfig(threshold=th)
    t = time.time()
    res = find_duplicates(pl.from_arrow(table.select(needed_columns(d))), d)  # type: ignore[arg-type]
    secs = time.time() - t
    e = (
        res.edges.filter(pl.col("exact_j") >= th)
        .join(rows.rename({"id": "a", "edit": "ea"}), on="a")
        .join(rows.rename({"id": "b", "edit": "eb"}), on="b")
        .filter(pl.col("ea") != pl.col("eb"))
    )
    ea, eb = e["ea"].to_numpy(), e["eb"].to_numpy()
    found = np.unique(codes(np.minimum(ea, eb), np.maximum(ea, eb)))
    kept = np.unique(rows["edit"].to_numpy()[res.kept_rows])
    c = res.counts
    return {
        "found": found,
        "kept": kept,
        "secs": secs,
        "big": c["oversized_buckets"],
        "skipped": c["oversized_skipped"],
        "skipped_pairs": c["oversized_skipped_pairs"],
        "compared": c["oversized_pairs_compared"],
        "candidates": c["candidate_pairs"],
    }


def check_brute(offsets: np.ndarray, values: np.ndarray, t: float, got: np.ndarray) -> None:
    """Assert the prefix-filter truth at t equals brute force over all pairs."""
    n = len(offsets) - 1
    s = time.time()
    a, b, _ = brute_pairs(offsets, values, t)
    brute = np.unique(codes(a, b))
    assert np.array_equal(brute, got), (
        f"prefix filtering != brute force at J >= {t}: {len(np.setdiff1d(brute, got))} missed, "
        f"{len(np.setdiff1d(got, brute))} extra"
    )
    print(
        f"brute force over all {n * (n - 1) // 2:,} pairs of distinct edits in "
        f"{time.time() - s:.1f}s: {len(brute):,} pairs at J >= {t}, equal to prefix filtering"
    )


def one(n: int, a: argparse.Namespace, thresholds: list[float]) -> dict[float, dict]:
    t = time.time()
    table, families = corpus(n, a.families, a.family_size)
    distinct, rows = edits(table)
    offsets, values = shingle_sets([distinct[f].to_arrow() for f in FIELDS], FIELDS, 5)
    print(
        f"\n{table.num_rows:,} items ({families} templated families of {a.family_size}), "
        f"{distinct.height:,} distinct edits, made and shingled in {time.time() - t:.0f}s"
    )
    t = time.time()
    ta, tb, tj = truth_pairs(offsets, values, min(thresholds))
    print(
        f"exact truth by prefix filtering: {len(ta):,} pairs at J >= {min(thresholds)} "
        f"in {time.time() - t:.1f}s"
    )
    if a.check_brute:
        check_brute(offsets, values, min(thresholds), codes(ta, tb))
    print(
        f"{'J >=':>5} {'true':>9} {'found':>9} {'recall':>7} {'precision':>9} {'P(cand)':>7} "
        f"{'kept>=J':>7} {'candidates':>10} {'big':>5} {'skipped':>7} {'compared':>12} "
        f"{'stage':>6}"
    )
    out = {}
    for th in thresholds:
        truth = codes(ta[tj >= th], tb[tj >= th])
        r = run_stage(table, rows, th)
        hit = int(np.isin(truth, r["found"]).sum())
        recall = hit / len(truth) if len(truth) else 1.0
        precision = hit / len(r["found"]) if len(r["found"]) else 1.0
        kept = np.zeros(distinct.height, dtype=bool)
        kept[r["kept"]] = True
        both = int((kept[ta[tj >= th]] & kept[tb[tj >= th]]).sum())
        d = DedupConfig(threshold=th)
        print(
            f"{th:>5.2f} {len(truth):>9,} {len(r['found']):>9,} {recall:>7.4f} {precision:>9.4f} "
            f"{p_candidate(th, d.bands, d.rows):>7.3f} {both:>7,} {r['candidates']:>10,} "
            f"{r['big']:>5,} {r['skipped']:>7,} {r['compared']:>12,} {r['secs']:>5.0f}s"
        )
        if r["skipped"]:
            print(f"      skipped buckets hide up to {r['skipped_pairs']:,} unverified pairs")
        out[th] = {"recall": recall, "precision": precision, "kept_pairs": both}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", default="100000,1000000", help="comma-separated sizes")
    ap.add_argument("--threshold", type=float, default=0.8, help="the one the goal is at")
    ap.add_argument("--thresholds", default="0.7,0.75,0.8,0.85,0.9", help="also run at these")
    ap.add_argument("--families", type=int, default=40)
    ap.add_argument("--family-size", type=int, default=300)
    ap.add_argument("--check-brute", action="store_true", help="assert truth == brute force")
    a = ap.parse_args()
    sizes = [int(s) for s in a.items.split(",") if s]
    ths = sorted({a.threshold, *(float(s) for s in a.thresholds.split(",") if s)})
    if a.check_brute and max(sizes) > 20_000:
        sys.exit("--check-brute compares all pairs: use it with --items <= 20000")
    res = {n: one(n, a, ths) for n in sizes}
    print()
    for n, r in res.items():
        x = r[a.threshold]
        ok = x["recall"] >= 0.995 and x["precision"] == 1.0
        print(
            f"{n:,} items: recall {x['recall']:.4f}, precision {x['precision']:.4f} at J >= "
            f"{a.threshold}; true pairs both kept {x['kept_pairs']:,}; goal recall >= 0.995, "
            f"precision 1.0 -> {'OK' if ok else 'NOT MET'}"
        )


if __name__ == "__main__":
    main()

"""Dedup accuracy: the pairs the stage finds against brute-force exact Jaccard over all pairs.

On a generated corpus with planted near-duplicates (bench/dedup_speed.generate), the truth is
every pair with exact shingle Jaccard >= threshold, computed over ALL pairs from the readable
reference shingles (real token tuples, not hashes). The stage's pairs are its verified
candidates (MinHash banding, then exact Jaccard) plus the exact-duplicate groups it collapses
first. Prints recall and precision at the threshold (goal: recall >= 0.99, precision 1.0),
then the same at the neighbouring thresholds, and items removed by the stage vs by brute force.

    python bench/dedup_accuracy.py [--items 2500] [--threshold 0.8]
"""

from __future__ import annotations

import argparse
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dedup_speed import generate  # noqa: E402

from pipeline.config import DedupConfig  # noqa: E402
from pipeline.dedup import clusters as C  # noqa: E402
from pipeline.dedup.shingles import item_shingles  # noqa: E402
from pipeline.dedup.stage import find_duplicates, needed_columns  # noqa: E402

FIELDS = list(DedupConfig().fields)  # the stage's default: the edit (before, after)


def brute_force(items: list[dict], floor: float) -> dict[tuple[int, int], float]:
    """Exact Jaccard of every pair of items (reference shingles), those >= floor."""
    sets = [frozenset(item_shingles(it, FIELDS, 5)) for it in items]
    out = {}
    for i, j in combinations(range(len(sets)), 2):
        a, b = sets[i], sets[j]
        if not a or not b:
            continue
        inter = len(a & b)
        if inter:
            jac = inter / (len(a) + len(b) - inter)
            if jac >= floor:
                out[(i, j)] = jac
    return out


def stage_pairs(table, d: DedupConfig) -> tuple[dict[tuple[int, int], float], int, set[int]]:
    """Pairs (row, row) the stage would call duplicates at d.threshold, items it removes, and
    the rows it removes."""
    df = pl.from_arrow(table.select(needed_columns(d)))
    res = find_duplicates(df, d)
    ids = table["id"].to_pylist()
    rows_of: dict[str, list[int]] = {}
    for r, i in enumerate(ids):
        rows_of.setdefault(i, []).append(r)
    cl = res.clusters
    exact_of = dict(zip(cl["id"], cl["exact_of"], strict=True))
    group: dict[str, list[int]] = {}  # exact group (rep id) -> rows
    for r, i in enumerate(ids):
        group.setdefault(exact_of.get(i, i), []).append(r)
    found: dict[tuple[int, int], float] = {}
    for rows in group.values():
        for p in combinations(sorted(set(rows)), 2):
            found[p] = 1.0
    e = res.edges.filter(pl.col("exact_j") >= d.threshold)
    for a, b, j in e.select("a", "b", "exact_j").iter_rows():
        for ra in group.get(a, rows_of[a]):
            for rb in group.get(b, rows_of[b]):
                found[(min(ra, rb), max(ra, rb))] = j
    return found, res.counts["removed"], set(res.removed["_row"].to_list())


def removed_by_components(n: int, pairs) -> int:
    """What connected components (the clustering before stars) would remove."""
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    label = C.components(n, a, b)
    return n - len(np.unique(label))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=2500)
    ap.add_argument("--threshold", type=float, default=0.8)
    args = ap.parse_args()
    table = generate(args.items, seed=7)
    items = table.select(FIELDS).to_pylist()
    t = time.time()
    truth_all = brute_force(items, 0.5)
    bf_s = time.time() - t
    print(
        f"{args.items:,} items, {args.items * (args.items - 1) // 2:,} pairs brute-forced "
        f"in {bf_s:.1f}s"
    )
    print(
        f"{'threshold':>9} {'true pairs':>11} {'found':>7} {'recall':>8} {'precision':>10} "
        f"{'P(cand)':>8}"
    )
    from pipeline.dedup.lsh import p_candidate

    for th in sorted({0.7, 0.75, args.threshold, 0.85, 0.9}):
        d = DedupConfig(threshold=th)
        truth = {p for p, j in truth_all.items() if j >= th}
        found, removed, removed_rows = stage_pairs(table, d)
        hit = len(truth & found.keys())
        recall = hit / len(truth) if truth else 1.0
        precision = hit / len(found) if found else 1.0
        mark = " <-" if th == args.threshold else ""
        print(
            f"{th:>9.2f} {len(truth):>11,} {len(found):>7,} {recall:>8.4f} {precision:>10.4f} "
            f"{p_candidate(th, d.bands, d.rows):>8.3f}{mark}"
        )
        if th == args.threshold:
            bf_removed = removed_by_components(args.items, truth)
            # no chaining must not cost recall: kept items above the threshold, by brute force
            above = sum(1 for a, b in truth if a not in removed_rows and b not in removed_rows)
            result = (recall, precision, removed, bf_removed, above)
    recall, precision, removed, bf_removed, above = result
    print(
        f"items removed at {args.threshold}: stage (stars) {removed:,}, connected components "
        f"would remove {bf_removed:,}; kept pairs at or above {args.threshold} by brute force: "
        f"{above:,}"
    )
    ok = recall >= 0.99 and precision == 1.0 and above == 0
    print(
        f"goal recall >= 0.99, precision 1.0 and no kept pair above {args.threshold}: "
        f"recall {recall:.4f}, precision {precision:.4f} -> {'OK' if ok else 'NOT MET'}"
    )


if __name__ == "__main__":
    main()

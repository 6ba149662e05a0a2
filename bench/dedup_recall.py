"""Dedup pair recall at scale against exact truth found by prefix filtering (not brute force).

Truth: every pair of distinct edits (unique before/after) whose exact shingle Jaccard over the
stage's own shingles (default fields, 5-grams) is >= the threshold, found by the prefix-filter
all-pairs join (tokens ordered rarest first; a pair with J >= t must share a token among the
first |x| - ceil(t |x|) + 1 of each set), candidates length-filtered and verified exactly.
Found: the verified edges the dedup stage keeps at or above the threshold (plus the exact
groups it collapses first). The corpus mixes bench/dedup_speed.generate with templated
families: hundreds of edits of one template a word or two apart, whose LSH buckets go far over
`bucket_cap` (the case where skipping oversized buckets lost recall: 0.38 at 100k).

    python bench/dedup_recall.py [--items 100000] [--families 40] [--family-size 300]

Goal (issue 15): pair recall >= 0.995 at J 0.8, at 100k and 1M items.
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

from pipeline.config import DedupConfig  # noqa: E402
from pipeline.dedup import clusters as C  # noqa: E402
from pipeline.dedup.find import find_duplicates, needed_columns  # noqa: E402
from pipeline.dedup.shingles import shingle_sets  # noqa: E402
from pipeline.schema import ITEM_SCHEMA, item_id  # noqa: E402


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


def truth_pairs(offsets: np.ndarray, values: np.ndarray, t: float) -> set[tuple[int, int]]:
    """All pairs (a < b) of CSR sets with exact Jaccard >= t, by prefix filtering."""
    n = len(offsets) - 1
    sizes = np.diff(offsets)
    sets = pl.DataFrame({"set": np.repeat(np.arange(n), sizes), "tok": values.astype(np.int64)})
    freq = sets.group_by("tok").len("freq")
    ranked = sets.join(freq, on="tok").sort(["set", "freq", "tok"])
    ranked = ranked.with_columns(
        pos=pl.int_range(pl.len()).over("set"),
        size=pl.len().over("set"),
    )
    prefix = ranked.filter(
        pl.col("pos") < pl.col("size") - (t * pl.col("size")).ceil().cast(pl.Int64) + 1
    ).select("tok", "set", "size")
    cand = (
        prefix.join(prefix, on="tok", suffix="_b")
        .filter(
            (pl.col("set") < pl.col("set_b"))
            & (pl.col("size_b") >= t * pl.col("size"))
            & (pl.col("size") >= t * pl.col("size_b"))
        )
        .select("set", "set_b")
        .unique()
    )
    a = cand["set"].to_numpy().astype(np.int64)
    b = cand["set_b"].to_numpy().astype(np.int64)
    j = C.exact_jaccard(offsets, values, a, b)
    keep = j >= t - 1e-12
    return set(zip(a[keep].tolist(), b[keep].tolist(), strict=True))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--families", type=int, default=40)
    ap.add_argument("--family-size", type=int, default=300)
    ap.add_argument("--threshold", type=float, default=0.8)
    a = ap.parse_args()
    fam = templated(a.families, a.family_size)
    table = pa.concat_tables([generate(a.items - fam.num_rows, seed=7), fam])
    d = DedupConfig(threshold=a.threshold)
    # distinct edits: one row per unique content over the shingled fields
    frame = pl.from_arrow(table.select(list(d.fields))).with_row_index("row")
    assert isinstance(frame, pl.DataFrame)
    reps = frame.unique(list(d.fields), keep="first", maintain_order=True)
    offsets, values = shingle_sets([reps[f].to_arrow() for f in d.fields], list(d.fields), d.ngram)
    t0 = time.time()
    truth = truth_pairs(offsets, values, a.threshold)
    t_truth = time.time() - t0
    t0 = time.time()
    res = find_duplicates(pl.from_arrow(table.select(needed_columns(d))), d)  # type: ignore[arg-type]
    t_stage = time.time() - t0
    # map the stage's edge ids to distinct-edit indices
    key = pl.concat_str([pl.col(f).fill_null("") for f in d.fields], separator="\x1f")
    rep_of_key = dict(zip(reps.select(key).to_series().to_list(), range(reps.height), strict=True))
    ids = pl.from_arrow(table.select(["id", *d.fields]))
    assert isinstance(ids, pl.DataFrame)
    rep_of_id = dict(
        zip(
            ids["id"].to_list(),
            [rep_of_key[k] for k in ids.select(key).to_series().to_list()],
            strict=True,
        )
    )
    e = res.edges.filter(pl.col("exact_j") >= a.threshold)
    found = {
        (min(x, y), max(x, y))
        for x, y in ((rep_of_id[p], rep_of_id[q]) for p, q in e.select("a", "b").iter_rows())
        if x != y
    }
    hit = len(truth & found)
    recall = hit / len(truth) if truth else 1.0
    big = res.oversized
    print(
        f"{table.num_rows:,} items ({a.families} templated families of {a.family_size}), "
        f"{reps.height:,} distinct edits"
    )
    print(
        f"exact truth by prefix filtering: {len(truth):,} pairs at J >= {a.threshold} "
        f"in {t_truth:.1f}s"
    )
    print(
        f"dedup stage: {len(found):,} pairs found in {t_stage:.1f}s; "
        f"{big.height} buckets over bucket_cap scanned, {int((~big['scanned']).sum())} skipped"
    )
    print(
        f"pair recall {recall:.4f} ({hit:,}/{len(truth):,}); goal >= 0.995 -> "
        + ("OK" if recall >= 0.995 else "NOT MET")
    )


if __name__ == "__main__":
    main()

"""Trust figures of a finished run (issue 12), read from its outputs, not from the stages:

- near removals whose before/after share less than half their character 5-grams with their
  keeper (Jaccard over field-tagged 5-grams): distinct edits dedup merged;
- normalised edits (whole before and after, digits/versions/hashes/whitespace normalised) that
  appear in two splits: leakage;
- exported items whose before and after are both blank.

    python bench/trust.py [RUN_DIR] [--sources a,b]   (default: data/runs/shared)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pipeline.shapes.normalise import normalise_text  # noqa: E402


def grams(before: str | None, after: str | None) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for tag, t in (("b", before or ""), ("a", after or "")):
        if 0 < len(t) < 5:
            out.add((tag, t))
        out.update((tag, t[i : i + 5]) for i in range(len(t) - 4))
    return out


def jaccard(x: set, y: set) -> float:
    return 1.0 if not x and not y else len(x & y) / len(x | y)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", nargs="?", default="data/runs/shared")
    ap.add_argument("--sources", default="", help="comma-separated sources (default: all)")
    a = ap.parse_args()
    run = Path(a.run)
    keep = pl.col("source").is_in(a.sources.split(",")) if a.sources else pl.lit(True)
    cols = ["id", "before", "after"]
    both = pl.concat(
        [pl.read_parquet(run / f"dedup/{n}.parquet", columns=cols) for n in ("kept", "removed")]
    )
    text = {i: (b, af) for i, b, af in both.unique("id").iter_rows()}
    rem = pl.read_parquet(run / "dedup/removed.parquet").filter(keep)
    low = sum(
        jaccard(grams(b, af), grams(*text[k])) < 0.5
        for b, af, k in rem.select("before", "after", "keeper_id").iter_rows()
    )
    share = 100 * low / max(rem.height, 1)
    print(
        f"dedup removals sharing < half their 5-grams with the keeper: "
        f"{low}/{rem.height} ({share:.1f}%)"
    )
    splits = pl.concat(
        [
            pl.read_parquet(
                run / f"export/{s}.parquet", columns=["source", "before", "after"]
            ).with_columns(split=pl.lit(s))
            for s in ("train", "validation", "test")
        ]
    ).filter(keep)
    edit = [
        normalise_text(b) + "\x1f" + normalise_text(af)
        for b, af in splits.select("before", "after").iter_rows()
    ]
    twins = (
        splits.with_columns(edit=pl.Series(edit))
        .group_by("edit")
        .agg(pl.col("split").n_unique().alias("n"))
        .filter(pl.col("n") > 1)
        .height
    )
    print(f"normalised edits with a twin in another split: {twins}")
    blank = splits.filter(
        (pl.col("before").str.strip_chars() == "") & (pl.col("after").str.strip_chars() == "")
    ).height
    print(f"exported items with both sides blank: {blank}")


if __name__ == "__main__":
    main()

"""Trust figures of a finished run (issue 12), read from its outputs, not from the stages:

- near removals whose before/after share less than half their character 5-grams with their
  keeper (Jaccard over field-tagged 5-grams): distinct edits dedup merged;
- near removals whose changed words (a difflib word diff, independent of the stage's change
  sets) share none with their keeper's: different edits of shared text dedup merged;
- normalised edits (whole before and after, digits/versions/hashes/whitespace normalised) that
  appear in two splits: leakage;
- exported items whose before and after are both blank;
- validation/test items from a change (repo, change) that also has train items.

    python bench/trust.py [RUN_DIR] [--sources a,b]   (default: data/runs/shared)
"""

from __future__ import annotations

import argparse
import difflib
import re
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


def changed_words(before: str | None, after: str | None) -> set[tuple[str, str]]:
    """("-", word) / ("+", word) for each word a word-level diff removes or adds."""
    a, b = re.findall(r"\w+", before or ""), re.findall(r"\w+", after or "")
    out: set[tuple[str, str]] = set()
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            out.update(("-", w) for w in a[i1:i2])
            out.update(("+", w) for w in b[j1:j2])
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
    near = rem.filter(pl.col("kind") == "near").select("before", "after", "keeper_id")
    other = 0
    for b, af, k in near.iter_rows():
        mine, theirs = changed_words(b, af), changed_words(*text[k])
        other += bool(mine and theirs and not mine & theirs)
    print(f"near removals changing no word their keeper changes: {other}/{near.height}")
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
    ch = pl.concat(
        [
            pl.read_parquet(run / f"export/{s}.parquet", columns=["source", "repo", "change"])
            .filter(keep)
            .with_columns(split=pl.lit(s))
            for s in ("train", "validation", "test")
        ]
    ).filter(pl.col("change") != "")
    train = ch.filter(pl.col("split") == "train").select("repo", "change").unique()
    held = ch.filter(pl.col("split") != "train")
    shared = held.join(train, on=["repo", "change"], how="semi").height
    print(f"validation/test items from a change with train items: {shared}/{held.height}")


if __name__ == "__main__":
    main()

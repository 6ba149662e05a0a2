"""format_only: not whitespace_only, but equal once whitespace and commas are removed and ' is
read as ", or both sides are only import lines with the same words (an import sorter's edit,
Rust's `use` lists included)."""

from __future__ import annotations

import re

import polars as pl

from pipeline.filter.kinds.common import same_but_whitespace, text
from pipeline.filter.kinds.contract import Found, Row, Rule
from pipeline.filter.regex import BLANK_RE, FORMAT_STRIP_RE, IMPORT_KEYWORD_RE, IMPORT_LINE_RE

_SIDES = ("before", "after", "context")


def _hit(s: pl.Series) -> pl.Series:
    """On a batch of (before, after, context): each test computed once (expressions would run
    `in_imports` again for every use). The import test's regexes and word lists run only on
    hunks in an import block: it is the costly part, and few hunks need it."""
    df = s.struct.unnest().with_columns([text(f) for f in _SIDES])
    in_imports = pl.any_horizontal([pl.col(f).str.contains(IMPORT_KEYWORD_RE) for f in _SIDES])
    df = df.with_columns(in_imports.alias("_in"))

    def imports_only(f: str) -> pl.Expr:
        kept = pl.when(pl.col("_in")).then(pl.col(f)).otherwise(pl.lit(""))
        return kept.str.replace_all(IMPORT_LINE_RE, "").str.contains(BLANK_RE)

    df = df.with_columns(
        (pl.col("_in") & imports_only("before") & imports_only("after")).alias("_c")
    )

    def words(f: str) -> pl.Expr:
        kept = pl.when(pl.col("_c")).then(pl.col(f)).otherwise(pl.lit(""))
        return kept.str.extract_all(r"\w+").list.sort()

    def norm(f: str) -> pl.Expr:
        return (
            pl.col(f).str.replace_all(FORMAT_STRIP_RE, "").str.replace_all("'", '"', literal=True)
        )

    reordered = pl.col("_c") & (words("before") == words("after"))
    return df.select(((norm("before") == norm("after")) | reordered).alias("hit")).to_series()


def hit(rule: Rule, found: Found) -> pl.Expr:
    both = pl.struct([pl.col(f) for f in _SIDES]).map_batches(_hit, return_dtype=pl.Boolean)
    return both & ~same_but_whitespace()


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pl.lit(
        "before and after differ only in formatting (commas, quote style) or import order"
    )


def reference(rule: Rule, row: Row, found: Found) -> bool:
    def fmt(f: str) -> str:
        return re.sub(FORMAT_STRIP_RE, "", row.txt(f)).replace("'", '"')

    def imports(f: str) -> bool:
        return re.fullmatch(r"\s*", re.sub(IMPORT_LINE_RE, "", row.txt(f))) is not None

    def words(f: str) -> list[str]:
        return sorted(re.findall(r"\w+", row.txt(f)))

    return row.nows("before") != row.nows("after") and (
        fmt("before") == fmt("after")
        or (
            any(re.search(IMPORT_KEYWORD_RE, row.txt(f)) for f in _SIDES)
            and imports("before")
            and imports("after")
            and words("before") == words("after")
        )
    )


KEYS: dict[str, tuple[bool, object]] = {}

"""format_only: not whitespace_only, but equal once whitespace and commas are removed and ' is
read as " (in JavaScript, TypeScript and Markdown's code blocks also a lone arrow parameter's
parentheses, those around `typeof X` and a semicolon ending a line: prettier's options; in
Markdown a list item's marker, `*` `+` or `-`), or both sides are only import lines with the
same words (an import sorter's edit, Rust's `use` lists included), or both are only comment
lines that read the same once their leading markers (`*`, `//`, `#`, `--`) are removed too,
with the same markers on both sides (a comment rewrapped: a Javadoc paragraph broken at other
words; not in prose, where those markers start list items and headings)."""

from __future__ import annotations

import re

import numpy as np
import polars as pl

from pipeline.filter import measures
from pipeline.filter.kinds.common import text
from pipeline.filter.kinds.contract import Found, Row, Rule
from pipeline.filter.regex import (
    BLANK_RE,
    COMMENT_LEAD_RE,
    COMMENT_MARK_RE,
    FORMAT_STRIP_RE,
    IMPORT_KEYWORD_RE,
    IMPORT_LINE_RE,
    JS_FORMAT_RES,
    MD_LIST_RE,
    NONBLANK_LINE_RE,
    PRETTIER_LANGUAGES,
)
from pipeline.schema import PROSE_LANGUAGES

_SIDES = ("before", "after", "context")


def _hit(s: pl.Series) -> pl.Series:
    """On a batch of (before, after, context, language), each test on the rows that can pass
    it only (filter/measures.py decides which, in one pass of the bytes): not the sides equal
    but for whitespace (whitespace_only's, and no-ops); the formatters' normalisations and a
    rewrapped comment remove only whitespace, punctuation and comment markers, so they run
    where the sides' word characters read the same; the import test (its regexes the costly
    part) on hunks in an import block."""
    df = s.struct.unnest().with_columns([text(f) for f in _SIDES])
    b, a = df["before"], df["after"]
    moved = ~measures.same_but_whitespace(b, a)
    out = np.zeros(df.height, dtype=bool)
    # by regex (while the kernels compile) the test would cost what it saves
    same = np.flatnonzero(moved & measures.same_word_bytes(b, a) if measures.compiled() else moved)
    if len(same):
        sub = df[same]
        got = sub.select(_norm("before") == _norm("after")).to_series().to_numpy()
        out[same[got | _rewrapped(sub).to_numpy()]] = True
    rest = np.flatnonzero(moved)
    in_imports = pl.any_horizontal([pl.col(f).str.contains(IMPORT_KEYWORD_RE) for f in _SIDES])
    rows = rest[df[rest].select(in_imports).to_series().to_numpy()] if len(rest) else rest
    if len(rows):
        sorter = _imports_only("before") & _imports_only("after")
        sorted_ = df[rows].select(sorter & (_words("before") == _words("after"))).to_series()
        out[rows[sorted_.to_numpy()]] = True
    return pl.Series(out)


def _norm(f: str) -> pl.Expr:
    """A side as the formatters would leave it (JavaScript's and Markdown's rules in those
    languages only)."""
    js = pl.col("language").fill_null("").is_in(list(PRETTIER_LANGUAGES))
    md = pl.col("language").fill_null("") == "markdown"
    js_side = pl.col(f)
    for rx, to in JS_FORMAT_RES:
        js_side = js_side.str.replace_all(rx, to)
    side = pl.when(js).then(js_side).otherwise(pl.col(f))
    side = pl.when(md).then(side.str.replace_all(MD_LIST_RE, "$1- ")).otherwise(side)
    return side.str.replace_all(FORMAT_STRIP_RE, "").str.replace_all("'", '"', literal=True)


def _imports_only(f: str) -> pl.Expr:
    return pl.col(f).str.replace_all(IMPORT_LINE_RE, "").str.contains(BLANK_RE)


def _words(f: str) -> pl.Expr:
    return pl.col(f).str.extract_all(r"\w+").list.sort()


def _rewrapped(df: pl.DataFrame) -> pl.Series:
    """Rows whose two sides are only comment lines with the same markers, equal once the
    markers are removed too (a comment rewrapped). Line by line only where both sides start
    with a comment marker (one anchored test a side): few rows do, and counting every line of
    every row doubled the rule's cost."""
    # not in prose, where `*` and `#` start list items and headings, not comment lines
    code = ~pl.col("language").fill_null("").is_in(list(PROSE_LANGUAGES))
    lead = pl.all_horizontal([pl.col(f).str.contains(COMMENT_LEAD_RE) for f in _SIDES[:2]])
    rows = df.select(code & lead).to_series().arg_true()
    out = np.zeros(df.height, dtype=bool)
    if len(rows) == 0:
        return pl.Series(out)

    def comment_only(f: str) -> pl.Expr:
        marks = pl.col(f).str.count_matches(COMMENT_MARK_RE)
        return (marks > 0) & (marks == pl.col(f).str.count_matches(NONBLANK_LINE_RE))

    def unmarked(f: str) -> pl.Expr:
        return pl.col(f).str.replace_all(COMMENT_MARK_RE, "").str.replace_all(FORMAT_STRIP_RE, "")

    def markers(f: str) -> pl.Expr:  # which markers: `///` -> `//` is an edit, not a rewrap
        found = pl.col(f).str.extract_all(COMMENT_MARK_RE)
        return found.list.eval(pl.element().str.strip_chars(" \t")).list.unique().list.sort()

    got = df[rows].select(
        comment_only("before")
        & comment_only("after")
        & (unmarked("before") == unmarked("after"))
        & (markers("before") == markers("after"))
    )
    out[rows.to_numpy()] = got.to_series().to_numpy()
    return pl.Series(out)


def hit(rule: Rule, found: Found) -> pl.Expr:
    cols = [pl.col(f) for f in (*_SIDES, "language")]
    return pl.struct(cols).map_batches(_hit, return_dtype=pl.Boolean)


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pl.lit(
        "before and after differ only in formatting (commas, quote style, optional "
        "parentheses or semicolons), import order or where a comment's lines break"
    )


def reference(rule: Rule, row: Row, found: Found) -> bool:
    def fmt(f: str) -> str:
        s = row.txt(f)
        if (row.get("language") or "") in PRETTIER_LANGUAGES:
            for rx, to in JS_FORMAT_RES:
                s = re.sub(rx, to.replace("$1", r"\1"), s)
        if row.get("language") == "markdown":
            s = re.sub(MD_LIST_RE, r"\1- ", s)
        return re.sub(FORMAT_STRIP_RE, "", s).replace("'", '"')

    def imports(f: str) -> bool:
        return re.fullmatch(r"\s*", re.sub(IMPORT_LINE_RE, "", row.txt(f))) is not None

    def words(f: str) -> list[str]:
        return sorted(re.findall(r"\w+", row.txt(f)))

    def comment_only(f: str) -> bool:
        marks = len(re.findall(COMMENT_MARK_RE, row.txt(f)))
        return 0 < marks == len(re.findall(NONBLANK_LINE_RE, row.txt(f)))

    def unmarked(f: str) -> str:
        return re.sub(FORMAT_STRIP_RE, "", re.sub(COMMENT_MARK_RE, "", row.txt(f)))

    def markers(f: str) -> list[str]:
        return sorted({m.strip(" \t") for m in re.findall(COMMENT_MARK_RE, row.txt(f))})

    return row.nows("before") != row.nows("after") and (
        fmt("before") == fmt("after")
        or (
            any(re.search(IMPORT_KEYWORD_RE, row.txt(f)) for f in _SIDES)
            and imports("before")
            and imports("after")
            and words("before") == words("after")
        )
        or (
            (row.get("language") or "") not in PROSE_LANGUAGES
            and comment_only("before")
            and comment_only("after")
            and unmarked("before") == unmarked("after")
            and markers("before") == markers("after")
        )
    )


KEYS: dict[str, tuple[bool, object]] = {}

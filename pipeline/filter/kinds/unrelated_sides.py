"""unrelated_sides: before and after each have min_lines non-blank lines and min_words distinct
words (names and words in ASCII letters: digits alone and other scripts are not counted, so a
table of numbers or a CJK paragraph is never "unrelated"), and under max_shared_words percent
of their distinct words are shared: the diff paired a block with an unrelated one (moved,
replaced, rewritten elsewhere), which no comment describes as one edit."""

from __future__ import annotations

import re

import polars as pl

from pipeline.filter.kinds.common import text
from pipeline.filter.kinds.contract import Found, Row, Rule
from pipeline.filter.regex import NONBLANK_LINE_RE, WORD_RE


def _words(rule: Rule) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(candidate, words both sides share, words of either side). Words are extracted only
    where both sides have min_lines non-blank lines (the costly part)."""
    p = rule.params
    enough = pl.all_horizontal(
        [text(f).str.count_matches(NONBLANK_LINE_RE) >= p["min_lines"] for f in ("before", "after")]
    )

    def words(f: str) -> pl.Expr:
        kept = pl.when(enough).then(text(f)).otherwise(pl.lit(""))
        return kept.str.extract_all(WORD_RE).list.unique()

    wb, wa = words("before"), words("after")
    cand = enough & (wb.list.len() >= p["min_words"]) & (wa.list.len() >= p["min_words"])
    shared = wb.list.set_intersection(wa).list.len().cast(pl.Int64)
    return cand, shared, wb.list.set_union(wa).list.len().cast(pl.Int64)


def hit(rule: Rule, found: Found) -> pl.Expr:
    cand, shared, union = _words(rule)
    return cand & (shared * 100 < rule.params["max_shared_words"] * union)


def reason(rule: Rule, found: Found) -> pl.Expr:
    _, shared, union = _words(rule)
    return pl.format(
        f"before and after share {{}} of their {{}} words (under "
        f"{rule.params['max_shared_words']}%): a block replaced by an unrelated one, not an "
        "edit of it",
        shared,
        union,
    )


def reference(rule: Rule, row: Row, found: Found) -> bool:
    p = rule.params
    sides = ("before", "after")
    if any(len(re.findall(NONBLANK_LINE_RE, row.txt(f))) < p["min_lines"] for f in sides):
        return False
    wb, wa = (set(re.findall(WORD_RE, row.txt(f))) for f in sides)
    if min(len(wb), len(wa)) < p["min_words"]:
        return False
    return len(wb & wa) * 100 < p["max_shared_words"] * len(wb | wa)


KEYS = {
    "min_lines": (False, 2),  # non-blank lines on each side
    "min_words": (False, 3),  # distinct words on each side
    "max_shared_words": (False, 10),  # percent of the two sides' distinct words
}

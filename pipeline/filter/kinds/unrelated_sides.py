"""unrelated_sides: before and after each have min_lines non-blank lines and min_words distinct
words (names and words in ASCII letters: digits alone and other scripts are not counted, so a
table of numbers or a CJK paragraph is never "unrelated"), and under max_shared_words percent
of their distinct words are shared: the diff paired a block with an unrelated one (moved,
replaced, rewritten elsewhere), which no comment describes as one edit."""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

from pipeline.filter import measures
from pipeline.filter.kinds.common import text
from pipeline.filter.kinds.contract import Found, Row, Rule
from pipeline.filter.regex import NONBLANK_LINE_RE, WORD_RE


def _on_words(rule: Rule, then: Callable[..., pl.Series], dtype: pl.DataType) -> pl.Expr:
    """then(candidate, shared, union) on each batch: a candidate, the distinct words both sides
    share, those of either side. The words are counted only where both sides have min_lines
    non-blank lines (filter/measures.py: compiled, as lists of strings they were the filter's
    costliest rule)."""
    p = rule.params

    def counted(s: pl.Series) -> pl.Series:
        b, a = s.struct.field("before"), s.struct.field("after")
        lines_b, lines_a, nb, na, shared = measures.word_sets(b, a, p["min_lines"])
        enough = (lines_b >= p["min_lines"]) & (lines_a >= p["min_lines"])
        cand = enough & (nb >= p["min_words"]) & (na >= p["min_words"])
        return then(pl.Series(cand), pl.Series(shared), pl.Series(nb + na - shared))

    both = pl.struct(text("before").alias("before"), text("after").alias("after"))
    return both.map_batches(counted, return_dtype=dtype)


def hit(rule: Rule, found: Found) -> pl.Expr:
    most = rule.params["max_shared_words"]
    return _on_words(
        rule, lambda cand, shared, union: cand & (shared * 100 < most * union), pl.Boolean()
    )


def reason(rule: Rule, found: Found) -> pl.Expr:
    most = rule.params["max_shared_words"]

    def say(cand: pl.Series, shared: pl.Series, union: pl.Series) -> pl.Series:
        frame = pl.DataFrame({"s": shared, "u": union})
        return frame.select(
            pl.format(
                f"before and after share {{}} of their {{}} words (under {most}%): a block "
                "replaced by an unrelated one, not an edit of it",
                "s",
                "u",
            )
        ).to_series()

    return _on_words(rule, say, pl.String())


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

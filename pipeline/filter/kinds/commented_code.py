"""commented_code: in code (not prose or an unknown language), most non-blank lines the edit
adds are line comments holding code (the item's language's marker, regex.py's *_CODE_RE; not a
TODO/FIXME/NOTE): debug output, imports or code switched off, dead code edited. Or the edit
only takes commented-out code away: every non-blank line it removes or adds is a line comment,
and most it removes hold code. No `except` regex (on the comment) may match: a commit that
says it disables code, or removes dead code, keeps it."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import polars as pl

from pipeline.filter.kinds.common import any_pattern, text
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule
from pipeline.filter.regex import COMMENT_NOTE_RE, HASH_CODE_RE, SLASH_CODE_RE
from pipeline.schema import HASH_COMMENT_LANGUAGES, PROSE_LANGUAGES

_ANY_COMMENT = r"(?m)^[ \t]*(?://|#)"  # the cheap test first: a line comment of either kind
_SLASH, _HASH = r"^[ \t]*//", r"^[ \t]*#"  # a line comment, in each syntax


def _lines(f: str, cand: pl.Expr) -> pl.Expr:
    """The non-blank lines of a side, on candidate rows (none elsewhere)."""
    e = pl.element()
    side = pl.when(cand).then(text(f)).otherwise(pl.lit(""))
    return side.str.split("\n").list.eval(e.filter(e.str.contains(r"\S")))


def _count(lines: pl.Expr, hash_lang: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(lines that are commented-out code, not a TODO/FIXME/NOTE; lines that are line
    comments), in the item's language's comment syntax."""
    e = pl.element()

    def n(rx: str, skip_notes: bool) -> pl.Expr:
        test = (
            e.str.contains(rx) & ~e.str.contains(COMMENT_NOTE_RE)
            if skip_notes
            else e.str.contains(rx)
        )
        return lines.list.eval(test.cast(pl.Int64)).list.sum()

    code = pl.when(hash_lang).then(n(HASH_CODE_RE, True)).otherwise(n(SLASH_CODE_RE, True))
    comments = pl.when(hash_lang).then(n(_HASH, False)).otherwise(n(_SLASH, False))
    return code, comments


def _commented() -> pl.Expr:
    """The rule's test on rows in code (not prose) whose sides hold a line comment."""
    hash_lang = pl.col("language").fill_null("").is_in(list(HASH_COMMENT_LANGUAGES))
    added = _lines("after", text("after").str.contains(_ANY_COMMENT))
    code, _ = _count(added, hash_lang)
    adds_code = code * 2 > added.list.len().cast(pl.Int64)
    # or it only takes commented-out code away: every line either side a line comment
    removed = _lines("before", text("before").str.contains(_ANY_COMMENT))
    rm_code, rm_comments = _count(removed, hash_lang)
    add_all = _lines("after", text("before").str.contains(_ANY_COMMENT))
    _, add_comments = _count(add_all, hash_lang)
    n_removed = removed.list.len().cast(pl.Int64)
    drops_code = (
        (rm_code * 2 > n_removed)
        & (rm_comments == n_removed)
        & (add_comments == add_all.list.len().cast(pl.Int64))
    )
    return adds_code | drops_code


def _hit(s: pl.Series) -> pl.Series:
    """_commented on the rows it can hold for: in code, a line comment on either side (the
    line lists are the rule's cost, and most items hold no line comment)."""
    df = s.struct.unnest()
    code_lang = ~pl.col("language").fill_null("").is_in(list(PROSE_LANGUAGES))
    some = text("after").str.contains(_ANY_COMMENT) | text("before").str.contains(_ANY_COMMENT)
    rows = df.select(code_lang & some).to_series().arg_true()
    out = np.zeros(df.height, dtype=bool)
    if len(rows):
        got = df[rows].select(_commented()).to_series().fill_null(False).to_numpy()
        out[rows.to_numpy()[got]] = True
    return pl.Series(out)


def hit(rule: Rule, found: Found) -> pl.Expr:
    sides = pl.struct("language", "before", "after")
    out = sides.map_batches(_hit, return_dtype=pl.Boolean)
    if rule.params["except_patterns"]:
        out = out & ~any_pattern(rule, "comment", "except_patterns")
    return out


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pl.lit(
        "the edit adds or takes out commented-out code, and the comment does not say it "
        "disables or removes code"
    )


def reference(rule: Rule, row: Row, found: Found) -> bool:
    language = row.get("language") or ""
    if language in PROSE_LANGUAGES or row.search(rule, "comment", "except_patterns"):
        return False
    code_rx, comment_rx = (
        (HASH_CODE_RE, _HASH) if language in HASH_COMMENT_LANGUAGES else (SLASH_CODE_RE, _SLASH)
    )

    def lines(f: str) -> list[str]:
        return [ln for ln in row.txt(f).split("\n") if re.search(r"\S", ln)]

    def n_code(ls: list[str]) -> int:
        return sum(1 for ln in ls if re.search(code_rx, ln) and not re.search(COMMENT_NOTE_RE, ln))

    added, removed = lines("after"), lines("before")
    if re.search(_ANY_COMMENT, row.txt("after")) and 2 * n_code(added) > len(added):
        return True
    if not removed or not re.search(_ANY_COMMENT, row.txt("before")):
        return False
    comments = all(re.search(comment_rx, ln) for ln in removed + added)
    return comments and 2 * n_code(removed) > len(removed)


def check(params: dict[str, Any], fail: Fail) -> None:
    params["except_patterns"] = params["except"]


KEYS = {"except": (False, ()), "ignore_case": (False, False)}

"""commented_code: in code (not prose or an unknown language), most non-blank lines the edit
adds are line comments holding code (the item's language's marker, regex.py's *_CODE_RE; not a
TODO/FIXME/NOTE): debug output, imports or code switched off, dead code edited. No `except`
regex (on the comment) may match: a commit that says it disables code keeps it."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from pipeline.filter.kinds.common import any_pattern, text
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule
from pipeline.filter.regex import COMMENT_NOTE_RE, HASH_CODE_RE, SLASH_CODE_RE
from pipeline.schema import HASH_COMMENT_LANGUAGES, PROSE_LANGUAGES

_ANY_COMMENT = r"(?m)^[ \t]*(?://|#)"  # the cheap test first: a line comment of either kind


def hit(rule: Rule, found: Found) -> pl.Expr:
    e = pl.element()
    after = text("after")
    language = pl.col("language").fill_null("")
    cand = after.str.contains(_ANY_COMMENT) & ~language.is_in(list(PROSE_LANGUAGES))
    lines = (
        pl.when(cand)
        .then(after)
        .otherwise(pl.lit(""))
        .str.split("\n")
        .list.eval(e.filter(e.str.contains(r"\S")))
    )

    def n_code(code: str) -> pl.Expr:
        is_code = e.str.contains(code) & ~e.str.contains(COMMENT_NOTE_RE)
        return lines.list.eval(is_code.cast(pl.Int64)).list.sum()

    hash_lang = language.is_in(list(HASH_COMMENT_LANGUAGES))
    code = pl.when(hash_lang).then(n_code(HASH_CODE_RE)).otherwise(n_code(SLASH_CODE_RE))
    out = cand & (code * 2 > lines.list.len().cast(pl.Int64))
    if rule.params["except_patterns"]:
        out = out & ~any_pattern(rule, "comment", "except_patterns")
    return out


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pl.lit(
        "most lines the edit adds are commented-out code, and the comment does not say it "
        "disables code"
    )


def reference(rule: Rule, row: Row, found: Found) -> bool:
    language = row.get("language") or ""
    if language in PROSE_LANGUAGES or not re.search(_ANY_COMMENT, row.txt("after")):
        return False
    added = [ln for ln in row.txt("after").split("\n") if re.search(r"\S", ln)]
    code = HASH_CODE_RE if language in HASH_COMMENT_LANGUAGES else SLASH_CODE_RE
    n_code = sum(1 for ln in added if re.search(code, ln) and not re.search(COMMENT_NOTE_RE, ln))
    return 2 * n_code > len(added) and not row.search(rule, "comment", "except_patterns")


def check(params: dict[str, Any], fail: Fail) -> None:
    params["except_patterns"] = params["except"]


KEYS = {"except": (False, ()), "ignore_case": (False, False)}

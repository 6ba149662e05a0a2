"""debug_only: in one of `languages`, the edit only adds lines or only removes them, and every
line it adds or removes (whitespace trimmed, blank lines aside) matches one of `patterns`
(`console.log(...)`, `debugger`, `dbg!(...)`): debug output put in or taken out on the way to
some other change, which the comment (the commit's subject) does not describe. No `except`
regex may match the comment: a commit that says it removes logging keeps its edit. A line
changed in place (`console.log(a)` -> `console.log(b)`) is an edit of its own, never a hit."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from pipeline.filter.kinds.common import any_pattern, text
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule
from pipeline.filter.regex import combine, with_flags


def _lines(f: str, cand: pl.Expr) -> pl.Expr:
    e = pl.element()
    return (
        pl.when(cand)
        .then(text(f))
        .otherwise(pl.lit(""))
        .str.split("\n")
        .list.eval(e.str.strip_chars())
        .list.eval(e.filter(e != ""))
    )


def hit(rule: Rule, found: Found) -> pl.Expr:
    language = pl.col("language").fill_null("")
    cand = language.is_in(list(rule.params["languages"])) & (text("before") != text("after"))
    before, after = _lines("before", cand), _lines("after", cand)
    removed, added = before.list.set_difference(after), after.list.set_difference(before)
    one_sided = (removed.list.len() == 0) != (added.list.len() == 0)
    debug = combine([p for _, p in rule.params["patterns"]], bool(rule.params["ignore_case"]))
    every = removed.list.concat(added).list.eval(pl.element().str.contains(debug)).list.all()
    out = cand & one_sided & every
    if rule.params["except_patterns"]:
        out = out & ~any_pattern(rule, "comment", "except_patterns")
    return out


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pl.lit(
        "the edit only adds or only removes debug output, and the comment does not speak of it"
    )


def reference(rule: Rule, row: Row, found: Found) -> bool:
    if (row.get("language") or "") not in rule.params["languages"]:
        return False
    if row.txt("before") == row.txt("after"):
        return False
    sides = [{s for ln in row.txt(f).split("\n") if (s := ln.strip())} for f in ("before", "after")]
    removed, added = sides[0] - sides[1], sides[1] - sides[0]
    if bool(removed) == bool(added):
        return False
    ic = bool(rule.params["ignore_case"])
    pats = [with_flags(p, ic) for _, p in rule.params["patterns"]]
    if not all(any(re.search(p, ln) for p in pats) for ln in removed | added):
        return False
    return not row.search(rule, "comment", "except_patterns")


def check(params: dict[str, Any], fail: Fail) -> None:
    params["except_patterns"] = params["except"]


KEYS = {
    "languages": (True, None),
    "patterns": (True, None),
    "except": (False, ()),
    "ignore_case": (False, False),
}

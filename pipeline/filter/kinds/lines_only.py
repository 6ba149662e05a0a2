"""lines_only: in one of `languages`, every line the edit adds or removes (whitespace trimmed,
blank lines aside; lines compared as sets) matches one of `patterns`, and no `except` regex
matches the comment. With `one_sided`, the edit must only add lines or only remove them, so a
line changed in place (`console.log(a)` -> `console.log(b)`) is an edit of its own, never a
hit. The defaults use it for what rides along in a commit about something else: debug output
put in or taken out, a package's own version number bumped (a subject that speaks of it, the
`except`, keeps the edit)."""

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
    some = (removed.list.len() > 0) | (added.list.len() > 0)
    if rule.params["one_sided"]:
        some = (removed.list.len() == 0) != (added.list.len() == 0)
    debug = combine([p for _, p in rule.params["patterns"]], bool(rule.params["ignore_case"]))
    every = removed.list.concat(added).list.eval(pl.element().str.contains(debug)).list.all()
    out = cand & some & every
    if rule.params["except_patterns"]:
        out = out & ~any_pattern(rule, "comment", "except_patterns")
    return out


def reason(rule: Rule, found: Found) -> pl.Expr:
    what = rule.params["what"] or f"lines matching {rule.name}'s patterns"
    how = "only adds or only removes" if rule.params["one_sided"] else "only changes"
    return pl.lit(f"the edit {how} {what}, and the comment does not speak of it")


def reference(rule: Rule, row: Row, found: Found) -> bool:
    if (row.get("language") or "") not in rule.params["languages"]:
        return False
    if row.txt("before") == row.txt("after"):
        return False
    sides = [{s for ln in row.txt(f).split("\n") if (s := ln.strip())} for f in ("before", "after")]
    removed, added = sides[0] - sides[1], sides[1] - sides[0]
    if not (removed or added) or (rule.params["one_sided"] and removed and added):
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
    "one_sided": (False, False),
    "what": (False, ""),  # what the lines are, in the reason ("debug output")
}

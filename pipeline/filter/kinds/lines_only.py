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

import numpy as np
import polars as pl

from pipeline.filter.kinds.common import any_pattern, text
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule
from pipeline.filter.regex import combine, with_flags
from pipeline.secrets.screen import holds, screen


def _lines(f: str) -> pl.Expr:
    e = pl.element()
    return text(f).str.split("\n").list.eval(e.str.strip_chars()).list.eval(e.filter(e != ""))


def hit(rule: Rule, found: Found) -> pl.Expr:
    p = rule.params
    ic = bool(p["ignore_case"])
    screens = [screen(with_flags(pat, ic)) for _, pat in p["patterns"]]
    held = [sc for sc in screens if sc is not None] if all(screens) else []
    debug = combine([pat for _, pat in p["patterns"]], ic)

    def lines_hit(s: pl.Series) -> pl.Series:
        """The line sets only of the rows in a language of the rule whose sides differ and,
        where every pattern has a literal screen, whose sides hold one of its strings (a
        changed line that matches holds one): splitting every item's lines was most of the
        rule's cost."""
        df = s.struct.unnest()
        cand = pl.col("language").fill_null("").is_in(list(p["languages"]))
        cand = cand & (text("before") != text("after"))
        if held:
            cand = cand & (holds(text("before"), held) | holds(text("after"), held))
        rows = df.select(cand).to_series().arg_true()
        out = np.zeros(len(df), dtype=bool)
        if len(rows):
            before, after = _lines("before"), _lines("after")
            removed, added = before.list.set_difference(after), after.list.set_difference(before)
            some = (removed.list.len() > 0) | (added.list.len() > 0)
            if p["one_sided"]:
                some = (removed.list.len() == 0) != (added.list.len() == 0)
            every = removed.list.concat(added).list.eval(pl.element().str.contains(debug))
            got = df[rows].select(some & every.list.all()).to_series().to_numpy()
            out[rows.to_numpy()[got]] = True
        return pl.Series(out)

    out = pl.struct("language", "before", "after").map_batches(lines_hit, return_dtype=pl.Boolean)
    if p["except_patterns"]:
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

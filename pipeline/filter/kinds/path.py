"""path: a glob matches the item's path (no "/" = a file name anywhere, trailing "/" = a
folder anywhere, `{repo}` the repository's name), no `except` glob does, and (before_blank)
the item only adds text."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.filter.kinds.common import any_pattern, blank, pattern_reason
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule
from pipeline.filter.regex import glob_to_regex


def hit(rule: Rule, found: Found) -> pl.Expr:
    p = rule.params
    out = any_pattern(rule, "path")
    if p["except_patterns"]:
        out = out & ~any_pattern(rule, "path", "except_patterns")
    if p["before_blank"]:
        out = out & blank("before")
    return out


def reason(rule: Rule, found: Found) -> pl.Expr:
    added = " and before is blank (text added whole)" if rule.params["before_blank"] else ""
    return pattern_reason(rule, ("path",), lambda label, f: f"{f} matches {label!r}{added}")


def reference(rule: Rule, row: Row, found: Found) -> bool:
    return (
        row.search(rule, "path")
        and not row.search(rule, "path", "except_patterns")
        and (not rule.params["before_blank"] or row.blank("before"))
    )


def check(params: dict[str, Any], fail: Fail) -> None:
    """Globs stay as written (the canonical form); patterns are their regexes."""
    params["patterns"] = tuple((lb, glob_to_regex(g)) for lb, g in params["globs"])
    params["except_patterns"] = tuple((lb, glob_to_regex(g)) for lb, g in params["except"])


KEYS = {
    "globs": (True, None),
    "except": (False, ()),
    "ignore_case": (False, False),
    "before_blank": (False, False),
}

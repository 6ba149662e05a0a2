"""regex: a pattern matches one of the fields, and no `except` pattern does."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.filter.kinds.common import any_pattern, pattern_reason
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule


def hit(rule: Rule, found: Found) -> pl.Expr:
    p = rule.params
    out = pl.any_horizontal([any_pattern(rule, f) for f in p["field"]])
    if p["except_patterns"]:
        out = out & ~pl.any_horizontal(
            [any_pattern(rule, f, "except_patterns") for f in p["field"]]
        )
    return out


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pattern_reason(rule, rule.params["field"], lambda label, f: f"{f} matches {label!r}")


def reference(rule: Rule, row: Row, found: Found) -> bool:
    fields = rule.params["field"]
    return any(row.search(rule, f) for f in fields) and not any(
        row.search(rule, f, "except_patterns") for f in fields
    )


def check(params: dict[str, Any], fail: Fail) -> None:
    params["except_patterns"] = params["except"]


KEYS = {
    "field": (True, None),
    "patterns": (True, None),
    "except": (False, ()),  # regexes: an item one of them matches is not a match
    "ignore_case": (False, False),
}

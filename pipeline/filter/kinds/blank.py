"""blank: every field named is empty or whitespace only."""

from __future__ import annotations

import polars as pl

from pipeline.filter.kinds.common import blank
from pipeline.filter.kinds.contract import Found, Row, Rule


def hit(rule: Rule, found: Found) -> pl.Expr:
    return pl.all_horizontal([blank(f) for f in rule.params["field"]])


def reason(rule: Rule, found: Found) -> pl.Expr:
    fields = rule.params["field"]
    are = "are" if len(fields) > 1 else "is"
    return pl.lit(f"{' and '.join(fields)} {are} blank (empty or whitespace only)")


def reference(rule: Rule, row: Row, found: Found) -> bool:
    return all(row.blank(f) for f in rule.params["field"])


KEYS = {"field": (False, ("before", "after"))}

"""language: an allow-list of languages ("" is an unknown language); the rest match."""

from __future__ import annotations

import polars as pl

from pipeline.filter.kinds.contract import Found, Row, Rule


def hit(rule: Rule, found: Found) -> pl.Expr:
    return ~pl.col("language").is_in(list(rule.params["allow"]))


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pl.format("language '{}' is not in the allow-list", pl.col("language"))


def reference(rule: Rule, row: Row, found: Found) -> bool:
    return row.get("language") not in rule.params["allow"]


KEYS = {"allow": (True, None)}

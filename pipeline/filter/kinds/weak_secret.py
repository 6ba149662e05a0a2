"""weak_secret: pipeline.secrets' weak detectors (a credential word assigned a literal, a
high-entropy literal) with their exemptions; never masks. Its findings (`<reason> in <field>`)
are found in Python, on the rows their prefilters flag, before the rules run (`prepare`): a
match is a row with findings, its reason lists them, and its flag names each reason
(`possible_secret:password_assignment`)."""

from __future__ import annotations

import polars as pl

from pipeline.filter.kinds.contract import Found, Row, Rule
from pipeline.filter.kinds.secret import SECRET_RULE_FIELDS
from pipeline.secrets.finding import suspect_column, suspects
from pipeline.secrets.places import CONTENT_FIELDS


def prepare(items: pl.DataFrame, rule: Rule) -> pl.Series:
    return suspect_column(items, rule.params["field"])


def hit(rule: Rule, found: Found) -> pl.Expr:
    return pl.col(found[0]).list.len() > 0  # found: the column prepare filled


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pl.col(found[0]).list.join("; ")


def labels(rule: Rule, row: Row) -> list[str]:
    """The reasons the row's fields give, each once, in field order."""
    found = [
        x
        for f in rule.params["field"]
        for x in suspects(row.txt(f), row.get("path") if f in CONTENT_FIELDS else None)
    ]
    return list(dict.fromkeys(why for _, _, why in found))


def reference(rule: Rule, row: Row, found: Found) -> bool:
    return bool(labels(rule, row))


KEYS = {"field": (False, SECRET_RULE_FIELDS)}

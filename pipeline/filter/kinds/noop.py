"""noop: nothing changed (before == after and as many lines removed as added)."""

from __future__ import annotations

import polars as pl

from pipeline.filter.kinds.common import noop
from pipeline.filter.kinds.contract import Found, Row, Rule


def hit(rule: Rule, found: Found) -> pl.Expr:
    return noop()


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pl.lit("before == after and as many lines removed as added")


def reference(rule: Rule, row: Row, found: Found) -> bool:
    return row.noop


KEYS: dict[str, tuple[bool, object]] = {}

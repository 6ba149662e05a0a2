"""whitespace_only: before and after equal once all whitespace is removed (and not a noop)."""

from __future__ import annotations

import polars as pl

from pipeline.filter.kinds.common import noop, same_but_whitespace
from pipeline.filter.kinds.contract import Found, Row, Rule


def hit(rule: Rule, found: Found) -> pl.Expr:
    return same_but_whitespace() & ~noop()


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pl.lit("before and after differ only in whitespace")


def reference(rule: Rule, row: Row, found: Found) -> bool:
    return not row.noop and row.nows("before") == row.nows("after")


KEYS: dict[str, tuple[bool, object]] = {}

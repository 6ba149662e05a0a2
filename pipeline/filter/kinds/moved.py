"""moved: a hunk that only deletes lines another hunk of the same change adds again, the
deletion half of moved code (pipeline/filter/moves.py: found over the stage's whole input,
`found` = (id, the path that adds the lines again) pairs). No `except` regex may match the
comment: a change that says it moves code describes its deletion too."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.filter.kinds.contract import Fail, Found, Row, Rule
from pipeline.filter.moves import FIND_COLUMNS as find_columns
from pipeline.filter.moves import find_moves as find


def hit(rule: Rule, found: Found) -> pl.Expr:
    return pl.col("id").is_in([i for i, _ in found]) if found else pl.lit(False)


def _why(path: str) -> str:
    return f"it only deletes lines the same change adds again in {path}: half of a move"


def reason(rule: Rule, found: Found) -> pl.Expr:
    if not found:
        return pl.lit(rule.name)
    ids = [i for i, _ in found]
    return pl.col("id").replace_strict(
        ids, [_why(p) for _, p in found], default=pl.lit(rule.name), return_dtype=pl.String
    )


def reference(rule: Rule, row: Row, found: Found) -> bool:
    return any(row.get("id") == i for i, _ in found)


def check(params: dict[str, Any], fail: Fail) -> None:
    params["except_patterns"] = params["except"]


__all__ = ["KEYS", "check", "find", "find_columns", "hit", "reason", "reference"]

KEYS = {
    "min_lines": (False, 2),  # different substantive lines the hunk deletes, at least
    "min_share": (False, 80),  # percent of them the change's other hunks add again
    "except": (False, ()),
    "ignore_case": (False, False),
}

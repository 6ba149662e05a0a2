"""mirror: every item under a folder that mirrors another, found over the stage's whole input
before its batches (pipeline/filter/mirrors.py: found = the rule's Mirror folders)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from pipeline.filter.kinds.common import text, when_chain
from pipeline.filter.kinds.contract import Found, Row, Rule
from pipeline.filter.mirrors import FIND_COLUMNS as find_columns
from pipeline.filter.mirrors import find_mirrors as find

if TYPE_CHECKING:
    from pipeline.filter.mirrors import Mirror


def _under(m: Mirror) -> pl.Expr:
    return (pl.col("repo") == m.repo) & text("path").str.starts_with(m.folder + "/")


def hit(rule: Rule, found: Found) -> pl.Expr:
    return pl.any_horizontal([_under(m) for m in found]) if found else pl.lit(False)


def reason(rule: Rule, found: Found) -> pl.Expr:
    return when_chain([(_under(m), pl.lit(m.reason())) for m in found], pl.lit(rule.name))


def reference(rule: Rule, row: Row, found: Found) -> bool:
    return any(
        row.get("repo") == m.repo and row.txt("path").startswith(m.folder + "/") for m in found
    )


__all__ = ["KEYS", "find", "find_columns", "hit", "reason", "reference"]

KEYS = {
    "min_changes": (False, 10),  # changes editing both
    "min_files": (False, 5),  # different files edited alike
    "min_share": (False, 50),  # percent of the folder's changes that edit the source too
    "min_alike": (False, 80),  # percent of the file pairs edited alike
}

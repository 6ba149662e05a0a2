"""The rules one item at a time in plain Python `re`: the oracle for the vectorised path.

Slow on purpose: the tests check apply.py against it on every fixture, the bench uses it as its
baseline. Each kind's `reference` (pipeline/filter/kinds/) mirrors its polars expression.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline.filter.kinds import KINDS
from pipeline.filter.kinds.contract import Row
from pipeline.filter.rules import RuleSet


def reference_decide(
    rules: RuleSet, row: dict[str, Any], found: Mapping[str, tuple[Any, ...]] | None = None
) -> tuple[str | None, list[str]]:
    """The same rules, one item at a time in plain Python `re`: (first drop rule, flags).
    `found` as apply_rules takes it. A flag of a kind with `labels` (weak_secret) names
    each reason: `<rule>:<reason>`."""
    first, flags = None, []
    view = Row(row)
    for r in rules.active:
        kind = KINDS[r.type]
        hit = kind.reference(r, view, (found or {}).get(r.name, ()))
        if hit and r.action == "flag":
            labels = kind.labels(r, view) if kind.labels else [""]
            flags += [f"{r.name}:{why}" if why else r.name for why in labels]
        elif hit and first is None:
            first = r.name
    return first, flags

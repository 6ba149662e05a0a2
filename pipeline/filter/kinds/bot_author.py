"""bot_author: the item's author is a bot: `author_is_bot` (as ingest or the source decided),
or a pattern on `author`."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.filter.kinds.common import any_pattern, rx, text, when_chain
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule


def hit(rule: Rule, found: Found) -> pl.Expr:
    p = rule.params
    conds = [pl.col("author_is_bot")] if p["use_author_is_bot"] else []
    if p["patterns"]:
        conds.append(any_pattern(rule, "author"))
    return pl.any_horizontal(conds)


def reason(rule: Rule, found: Found) -> pl.Expr:
    p = rule.params
    cases = []
    if p["use_author_is_bot"]:
        cases.append(
            (
                pl.col("author_is_bot"),
                pl.format("author '{}' is a bot (author_is_bot)", text("author")),
            )
        )
    cases += [
        (
            text("author").str.contains(rx(rule, pat)),
            pl.format(f"author '{{}}' matches {label!r}", text("author")),
        )
        for label, pat in p["patterns"]
    ]
    return when_chain(cases, pl.lit(rule.name))


def reference(rule: Rule, row: Row, found: Found) -> bool:
    return (rule.params["use_author_is_bot"] and bool(row.get("author_is_bot"))) or row.search(
        rule, "author"
    )


def check(params: dict[str, Any], fail: Fail) -> None:
    if not params["patterns"] and not params["use_author_is_bot"]:
        fail("a bot_author rule needs `patterns` or `use_author_is_bot: true`")


KEYS = {
    "patterns": (False, ()),
    "ignore_case": (False, True),
    "use_author_is_bot": (False, True),
}

"""length: a measure of one or more fields (chars, lines, tokens, or the longest line's chars)
below `min` or above `max`."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from pipeline.filter import measures
from pipeline.filter.kinds.common import text, when_chain
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule
from pipeline.ingest.base import count_lines
from pipeline.schema import TOKEN_PATTERN

UNITS = ("chars", "lines", "tokens", "line_chars")


def _measure(rule: Rule) -> pl.Expr:
    unit, fields = rule.params["unit"], rule.params["field"]
    parts = []
    for f in fields:
        c = text(f)
        if unit == "chars":
            e = c.str.len_chars()
        elif unit == "lines":  # as count_lines: "" is 0 lines, "a" and "a\n" are 1
            e = (
                pl.when(c == "")
                .then(0)
                .otherwise(
                    c.str.count_matches("\n", literal=True)
                    + (~c.str.ends_with("\n")).cast(pl.UInt32)
                )
            )
        elif unit == "tokens":
            e = c.map_batches(count_tokens, return_dtype=pl.Int64)
        else:  # line_chars: the longest line
            e = c.str.split("\n").list.eval(pl.element().str.len_chars()).list.max()
        parts.append(e.cast(pl.Int64))
    if len(parts) == 1:
        return parts[0]
    return pl.max_horizontal(parts) if unit == "line_chars" else pl.sum_horizontal(parts)


def count_tokens(s: pl.Series) -> pl.Series:
    """TOKEN_PATTERN's matches per string (filter/measures.py)."""
    return pl.Series(measures.tokens(s))


def hit(rule: Rule, found: Found) -> pl.Expr:
    """The measure is used once (is_between): polars computes a sub-expression again at each
    use, and a token count is the costly part of the default rules."""
    p, v = rule.params, _measure(rule)
    if p["min"] is not None and p["max"] is not None:
        return ~v.is_between(p["min"], p["max"])
    return v < p["min"] if p["min"] is not None else v > p["max"]


def reason(rule: Rule, found: Found) -> pl.Expr:
    p, v = rule.params, _measure(rule)
    what = "+".join(p["field"])
    unit = "chars in its longest line" if p["unit"] == "line_chars" else p["unit"]
    cases = []
    if p["max"] is not None:
        cases.append((v > p["max"], pl.format(f"{what}: {{}} {unit} > max {p['max']}", v)))
    if p["min"] is not None:
        cases.append((v < p["min"], pl.format(f"{what}: {{}} {unit} < min {p['min']}", v)))
    return when_chain(cases, pl.lit(rule.name))


def reference(rule: Rule, row: Row, found: Found) -> bool:
    p = rule.params
    fn = {
        "chars": len,
        "lines": count_lines,
        "tokens": lambda s: len(re.findall(TOKEN_PATTERN, s)),
        "line_chars": lambda s: max(len(x) for x in s.split("\n")),
    }[p["unit"]]
    vals = [fn(row.txt(f)) for f in p["field"]]
    v = max(vals) if p["unit"] == "line_chars" else sum(vals)
    return (p["min"] is not None and v < p["min"]) or (p["max"] is not None and v > p["max"])


def check(params: dict[str, Any], fail: Fail) -> None:
    lo, hi = params["min"], params["max"]
    if lo is None and hi is None:
        fail("a length rule needs `min`, `max` or both")
    if lo is not None and hi is not None and lo > hi:
        fail(f"min {lo} > max {hi}")


KEYS = {"field": (True, None), "unit": (True, None), "min": (False, None), "max": (False, None)}

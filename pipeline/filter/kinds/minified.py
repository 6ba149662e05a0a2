"""minified: some line is at least min_line_chars long, at most max_space_share percent of it
spaces or tabs, between the symbol shares percent symbols (not a letter, digit, _ or space),
and at least min_separator_share percent ; and as much } (minified JS or CSS: a regex literal
is mostly symbols; a data string or markup lacks ; or })."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from pipeline.filter.kinds.common import text, when_chain
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule
from pipeline.filter.regex import MINIFIED_SEPARATORS, MINIFIED_SPACE_RE, MINIFIED_SYMBOL_RE


def _lines(rule: Rule, f: str) -> pl.Expr:
    """Field f has such a line. Only the long lines (few) are counted."""
    p = rule.params
    e = pl.element()
    n = e.str.len_chars().cast(pl.Int64)

    def pct(x: pl.Expr) -> pl.Expr:
        return x.cast(pl.Int64) * 100

    symbols = pct(e.str.count_matches(MINIFIED_SYMBOL_RE))
    dense = (pct(e.str.count_matches(MINIFIED_SPACE_RE)) <= p["max_space_share"] * n) & (
        symbols >= p["min_symbol_share"] * n
    )
    dense = dense & (symbols <= p["max_symbol_share"] * n)
    for sep in MINIFIED_SEPARATORS:
        dense = dense & (
            pct(e.str.count_matches(sep, literal=True)) >= p["min_separator_share"] * n
        )
    long = text(f).str.split("\n").list.eval(e.filter(e.str.len_chars() >= p["min_line_chars"]))
    return long.list.eval(dense).list.any()


def hit(rule: Rule, found: Found) -> pl.Expr:
    return pl.any_horizontal([_lines(rule, f) for f in rule.params["field"]])


def reason(rule: Rule, found: Found) -> pl.Expr:
    p = rule.params
    what = (
        f"a line of {p['min_line_chars']}+ chars, at most {p['max_space_share']}% spaces, "
        f"{p['min_symbol_share']}-{p['max_symbol_share']}% symbols and ; and }} each at "
        f"least {p['min_separator_share']}% (minified code)"
    )
    cases = [(_lines(rule, f), pl.lit(f"{f} has {what}")) for f in p["field"]]
    return when_chain(cases, pl.lit(rule.name))


def reference(rule: Rule, row: Row, found: Found) -> bool:
    p = rule.params

    def dense(ln: str) -> bool:
        n, symbols = len(ln), 100 * len(re.findall(MINIFIED_SYMBOL_RE, ln))
        return (
            100 * len(re.findall(MINIFIED_SPACE_RE, ln)) <= p["max_space_share"] * n
            and p["min_symbol_share"] * n <= symbols <= p["max_symbol_share"] * n
            and all(100 * ln.count(c) >= p["min_separator_share"] * n for c in MINIFIED_SEPARATORS)
        )

    return any(
        dense(ln)
        for f in p["field"]
        for ln in row.txt(f).split("\n")
        if len(ln) >= p["min_line_chars"]
    )


def check(params: dict[str, Any], fail: Fail) -> None:
    if params["min_symbol_share"] > params["max_symbol_share"]:
        fail(
            f"min_symbol_share {params['min_symbol_share']} > "
            f"max_symbol_share {params['max_symbol_share']}"
        )


KEYS = {
    "field": (False, ("before", "after")),
    "min_line_chars": (False, 200),
    "max_space_share": (False, 10),
    "min_symbol_share": (False, 15),
    "max_symbol_share": (False, 45),
    "min_separator_share": (False, 0.3),
}

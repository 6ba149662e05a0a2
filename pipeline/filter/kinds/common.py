"""What the kinds' matches share: polars expression helpers over a batch's columns (the kinds'
contract, and Row for their references, are in contract.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from pipeline.filter import measures
from pipeline.filter.kinds.contract import Rule
from pipeline.filter.regex import (
    BLANK_RE,
    REPO_NAME_CHARS,
    REPO_NAME_RE,
    REPO_SLOT,
    combine,
    repo_literal,
    with_flags,
)
from pipeline.secrets.places import CONTENT_FIELDS, SAMPLE_PATH
from pipeline.secrets.screen import passed, screen

# ---------------------------------------------------------------- polars, over a batch


def text(f: str) -> pl.Expr:
    return pl.col(f).fill_null("")


def rx(rule: Rule, pat: str) -> str:
    return with_flags(pat, bool(rule.params.get("ignore_case")))


def _repo_hits(s: pl.Series, pattern: str) -> pl.Series:
    """Rows of struct column s (t: text, r: repo) whose text matches glob regex `pattern` with
    its `{repo}` slots filled by the row's repository name. The column is scanned once with any
    plain name in the slots; only the rows that pass are matched again, one regex per name
    (a regex per row costs 160 us: 8 s of 50,000 items)."""
    txt, repo = s.struct.field("t"), s.struct.field("r")
    out = np.zeros(len(s), dtype=bool)
    rows = np.flatnonzero(txt.str.contains(pattern.replace(REPO_SLOT, REPO_NAME_CHARS)).to_numpy())
    if len(rows):
        names = repo.gather(rows).str.extract(REPO_NAME_RE, 1)
        cand = pl.DataFrame({"row": rows, "t": txt.gather(rows), "name": names})
        for (name,), g in cand.drop_nulls("name").group_by("name", maintain_order=True):
            hit = g["t"].str.contains(pattern.replace(REPO_SLOT, repo_literal(str(name))))
            out[g["row"].to_numpy()[hit.to_numpy()]] = True
    return pl.Series(out)


def matches(rule: Rule, f: str, pat: str) -> pl.Expr:
    """One pattern of the rule on one field (a `{repo}` glob per repository: _repo_hits)."""
    if REPO_SLOT in pat:
        pattern = rx(rule, pat)
        return pl.struct(text(f).alias("t"), text("repo").alias("r")).map_batches(
            lambda s: _repo_hits(s, pattern), return_dtype=pl.Boolean
        )
    return text(f).str.contains(rx(rule, pat))


def any_pattern(rule: Rule, f: str, key: str = "patterns") -> pl.Expr:
    """One combined regex per field: a single scan over the column (`{repo}` globs apart),
    or over the rows that hold one of its literal screen's strings (screened_contains)."""
    pats = [p for _, p in rule.params[key] if REPO_SLOT not in p]
    hits = [matches(rule, f, p) for _, p in rule.params[key] if REPO_SLOT in p]
    if pats:
        hits.insert(0, screened_contains(text(f), pats, bool(rule.params.get("ignore_case"))))
    return hits[0] if len(hits) == 1 else pl.any_horizontal(hits)


def screened_contains(col: pl.Expr, patterns: list[str], ignore_case: bool) -> pl.Expr:
    """Where any of `patterns` matches the string column: those with a literal screen
    (secrets/screen.py: strings one of which each match holds, such as `@generated`) are run
    only on the rows one Aho-Corasick pass finds holding such a string, the others on every
    row. A rule's regexes anchored at every line's start (`(?m)^[ \t]*(?:#|//|...)`) scan a
    whole item slowly; most items hold none of their strings."""
    screens = [screen(with_flags(p, ignore_case)) for p in patterns]
    if not any(screens):
        return col.str.contains(combine(patterns, ignore_case))
    rest = [p for p, sc in zip(patterns, screens, strict=True) if sc is None]
    lit = [p for p, sc in zip(patterns, screens, strict=True) if sc is not None]
    held = [sc for sc in screens if sc is not None]

    def run(s: pl.Series) -> pl.Series:
        out = (
            s.str.contains(combine(rest, ignore_case)).to_numpy().copy()
            if rest
            else np.zeros(len(s), dtype=bool)
        )
        rows = passed(s, held).arg_true()
        if len(rows):
            got = s.gather(rows).str.contains(combine(lit, ignore_case)).to_numpy()
            out[rows.to_numpy()[got]] = True
        return pl.Series(out)

    return col.map_batches(run, return_dtype=pl.Boolean)


def not_sample(f: str) -> pl.Expr:
    """Where a sample pattern applies in field f: everywhere but in the text of a test
    fixture's or a doc's file (CONTENT_FIELDS; pipeline.secrets.places SAMPLE_PATH)."""
    return ~text("path").str.contains(SAMPLE_PATH) if f in CONTENT_FIELDS else pl.lit(True)


def blank(f: str) -> pl.Expr:
    return text(f).str.contains(BLANK_RE)


def same_but_whitespace() -> pl.Expr:
    """Equal once all whitespace (`\\s`) is removed (no-ops included): filter/measures.py."""
    return pl.struct(text("before").alias("b"), text("after").alias("a")).map_batches(
        _ws_equal, return_dtype=pl.Boolean
    )


def _ws_equal(s: pl.Series) -> pl.Series:
    return pl.Series(measures.same_but_whitespace(s.struct.field("b"), s.struct.field("a")))


def noop() -> pl.Expr:
    return (text("before") == text("after")) & (pl.col("lines_removed") == pl.col("lines_added"))


def when_chain(cases: list[tuple[pl.Expr, pl.Expr]], default: pl.Expr) -> pl.Expr:
    expr: Any = None  # a when/then chain
    for cond, val in cases:
        expr = pl.when(cond).then(val) if expr is None else expr.when(cond).then(val)
    return default if expr is None else expr.otherwise(default)


def pattern_reason(rule: Rule, fields: tuple[str, ...], say: Callable[[str, str], str]) -> pl.Expr:
    """The first (field, pattern) that matches, in words: say(label, field)."""
    cases = [
        (matches(rule, f, pat), pl.lit(say(label, f)))
        for f in fields
        for label, pat in rule.params["patterns"]
    ]
    return when_chain(cases, pl.lit(rule.name))

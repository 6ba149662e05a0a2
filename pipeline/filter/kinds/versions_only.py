"""versions_only: an item in one of `languages` ("" an unknown language) whose before and after
differ, each holds a dotted version (1.8, 0.15.0), and they are equal once numbers, versions
and hashes are folded (shapes' normalise_text): an edit of version numbers only."""

from __future__ import annotations

import re

import polars as pl

from pipeline.filter.kinds.common import text
from pipeline.filter.kinds.contract import Found, Row, Rule
from pipeline.filter.regex import DOTTED_VERSION_RE
from pipeline.shapes.normalise import normalise_text, normalise_text_expr, vectorised

_SIDES = ("before", "after")


def hit(rule: Rule, found: Found) -> pl.Expr:
    """The folding is polars', with its Python on the rare strings where polars' regex could
    differ (shapes' vectorised)."""
    language = pl.col("language").fill_null("")
    cand = language.is_in(list(rule.params["languages"])) & (text("before") != text("after"))
    cand = cand & pl.all_horizontal([text(f).str.contains(DOTTED_VERSION_RE) for f in _SIDES])

    def key(f: str) -> pl.Expr:
        return (
            pl.when(cand)
            .then(text(f))
            .otherwise(pl.lit(""))
            .map_batches(
                lambda s: vectorised(s, normalise_text_expr, normalise_text),
                return_dtype=pl.String,
            )
        )

    return cand & (key("before") == key("after"))


def reason(rule: Rule, found: Found) -> pl.Expr:
    language = pl.col("language").fill_null("")
    named = pl.when(language == "").then(pl.lit("(no language)")).otherwise(language)
    return pl.format("a {} edit that only changes version numbers", named)


def reference(rule: Rule, row: Row, found: Found) -> bool:
    return (
        (row.get("language") or "") in rule.params["languages"]
        and row.txt("before") != row.txt("after")
        and all(re.search(DOTTED_VERSION_RE, row.txt(f)) for f in _SIDES)
        and normalise_text(row.txt("before")) == normalise_text(row.txt("after"))
    )


KEYS = {"languages": (True, None)}

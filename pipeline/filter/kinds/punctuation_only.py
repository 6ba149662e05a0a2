"""punctuation_only: both sides are only brackets and separators (`});` -> `};`, a lone `}`
deleted), short (max_chars together), and they differ: a fragment of some other change, with
nothing a model could learn the edit from."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from pipeline.filter.kinds.common import noop, text
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule

PUNCT = r"[\s{}()\[\];,.]*"


def _side(f: str) -> pl.Expr:
    return text(f).str.contains(rf"\A{PUNCT}\z")


def hit(rule: Rule, found: Found) -> pl.Expr:
    short = text("before").str.len_chars() + text("after").str.len_chars()
    blank = text("before").str.strip_chars() == ""
    both_blank = blank & (text("after").str.strip_chars() == "")
    return (
        _side("before")
        & _side("after")
        & ~noop()
        & ~both_blank
        & (short <= rule.params["max_chars"])
    )


def reason(rule: Rule, found: Found) -> pl.Expr:
    return pl.lit("before and after are only brackets and separators")


def reference(rule: Rule, row: Row, found: Found) -> bool:
    b, a = row.txt("before"), row.txt("after")
    return (
        re.fullmatch(PUNCT, b) is not None
        and re.fullmatch(PUNCT, a) is not None
        and not row.noop
        and bool(b.strip() or a.strip())
        and len(b) + len(a) <= rule.params["max_chars"]
    )


def check(params: dict[str, Any], fail: Fail) -> None:
    if not isinstance(params["max_chars"], int) or params["max_chars"] < 1:
        fail("`max_chars` must be a positive integer")


KEYS = {"max_chars": (False, 40)}

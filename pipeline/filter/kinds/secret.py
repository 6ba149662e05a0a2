"""secret: a high-confidence credential pattern matches a field (its sample_patterns only
outside test fixtures and docs); every match is masked as [REDACTED:<name>] in all outputs,
whatever the action (apply.py masks; this module matches). A pattern may name one of the token
formats the ingest masker finds (`github_pat: {format: github_token}`: pipeline.secrets.rules
TOKEN_FORMATS) rather than spell it again; the label stays the rule file's."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from pipeline.filter.kinds.common import any_pattern, matches, not_sample, rx, text, when_chain
from pipeline.filter.kinds.contract import Fail, Found, Row, Rule
from pipeline.filter.regex import with_flags
from pipeline.secrets.places import CONTENT_FIELDS, sample_path
from pipeline.secrets.rules import TOKEN_FORMATS

SECRET_RULE_FIELDS = ("before", "after", "context", "comment")  # a secret rule's default fields


def _field_hit(rule: Rule, f: str) -> pl.Expr:
    """The rule's patterns, or its sample_patterns outside test fixtures and docs."""
    out = any_pattern(rule, f)
    if rule.params["sample_patterns"]:
        out = out | (not_sample(f) & any_pattern(rule, f, "sample_patterns"))
    return out


def hit(rule: Rule, found: Found) -> pl.Expr:
    return pl.any_horizontal([_field_hit(rule, f) for f in rule.params["field"]])


def reason(rule: Rule, found: Found) -> pl.Expr:
    p = rule.params
    cases = [
        (matches(rule, f, pat), pl.lit(f"{label} in {f}"))
        for f in p["field"]
        for label, pat in p["patterns"]
    ]
    cases += [
        (not_sample(f) & text(f).str.contains(rx(rule, pat)), pl.lit(f"{label} in {f}"))
        for f in p["field"]
        for label, pat in p["sample_patterns"]
    ]
    return when_chain(cases, pl.lit(rule.name))


def reference(rule: Rule, row: Row, found: Found) -> bool:
    sample = sample_path(row.get("path"))
    fields = rule.params["field"]
    return any(row.search(rule, f) for f in fields) or any(
        row.search(rule, f, "sample_patterns")
        for f in fields
        if not (sample and f in CONTENT_FIELDS)
    )


def check(params: dict[str, Any], fail: Fail) -> None:
    for label, pat in (*params["patterns"], *params["sample_patterns"]):
        try:
            empty = re.search(with_flags(pat, params["ignore_case"]), "")
        except re.error:
            continue  # rules.py names an invalid pattern
        if empty:  # it would mask between letters
            fail(f"pattern {label!r}: a secret pattern must not match the empty string")


KEYS = {
    "field": (False, SECRET_RULE_FIELDS),
    "patterns": (True, None),
    "sample_patterns": (False, ()),  # secrets outside test fixtures and docs only
    "ignore_case": (False, False),
}

formats = TOKEN_FORMATS  # what a pattern may name: `label: {format: <name>}`

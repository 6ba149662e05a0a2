"""Filter rule kinds, one module each: its keys, its match (a polars expression over a batch),
its reason in words (computed on the rejected rows only, never quoting matched text), and its
per-row reference in plain Python (the oracle the tests hold the match to).

A new kind is one module here, named in KINDS below, plus its tests; rules files then use it
by name (`type: <name>`). Key validators shared by kinds (field, patterns, globs, shares ...)
are in rules.py, picked by key name; a kind's `check` validates what spans its keys.
"""

from __future__ import annotations

from pipeline.filter.kinds import (
    blank,
    bot_author,
    commented_code,
    format_only,
    language,
    length,
    minified,
    mirror,
    noop,
    path,
    regex,
    secret,
    unrelated_sides,
    versions_only,
    weak_secret,
    whitespace_only,
)
from pipeline.filter.kinds.common import Kind

# in the order `unknown rule type` lists them
KINDS: dict[str, Kind] = {
    "length": length.KIND,
    "noop": noop.KIND,
    "whitespace_only": whitespace_only.KIND,
    "format_only": format_only.KIND,
    "blank": blank.KIND,
    "regex": regex.KIND,
    "secret": secret.KIND,
    "weak_secret": weak_secret.KIND,
    "bot_author": bot_author.KIND,
    "path": path.KIND,
    "language": language.KIND,
    "minified": minified.KIND,
    "unrelated_sides": unrelated_sides.KIND,
    "commented_code": commented_code.KIND,
    "versions_only": versions_only.KIND,
    "mirror": mirror.KIND,
}

__all__ = ["KINDS", "Kind"]

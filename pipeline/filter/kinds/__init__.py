"""Filter rule kinds, one module each: its keys, its match (a polars expression over a batch),
its reason in words (computed on the rejected rows only, never quoting matched text), and its
per-row reference in plain Python (the oracle the tests hold the match to).

A new kind is one module here (KEYS, hit, reason, reference; optionally check, prepare,
labels, formats: see contract.Kind), listed in KINDS below, plus its tests; rules files then use
it by name (`type: <name>`). Key validators shared by kinds (field, patterns, globs, shares ...)
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
    lines_only,
    minified,
    mirror,
    moved,
    noop,
    path,
    punctuation_only,
    regex,
    secret,
    unrelated_sides,
    versions_only,
    weak_secret,
    whitespace_only,
)
from pipeline.filter.kinds.contract import Kind

# in the order `unknown rule type` lists them; a kind's name is its module's
KINDS: dict[str, Kind] = {
    m.__name__.rpartition(".")[2]: Kind.of(m)
    for m in (
        length,
        noop,
        whitespace_only,
        format_only,
        punctuation_only,
        blank,
        regex,
        secret,
        weak_secret,
        bot_author,
        path,
        language,
        minified,
        unrelated_sides,
        commented_code,
        lines_only,
        versions_only,
        mirror,
        moved,
    )
}

__all__ = ["KINDS", "Kind"]

"""The rules one item at a time in plain Python `re`: the oracle for the vectorised path.

Slow on purpose: the tests check apply.py against it on every fixture, the bench uses it as
its baseline. Each rule type here mirrors its polars expression in apply.py.
"""

from __future__ import annotations

import re
from typing import Any

from pipeline.filter.regex import (
    FORMAT_STRIP_RE,
    IMPORT_KEYWORD_RE,
    IMPORT_LINE_RE,
    TOKEN_RE,
    with_flags,
)
from pipeline.filter.rules import Rule, RuleSet
from pipeline.ingest.base import count_lines


def reference_decide(rules: RuleSet, row: dict[str, Any]) -> tuple[str | None, list[str]]:
    """The same rules, one item at a time in plain Python `re`: (first drop rule, flags).

    Slow on purpose: the tests check the vectorised path against it, the bench uses it as its
    baseline.
    """
    first, flags = None, []

    def txt(f: str) -> str:
        return row.get(f) or ""

    def search(r: Rule, f: str, key: str = "patterns") -> bool:
        return any(
            re.search(with_flags(p, bool(r.params.get("ignore_case"))), txt(f))
            for _, p in r.params[key]
        )

    def blank(f: str) -> bool:
        return re.fullmatch(r"\s*", txt(f)) is not None

    def nows(f: str) -> str:
        return re.sub(r"\s+", "", txt(f))

    def fmt(f: str) -> str:
        return re.sub(FORMAT_STRIP_RE, "", txt(f)).replace("'", '"')

    def imports(f: str) -> bool:
        return re.fullmatch(r"\s*", re.sub(IMPORT_LINE_RE, "", txt(f))) is not None

    def words(f: str) -> list[str]:
        return sorted(re.findall(r"\w+", txt(f)))

    for r in rules.active:
        t, p = r.type, r.params
        noop = txt("before") == txt("after") and row["lines_removed"] == row["lines_added"]
        if t == "length":
            fn = {
                "chars": len,
                "lines": count_lines,
                "tokens": lambda s: len(re.findall(TOKEN_RE, s)),
                "line_chars": lambda s: max(len(x) for x in s.split("\n")),
            }[p["unit"]]
            vals = [fn(txt(f)) for f in p["field"]]
            v = max(vals) if p["unit"] == "line_chars" else sum(vals)
            hit = (p["min"] is not None and v < p["min"]) or (p["max"] is not None and v > p["max"])
        elif t == "noop":
            hit = noop
        elif t == "whitespace_only":
            hit = not noop and nows("before") == nows("after")
        elif t == "format_only":
            hit = nows("before") != nows("after") and (
                fmt("before") == fmt("after")
                or (
                    any(
                        re.search(IMPORT_KEYWORD_RE, txt(f)) for f in ("before", "after", "context")
                    )
                    and imports("before")
                    and imports("after")
                    and words("before") == words("after")
                )
            )
        elif t == "blank":
            hit = all(blank(f) for f in p["field"])
        elif t in ("regex", "secret"):
            hit = any(search(r, f) for f in p["field"])
        elif t == "path":
            hit = (
                search(r, "path")
                and not search(r, "path", "except_patterns")
                and (not p["before_blank"] or blank("before"))
            )
        elif t == "bot_author":
            hit = (p["use_author_is_bot"] and bool(row["author_is_bot"])) or search(r, "author")
        else:
            hit = row["language"] not in p["allow"]
        if hit and r.action == "flag":
            flags.append(r.name)
        elif hit and first is None:
            first = r.name
    return first, flags

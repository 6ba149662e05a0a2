"""The rules one item at a time in plain Python `re`: the oracle for the vectorised path.

Slow on purpose: the tests check apply.py against it on every fixture, the bench uses it as
its baseline. Each rule type here mirrors its polars expression in apply.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pipeline.filter.mirrors import Mirror
from pipeline.filter.regex import (
    COMMENT_NOTE_RE,
    DOTTED_VERSION_RE,
    FORMAT_STRIP_RE,
    HASH_CODE_RE,
    IMPORT_KEYWORD_RE,
    IMPORT_LINE_RE,
    MINIFIED_SEPARATORS,
    MINIFIED_SPACE_RE,
    MINIFIED_SYMBOL_RE,
    NONBLANK_LINE_RE,
    REPO_NAME_RE,
    REPO_SLOT,
    SLASH_CODE_RE,
    TOKEN_RE,
    WORD_RE,
    repo_literal,
    with_flags,
)
from pipeline.filter.rules import Rule, RuleSet
from pipeline.ingest.base import count_lines
from pipeline.schema import HASH_COMMENT_LANGUAGES, PROSE_LANGUAGES
from pipeline.secrets import CONTENT_FIELDS, sample_path, suspects
from pipeline.shapes.normalise import normalise_text


def reference_decide(
    rules: RuleSet, row: dict[str, Any], mirrors: Mapping[str, tuple[Mirror, ...]] | None = None
) -> tuple[str | None, list[str]]:
    """The same rules, one item at a time in plain Python `re`: (first drop rule, flags).

    Slow on purpose: the tests check the vectorised path against it, the bench uses it as its
    baseline. `mirrors` as apply_rules takes them.
    """
    first, flags = None, []

    def txt(f: str) -> str:
        return row.get(f) or ""

    name = re.search(REPO_NAME_RE.replace("$", r"\Z"), txt("repo"))  # `{repo}` in a path glob

    def regex(p: str) -> str | None:
        if REPO_SLOT not in p:
            return p
        return p.replace(REPO_SLOT, repo_literal(name.group(1))) if name else None

    def search(r: Rule, f: str, key: str = "patterns") -> bool:
        return any(
            re.search(with_flags(x, bool(r.params.get("ignore_case"))), txt(f))
            for _, p in r.params[key]
            if (x := regex(p)) is not None
        )

    def minified(r: Rule, f: str) -> bool:
        p = r.params

        def dense(ln: str) -> bool:
            n, symbols = len(ln), 100 * len(re.findall(MINIFIED_SYMBOL_RE, ln))
            return (
                100 * len(re.findall(MINIFIED_SPACE_RE, ln)) <= p["max_space_share"] * n
                and p["min_symbol_share"] * n <= symbols <= p["max_symbol_share"] * n
                and all(
                    100 * ln.count(c) >= p["min_separator_share"] * n for c in MINIFIED_SEPARATORS
                )
            )

        return any(dense(ln) for ln in txt(f).split("\n") if len(ln) >= p["min_line_chars"])

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

    def unrelated(p: dict[str, Any]) -> bool:
        if any(
            len(re.findall(NONBLANK_LINE_RE, txt(f))) < p["min_lines"] for f in ("before", "after")
        ):
            return False
        wb, wa = set(re.findall(WORD_RE, txt("before"))), set(re.findall(WORD_RE, txt("after")))
        if min(len(wb), len(wa)) < p["min_words"]:
            return False
        return len(wb & wa) * 100 < p["max_shared_words"] * len(wb | wa)

    def commented_code(r: Rule) -> bool:
        language = row.get("language") or ""
        if language in PROSE_LANGUAGES or not re.search(r"(?m)^[ \t]*(?://|#)", txt("after")):
            return False
        added = [ln for ln in txt("after").split("\n") if re.search(r"\S", ln)]
        code = HASH_CODE_RE if language in HASH_COMMENT_LANGUAGES else SLASH_CODE_RE
        n_code = sum(
            1 for ln in added if re.search(code, ln) and not re.search(COMMENT_NOTE_RE, ln)
        )
        return 2 * n_code > len(added) and not search(r, "comment", "except_patterns")

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
        elif t == "minified":
            hit = any(minified(r, f) for f in p["field"])
        elif t == "unrelated_sides":
            hit = unrelated(p)
        elif t == "commented_code":
            hit = commented_code(r)
        elif t == "versions_only":
            hit = (
                (row.get("language") or "") in p["languages"]
                and txt("before") != txt("after")
                and all(re.search(DOTTED_VERSION_RE, txt(f)) for f in ("before", "after"))
                and normalise_text(txt("before")) == normalise_text(txt("after"))
            )
        elif t == "mirror":
            hit = any(
                row.get("repo") == m.repo and txt("path").startswith(m.folder + "/")
                for m in (mirrors or {}).get(r.name, ())
            )
        elif t == "regex":
            hit = any(search(r, f) for f in p["field"]) and not any(
                search(r, f, "except_patterns") for f in p["field"]
            )
        elif t == "secret":
            sample = sample_path(row.get("path"))
            hit = any(search(r, f) for f in p["field"]) or any(
                search(r, f, "sample_patterns")
                for f in p["field"]
                if not (sample and f in CONTENT_FIELDS)
            )
        elif t == "weak_secret":
            found = [
                x
                for f in p["field"]
                for x in suspects(txt(f), row.get("path") if f in CONTENT_FIELDS else None)
            ]
            hit = bool(found)
            if hit and r.action == "flag":
                reasons = dict.fromkeys(reason for _, _, reason in found)
                flags += [f"{r.name}:{reason}" for reason in reasons]
                continue
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

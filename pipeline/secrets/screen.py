"""Literal screens for regexes (the secret prefilters here; the filter's regex and lines_only
rules, filter/kinds/common.py): for a pattern, strings one of which every match of it
holds (`github_pat_`, `-----BEGIN`, `secret` for `(?i:aws_?secret...)`), found from the
pattern's syntax tree. One Aho-Corasick pass over a column (polars `str.contains_any`) then
finds the few rows that hold any screened rule's strings, and only those rows are scanned by
those rules' regexes; a prefilter with no such strings (of at least MIN_LITERAL characters:
`AC[a-z0-9]{32}`, a base64 run) is scanned over every row, as before. A screen only ever
passes more rows than its regex matches: a row it passes over holds none of the strings, so
the regex cannot match there."""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from typing import Any

import polars as pl

if sys.version_info >= (3, 11):
    from re import _constants as sre_c  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
else:  # pragma: no cover - 3.10
    import sre_constants as sre_c
    import sre_parse

MIN_LITERAL = 3  # shorter strings are in too many rows to screen anything out
MAX_SPELLINGS = 64  # strings one run of literals may stand for (`(?:a|b)(?:c|d)`: 4)
# Characters that a case-insensitive regex matches to an ASCII letter (Kelvin sign and k, long
# s and s, dotted and dotless I and i, Angstrom sign): an ASCII case-insensitive screen passes
# any row holding one, so it stays a superset of Unicode case folding.
FOLDS_TO_ASCII = "\u212a\u017f\u0130\u0131\u212b"

_Found = tuple[frozenset[str], bool]  # strings one of which every match holds; ignore case


@dataclass(frozen=True)
class Screen:
    literals: tuple[str, ...]
    ignore_case: bool


# What Python's parser and Rust's read differently (Rust: `\<` `\>` word edges, `\b{start}`,
# verbose mode's Unicode spaces, `{1, 2}` a repeat): a pattern holding any is not screened.
_READ_APART = re.compile(r"\\[<>]|\\[bB]\{|\(\?[a-z]*x|\{[\d\s,]*\s[\d\s,]*\}|[^\x00-\x7f]")


def _nested_class(pattern: str) -> bool:
    """A `[` inside a character class: Rust reads a nested class (`[[ab]]`, `[[:alpha:]]`),
    Python a `[` in the class and a literal `]` after it."""
    inside, k = False, 0
    while k < len(pattern):
        c = pattern[k]
        if c == "\\":
            k += 2
            continue
        if inside and c == "[":
            return True
        if c == "[":
            inside, k = True, k + 1
            k += pattern.startswith("^", k)
            k += pattern.startswith("]", k)  # `[]a]`, `[^]a]`: a `]` first is a member
            continue
        if inside and c == "]":
            inside = False
        k += 1
    return False


@functools.lru_cache(maxsize=4096)  # the filter's rules ask again for every batch
def screen(pattern: str) -> Screen | None:
    """The literal screen of a prefilter in Python syntax, or None (scan every row): also for
    a pattern the two parsers may read apart, and for an ignore-case string that is not ASCII
    (the screen folds ASCII case only)."""
    if _READ_APART.search(pattern) or _nested_class(pattern):
        return None
    try:
        parsed: Any = sre_parse.parse(pattern)
    except (sre_c.error, RecursionError, OverflowError):
        return None
    found = _sequence(list(parsed), bool(parsed.state.flags & sre_c.SRE_FLAG_IGNORECASE))
    if found is None or min(map(len, found[0])) < MIN_LITERAL:
        return None
    if found[1] and not all(x.isascii() for x in found[0]):
        return None
    return Screen(tuple(sorted(found[0])), found[1])


def _sequence(nodes: list, icase: bool) -> _Found | None:
    """Of a concatenation: the best of its parts' requirements. A run of literal characters,
    small classes (`[ab]`) and alternatives of literals (`(?:pat|dt)`, which the parser makes
    of `glpat|gldt` after taking out the common `gl`) is one set of strings, each spelling of
    the run; a zero-width assertion leaves the literals on both sides adjacent."""
    found: list[_Found] = []
    run = [""]
    for op, av in nodes:
        if op is sre_c.AT:
            continue
        options = _literal_options(op, av)
        if options is not None and len(run) * len(options) <= MAX_SPELLINGS:
            run = [r + o for r in run for o in options]
            continue
        if run != [""]:
            found.append((frozenset(run), icase))
        run = [""]
        if options is not None:  # too many spellings together: a run of its own
            run = options
            continue
        part = _node(op, av, icase)
        if part is not None:
            found.append(part)
    if run != [""]:
        found.append((frozenset(run), icase))
    if not found:
        return None
    return max(found, key=lambda f: (min(map(len, f[0])), -len(f[0])))


def _literal_options(op: object, av: Any) -> list[str] | None:
    """The strings a node matches, when it is a literal, a small class of literal characters
    or an alternation of literal strings; else None."""
    if op is sre_c.LITERAL:
        return [chr(av)]
    if op is sre_c.IN and len(av) <= MAX_SPELLINGS and all(o is sre_c.LITERAL for o, _ in av):
        return [chr(c) for _, c in av]
    if op is sre_c.BRANCH and len(av[1]) <= MAX_SPELLINGS:
        alts = []
        for alt in av[1]:
            if not all(o is sre_c.LITERAL for o, _ in alt):
                return None
            alts.append("".join(chr(c) for _, c in alt))
        return alts
    return None


def _node(op: object, av: Any, icase: bool) -> _Found | None:
    if op is sre_c.SUBPATTERN:
        _, add, remove, sub = av
        on = (icase or bool(add & sre_c.SRE_FLAG_IGNORECASE)) and not (
            remove & sre_c.SRE_FLAG_IGNORECASE
        )
        return _sequence(list(sub), on)
    if op is sre_c.BRANCH:
        alternatives = [_sequence(list(alt), icase) for alt in av[1]]
        if any(a is None for a in alternatives):
            return None
        return (
            frozenset().union(*(a[0] for a in alternatives if a)),
            any(a[1] for a in alternatives if a),
        )
    if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", None)):
        low, _, sub = av
        return _sequence(list(sub), icase) if low >= 1 else None
    if op is getattr(sre_c, "ATOMIC_GROUP", None):
        return _sequence(list(av), icase)
    return None


def passed(col: pl.Series, screens: list[Screen]) -> pl.Series:
    """Rows of string column `col` holding a literal of any of `screens` (holds)."""
    return col.to_frame("t").select(holds(pl.col("t"), screens)).to_series()


def holds(col: pl.Expr, screens: list[Screen]) -> pl.Expr:
    """Where string column `col` holds a literal of any of `screens`, in one Aho-Corasick pass
    that ignores ASCII case for all of them (a case-sensitive screen passes a few rows more,
    which its regex then turns down: one pass costs what each case's pass did)."""
    lits = sorted({x for s in screens for x in s.literals})
    if not lits:
        return pl.repeat(False, pl.len())
    out = col.str.contains_any(lits, ascii_case_insensitive=True)
    if any(s.ignore_case for s in screens):
        out = out | col.str.contains(f"[{FOLDS_TO_ASCII}]")
    return out

"""Each rule's prefilter (a superset of its pattern in the syntax Python and Rust share) as the
Rust regex polars runs, vectorised over a whole column: `rust_superset` rewrites the classes
where the two differ (Python's `\\s` also takes U+001C..U+001F; `\\w` and `\\b` mean other
sets), `strip_lookarounds` drops what Rust cannot run."""

from __future__ import annotations

import re

import polars as pl

_LOOKAROUND = re.compile(r"\(\?(?:<?[=!])")


def strip_lookarounds(p: str) -> str:
    """The pattern with every look-around group removed: a superset Rust regex can run."""
    out, i = [], 0
    while i < len(p):
        m = _LOOKAROUND.match(p, i)
        if m and (i == 0 or p[i - 1] != "\\"):
            depth, j = 0, i
            while j < len(p):
                if p[j] == "\\":
                    j += 2
                    continue
                depth += p[j] == "("
                depth -= p[j] == ")"
                j += 1
                if depth == 0:
                    break
            i = j
            continue
        out.append(p[i])
        i += 1
    return "".join(out)


# Python's classes as Rust sets that hold them: Python's \s also takes U+001C..U+001F, its \w
# every letter and number (Rust's \w misses some numbers); \b and \B are dropped (with two
# \w sets the boundaries differ), \W becomes any character.
_OUTSIDE = {"s": r"[\s\x1c-\x1f]", "w": r"[\w\p{L}\p{N}]", "b": "", "B": "", "W": r"[\s\S]"}
_INSIDE = {"s": r"\s\x1c-\x1f", "w": r"\w\p{L}\p{N}", "W": r"\W\w"}


def rust_superset(p: str) -> str:
    """A prefilter written for Python, as a Rust regex matching wherever Python's does."""
    out, i, in_class = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            x = p[i + 1]
            table = _INSIDE if in_class else _OUTSIDE
            out.append(table.get(x, c + x))
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            # a ] (or ^]) right after the opening bracket is a literal
            j = i + 1 + (p[i + 1 : i + 2] == "^")
            if p[j : j + 1] == "]":
                out.append(p[i + 1 : j + 1])
                i = j
        elif c == "]" and in_class:
            in_class = False
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def rust_ok(p: str) -> bool:
    try:
        pl.Series([""], dtype=pl.String).str.contains(rust_superset(p))
        return True
    except pl.exceptions.PolarsError:
        return False

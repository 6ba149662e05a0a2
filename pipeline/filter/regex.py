"""Regex safety and path globs: what a rules file may ask the regex engines to run.

Patterns must be in the subset that both Python `re` (the per-row reference) and the Rust regex
crate (polars) accept, and must not backtrack catastrophically in a backtracking engine.
Path globs are translated here into that same subset.
"""

from __future__ import annotations

import re
import sys

import polars as pl

if sys.version_info >= (3, 11):
    # typeshed's `re` stub does not declare the private `_constants`/`_parser` submodules
    from re import _constants as sre_c  # type: ignore[attr-defined]
    from re import _parser as sre_parse  # type: ignore[attr-defined]
else:  # pragma: no cover - 3.10 (these modules warn on import from 3.11)
    import sre_constants as sre_c
    import sre_parse


BLANK_RE = r"^\s*$"  # empty or whitespace only (Python: re.fullmatch(r"\s*", text))
# format_only: what a formatter changes (whitespace, commas, quote style) or an import sorter
# (the order of names on import lines: a hunk of only import lines with the same words).
FORMAT_STRIP_RE = r"[\s,]+"
# ... and in JavaScript and TypeScript, what prettier's options change besides: a lone arrow
# function parameter's parentheses (arrowParens), those around `typeof X`, and a semicolon
# ending a line (semi); each (regex, what its match becomes, $1 being its first group). In
# Markdown too: prettier formats the code blocks of a README as it formats the code.
PRETTIER_LANGUAGES = ("javascript", "typescript", "markdown")
# ... and in Markdown a list item's marker: `* item`, `+ item` and `- item` render alike
# (prettier writes `-`); the marker group keeps the item's indentation ($1)
MD_LIST_RE = r"(?m)^([ \t]*)[*+][ \t]"
JS_FORMAT_RES = (
    (r"\(\s*([A-Za-z_$][\w$]*)\s*\)\s*=>", "$1=>"),
    (r"\(\s*(typeof\s+[A-Za-z_$][\w$.]*)\s*\)", "$1"),
    (r"(?m);[ \t]*$", ""),
)
# (Python and JS `from`/`import`, Java `import`, Rust `use`/`pub use`: a `use a::{b, c};` whose
# names only changed order is rustfmt's; a multi-line one closes with `};`)
_IMPORT_WORD = r"(?:from|import|use|pub(?:\([\w ]{1,20}\))?[ \t]+use)"
IMPORT_LINE_RE = (
    r"(?m)^[ \t]*(?:" + _IMPORT_WORD + r"[ \t][^\n]*|[A-Za-z_][\w.]*(?:[ \t]+as[ \t]+\w+)?,?"
    r"|[(){}];?)[ \t]*$"
)
IMPORT_KEYWORD_RE = r"(?m)^[ \t]*" + _IMPORT_WORD + r"[ \t]"  # the hunk is in an import block
# ... or a comment rewrapped (a Javadoc or `//`, `#`, `--` comment whose words now break at
# other lines): both sides only comment lines, equal once each line's leading marker is removed
COMMENT_MARK_RE = r"(?m)^[ \t]*(?:/\*+|\*+/|\*|//[/!]?|#|--)"
COMMENT_LEAD_RE = r"^\s*(?:/\*|\*|//|#|--)"  # the first line is one (a cheap first test)
# minified: what is counted in a long line (spaces and tabs; symbols: neither a word character nor
# a space; the statement separators ; and } are counted each on its own)
MINIFIED_SPACE_RE = r"[ \t]"
MINIFIED_SYMBOL_RE = r"[^A-Za-z0-9_ \t]"
MINIFIED_SEPARATORS = (";", "}")
# unrelated_sides: the words the two sides are compared by (names and words in ASCII letters:
# digits alone and other scripts are not counted, so a table of numbers or a CJK paragraph is
# never "unrelated"), and what counts as a line
WORD_RE = r"[A-Za-z_][A-Za-z0-9_]*"
NONBLANK_LINE_RE = r"(?m)^[ \t]*\S"
# versions_only: a dotted version number (1.8, 0.15.0, v2.1.3-rc1), which each side must hold
DOTTED_VERSION_RE = r"\d+\.\d+"
# commented_code: a line comment (`//`, not a `///` or `//!` doc comment; `#` in the languages
# of schema.HASH_COMMENT_LANGUAGES), and code inside one: a statement or block end (; { }), or a
# call (no space before its parenthesis) or an assignment right after the first name, which a
# return, await, const ... may lead; an object's property (`check: data => ...,`, ending in a
# comma) or an arrow function. A note ("TODO(ann): ...") is not code.
SLASH_COMMENT_RE = r"^[ \t]*//(?:[^/!]|$)"
HASH_COMMENT_RE = r"^[ \t]*#(?:[^!]|$)"
_CODE = (
    r"[ \t]*(?:[^/!#\s][^\n]*[;{}][ \t]*$|"
    r"(?:(?:return|await|yield|throw|raise|const|let|var|val)[ \t]+)?"
    r"[A-Za-z_$][\w$.]*(?:\[[^\]\n]*\])?(?:\(|[ \t]*(?:=[^=]|[-+*/]=|\+\+|--|:=))|"
    r"[A-Za-z_$][\w$]*\??:[ \t][^\n]*,[ \t]*$|[^\n]*[\w)][ \t]*=>)"
)
SLASH_CODE_RE = r"^[ \t]*//" + _CODE
HASH_CODE_RE = r"^[ \t]*#" + _CODE
COMMENT_NOTE_RE = r"^[ \t]*(?://|#)[ \t]*(?:TODO|FIXME|XXX|NOTE|HACK|BUG|SAFETY|NB)\b"
# `{repo}` in a path glob: the item's repository name, the last part of `repo` when it is a plain
# name (letters, digits, _ . -); the glob's regex holds REPO_SLOT where the name goes, matched
# literally (repo_literal). An item whose repo has no such name cannot match that glob.
REPO_GLOB = "{repo}"
REPO_SLOT = r"\{repo\}"
REPO_NAME_RE = r"(?:^|/)([A-Za-z0-9_.-]+)$"
REPO_NAME_CHARS = "[A-Za-z0-9_.-]+"  # any plain name in a slot: a superset of one repo's
REPO_ESCAPE_RE = r"[.\-]"  # the only characters of a plain name that a regex reads specially


def repo_literal(name: str) -> str:
    """A repository name as a regex matching exactly it (as polars builds it: . and - escaped)."""
    return re.sub(REPO_ESCAPE_RE, lambda m: "\\" + m.group(0), name)


def with_flags(pattern: str, ignore_case: bool) -> str:
    return ("(?i)" if ignore_case else "") + pattern


def check_pattern(pattern: str, ignore_case: bool = False) -> str | None:
    """Why a regex cannot be used (invalid, backtracks catastrophically, not Rust), or None.

    Patterns must be in the subset that both Python `re` (the per-row reference) and the Rust
    regex crate (polars) accept.
    """
    full = ("(?i)" if ignore_case else "") + pattern
    try:
        tree = sre_parse.parse(full)
    except re.error as e:
        return f"invalid regex {pattern!r}: {e}"
    bad = _backtracking(tree)
    if bad:
        return f"regex {pattern!r} can backtrack catastrophically: {bad}"
    n = _counted(tree)
    if n > MAX_COUNTED:
        return (
            f"regex {pattern!r} repeats {n} times in counted repeats ({{m,n}}; ones in sequence "
            f"or in alternatives add up, nested ones multiply); at most {MAX_COUNTED}: past "
            "that polars takes seconds per MB"
        )
    why = _polars_problem(full)
    if why and "size limit" in why:
        return f"regex {pattern!r} is too large for polars (Rust regex): {why}{_SMALLER}"
    if why:
        return (
            f"regex {pattern!r} is not supported by polars (Rust regex: no look-around, "
            f"no backreferences): {why}"
        )
    return None


_SMALLER = "; use ASCII classes like [A-Za-z0-9_] rather than \\w inside bounded repeats {m,n}"


def _polars_problem(regex: str) -> str | None:
    try:
        pl.Series([""], dtype=pl.String).str.contains(regex)
    except pl.exceptions.PolarsError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        why = next((ln for ln in lines if ln.startswith("error:")), lines[0] if lines else "?")
        return why.rstrip(".")
    return None


def combine(patterns: list[str], ignore_case: bool = False) -> str:
    """One regex that matches where any pattern does: the vectorised path scans a column once."""
    return "|".join(f"(?i:{p})" if ignore_case else f"(?:{p})" for p in patterns)


def check_combined(patterns: list[str], ignore_case: bool = False) -> str | None:
    """Why a rule's patterns cannot run together as one polars regex (too large), or None."""
    why = _polars_problem(combine(patterns, ignore_case)) if len(patterns) > 1 else None
    return (
        f"the patterns together are too large for polars (Rust regex): {why}{_SMALLER}"
        if why
        else None
    )


_REPEATS = {sre_c.MAX_REPEAT, sre_c.MIN_REPEAT} | (
    {sre_c.POSSESSIVE_REPEAT} if hasattr(sre_c, "POSSESSIVE_REPEAT") else set()
)


def _children(op, av) -> list:
    if op in _REPEATS:
        return [av[2]]
    if op is sre_c.SUBPATTERN:
        return [av[-1]]
    if op is sre_c.BRANCH:
        return list(av[1])
    if op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
        return [av[1]]
    if getattr(sre_c, "ATOMIC_GROUP", None) is op:
        return [av]
    if op is sre_c.GROUPREF_EXISTS:
        return [b for b in av[1:] if b is not None]
    return []


def _has_unbounded(sub) -> bool:
    for op, av in sub:
        if op in _REPEATS and av[1] == sre_c.MAXREPEAT:
            return True
        if any(_has_unbounded(c) for c in _children(op, av)):
            return True
    return False


def _overlapping_branch(sub) -> bool:
    """A branch where one alternative's text is a prefix of another's, like (a|aa)."""
    for op, av in sub:
        if op is sre_c.BRANCH:
            alts = list(av[1])
            lits = [
                "".join(chr(c) for o, c in a) if all(o is sre_c.LITERAL for o, _ in a) else None
                for a in alts
            ]
            for i in range(len(alts)):
                for j in range(len(alts)):
                    if i == j:
                        continue
                    a, b = lits[i], lits[j]
                    if a is not None and b is not None:
                        if b.startswith(a):
                            return True
                    elif str(alts[i]) == str(alts[j]):
                        return True
        if op not in _REPEATS and any(_overlapping_branch(c) for c in _children(op, av)):
            return True
    return False


# a{2000} or (a{50}){60} on 2 MB of near misses: 10-20 s in polars; (?s)a.{0,900}b.{0,900}c
# .{0,900}d 1.5 s on 200 KB (each counted copy is a state the engine tracks: they add up)
MAX_COUNTED = 1000


def _counted(sub) -> int:
    """The copies counted repeats unroll to (a{m,n}: n, a{m,}: m, times what they repeat):
    summed along a sequence and over alternatives, multiplied through nesting. A maximum
    along one nesting let a.{0,900}b.{0,900}c.{0,900}d (2,700) pass as 900."""
    total = 0
    for op, av in sub:
        inner = sum(_counted(c) for c in _children(op, av))
        if op in _REPEATS:
            total += max(1, av[0] if av[1] == sre_c.MAXREPEAT else av[1]) * max(1, inner)
        else:
            total += inner
    return total


def _backtracking(sub) -> str | None:
    """Conservative: an unbounded repeat over another unbounded repeat or an overlapping branch.

    The Rust engine polars uses is linear-time anyway; the check keeps rules safe for any
    backtracking engine (the per-row reference uses Python `re`).
    """
    for op, av in sub:
        if op in _REPEATS and av[1] == sre_c.MAXREPEAT:
            if _has_unbounded(av[2]):
                return "an unbounded repeat inside another, like (a+)+; rewrite it without nesting"
            if _overlapping_branch(av[2]):
                return "a repeated alternation whose branches overlap, like (a|aa)+"
        for c in _children(op, av):
            bad = _backtracking(c)
            if bad:
                return bad
    return None


def _glob_body(glob: str) -> str:
    out = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if glob.startswith(REPO_GLOB, i):
            out.append(REPO_SLOT)
            i += len(REPO_GLOB)
            continue
        if c == "{":
            close = glob.find("}", i)
            if close > i and "{" not in glob[i + 1 : close]:
                alts = glob[i + 1 : close].split(",")
                out.append("(?:" + "|".join(_glob_body(a) for a in alts) + ")")
                i = close + 1
                continue
        out.append(
            "[^/]*"
            if c == "*"
            else "[^/]"
            if c == "?"
            else "\\" + c
            if c in ".^$+(){}[]|\\-"
            else c
        )
        i += 1
    return "".join(out)


def glob_to_regex(glob: str) -> str:
    """Path glob -> regex. No `/`: any file of that name; trailing `/`: a folder anywhere.

    `*` is any run within one path part, `**` any run across parts, `?` one character,
    `{a,b,}` one of the comma-separated alternatives (an empty one allowed, no nesting),
    `{repo}` the item's repository name (REPO_SLOT in the regex; not inside braces).
    """
    body = _glob_body(glob)
    if glob.startswith("/"):
        return "^" + body[1:] + ("" if glob.endswith("/") else "$")
    return "(?:^|/)" + body + ("" if glob.endswith("/") else "$")

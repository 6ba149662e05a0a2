"""Regexes that run on data, on a linear-time engine: RE2 (google-re2).

Python's `re` backtracks: a pattern with overlapping runs (`[ \\t]+\\s*`, `[^\\n]*` crossing
an escaped `\\n`) or a nested repeat (`(a+)+$`) takes time exponential or polynomial in the
text, and one crafted record can stall a run. RE2 runs any pattern it accepts in time linear
in the text (times the pattern's size), so a regex that reads data (the secret rules, the
ingest bot patterns) is compiled here, and a pattern from a config is checked here when the
config is loaded (`problem`).

RE2 has no look-around and no backreferences (the features that need backtracking), no
verbose mode `(?x)`, and repeats at most 1000 times (`a{1001}`); its `\\w`, `\\d`, `\\s` and
`\\b` are ASCII, and `$` (without `(?m)`) is the end of the text only. Python's `\\Z` is
spelled `\\z` in RE2: `compile` translates it. Match objects answer as `re`'s do (`group`,
`span`, `start`, `end`, `string`), with offsets in characters.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # an invalid pattern is an exception with its reason, not a log line

# RE2's reasons for what it lacks, in words a config's author can act on
_WHY = (
    ("invalid perl operator: (?<", "look-behind (?<=...) / (?<!...)"),
    ("invalid perl operator: (?=", "look-ahead (?=...)"),
    ("invalid perl operator: (?!", "negative look-ahead (?!...)"),
    ("invalid perl operator: (?P", "a backreference (?P=name)"),
    ("invalid perl operator: (?x", "verbose mode (?x)"),
    ("invalid escape sequence: \\1", "a backreference \\1"),
    ("invalid repetition size", "a repeat count over 1000"),
)
_FLAGS = ((re.I, "i"), (re.S, "s"), (re.M, "m"))


class LinearError(ValueError):
    """A pattern RE2 cannot run; the message says why."""


# Python's classes, which are Unicode's (RE2's are ASCII's): `\s` is str.isspace (ASCII's, the
# separators \x1c-\x1f, NEL, Unicode's spaces: a `password\x1f= "..."` must not go unseen),
# `\w` letters, numbers and _ (`élib/x.js` is a path), `\d` decimal digits. Inside a class the
# negated ones (\S \W \D) stay RE2's, but for `[^\W...]` (a word character but ...): _NOT_W.
_CLASSES = {"s": r"\t-\r\x1c-\x20\x85\p{Z}", "w": r"\p{L}\p{N}_", "d": r"\p{Nd}"}
# [^\W<rest>]: a letter, a number or _, none of <rest> (RE2 classes cannot subtract)
_NOT_W = r"(?:[^\P{{L}}{0}]|[^\P{{N}}{0}]|[^\x00-\x5e\x60-\x{{10ffff}}{0}])"
_REPEAT = re.compile(r"\{(\d*)(,?)(\d*)\}")
MAX_REPEAT = 1000  # RE2's largest repeat count


def translated(pattern: str) -> str:
    r"""The pattern in RE2's spelling, meaning what it means to Python's `re`: `\Z` (the very
    end) is `\z`; `\s \w \d` and `\S \W \D` are Python's Unicode classes (_CLASSES; `\b` stays
    ASCII's); a repeat past 1000 of one character or class (`[a-z]{50,1024}`) is cut in two."""
    out: list[str] = []
    i, in_class, atom = 0, False, -1  # atom: where in `out` the last single-character atom is
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            x = pattern[i + 1]
            if not in_class:
                atom = len(out)
            if x == "Z":
                out.append("\\z")
            elif x in _CLASSES:
                out.append(_CLASSES[x] if in_class else f"[{_CLASSES[x]}]")
            elif x.lower() in _CLASSES and not in_class:
                out.append(f"[^{_CLASSES[x.lower()]}]")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
            out.append(c)
            i += 1
            continue
        if pattern.startswith("[^\\W", i):
            end = _class_end(pattern, i)
            rest = translated("[" + pattern[i + 4 : end] + "]")[1:-1]  # the class but \W
            atom = len(out)
            out.append(_NOT_W.format(rest))
            i = end + 1
            continue
        if c == "[":
            in_class, atom = True, len(out)
            out.append(c)
            j = i + 1 + (pattern[i + 1 : i + 2] == "^")
            if pattern[j : j + 1] == "]":  # a ] right after the opening bracket is a literal
                out.append(pattern[i + 1 : j + 1])
                i = j
            i += 1
            continue
        m = _REPEAT.match(pattern, i) if c == "{" else None
        if m and atom >= 0 and m.group(3) and int(m.group(3)) > MAX_REPEAT >= int(m.group(1) or 0):
            unit = "".join(out[atom:])
            more = int(m.group(3)) - MAX_REPEAT
            out.append(f"{{{m.group(1) or 0},{MAX_REPEAT}}}{unit}{{0,{more}}}")
            i, atom = m.end(), -1
            continue
        atom = len(out) if c not in "()|*+?{}^$" else -1
        out.append(c)
        i += 1
    return "".join(out)


# google-re2's matching wrapper costs ~15 us a call in Python (it maps byte offsets to
# characters); on ASCII text, where the two agree, its RE2 object is called directly. Its
# private names are checked here: without them every call takes the public path.
try:
    _ANCHORS = (re2._Anchor.UNANCHORED, re2._Anchor.ANCHOR_START, re2._Anchor.ANCHOR_BOTH)
    _DIRECT = callable(getattr(re2._re2.RE2, "Match", None))
except AttributeError:  # pragma: no cover - another google-re2 layout
    _DIRECT = False
_SEARCH, _MATCH, _FULL = 0, 1, 2
_TEMPLATE_GROUP = re.compile(r"\\g<(\w+)>")  # in a replacement template (code's, not data's)
_NO_SPAN = (-1, -1)
# UTF-8 has no lone surrogate, and RE2 reads UTF-8: each is matched as U+FFFD (neither is a
# word character or a space; `.` and negated classes take both)
_SURROGATES = dict.fromkeys(range(0xD800, 0xE000), 0xFFFD)


class Match:
    """A match, answering as `re.Match` does (offsets in characters)."""

    __slots__ = ("_spans", "string", "re")

    def __init__(self, spans: list[tuple[int, int]], string: str, pattern: Regex):
        self._spans = spans
        self.string = string
        self.re = pattern

    def _index(self, g: int | str) -> int:
        return self.re.groupindex[g] if isinstance(g, str) else g

    def group(self, g: int | str = 0) -> Any:  # str, or None for a group that took no part
        s, e = self._spans[self._index(g)]
        return None if s < 0 else self.string[s:e]

    def span(self, g: int | str = 0) -> tuple[int, int]:
        return self._spans[self._index(g)]

    def start(self, g: int | str = 0) -> int:
        return self._spans[self._index(g)][0]

    def end(self, g: int | str = 0) -> int:
        return self._spans[self._index(g)][1]


class Regex:
    """A pattern compiled by RE2, with the methods of `re.Pattern` the pipeline uses."""

    __slots__ = ("_rx", "_raw", "pattern", "groups", "groupindex")

    def __init__(self, rx: Any, pattern: str):
        self._rx = rx
        self._raw = rx._regexp if _DIRECT else None
        self.pattern = pattern  # as written (Python's spelling)
        self.groups: int = rx.groups
        self.groupindex: dict[str, int] = dict(rx.groupindex)  # google-re2 rebuilds it each use

    def _iter(self, how: int, text: str, pos: int) -> Iterator[Match]:
        if self._raw is not None and text.isascii():
            b, anchor, at = text.encode("ascii"), _ANCHORS[how], max(0, pos)
            while at <= len(b):
                spans = self._raw.Match(anchor, b, at, len(b))
                if spans[0] == _NO_SPAN:
                    return
                yield Match(spans, text, self)
                at = spans[0][1] + (spans[0][1] == at)  # past an empty match
            return
        view = text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (bytes read with surrogateescape)
            view = text.translate(_SURROGATES)  # the same length: offsets hold
        found = (self._rx.finditer, self._rx.match, self._rx.fullmatch)[how](view, pos)
        for m in [found] if how else found:
            if m is None:
                return
            yield Match([m.span(i) for i in range(self.groups + 1)], text, self)

    def search(self, text: str, pos: int = 0) -> Match | None:
        return next(self._iter(_SEARCH, text, pos), None)

    def match(self, text: str, pos: int = 0) -> Match | None:
        return next(self._iter(_MATCH, text, pos), None)

    def fullmatch(self, text: str) -> Match | None:
        return next(self._iter(_FULL, text, 0), None)

    def finditer(self, text: str) -> Iterator[Match]:
        return self._iter(_SEARCH, text, 0)

    def findall(self, text: str) -> list[Any]:
        """As re's: the whole match, the one group's text or a tuple of the groups'."""
        out = []
        for m in self.finditer(text):
            got = [m.group(i) or "" for i in range(1, self.groups + 1)] or [m.group()]
            out.append(got[0] if len(got) == 1 else tuple(got))
        return out

    def sub(self, template: str, text: str) -> str:
        """As re's, for a template whose only escapes are groups: `\\g<1>`, `\\g<name>`."""
        pieces = _TEMPLATE_GROUP.split(template)
        if any("\\" in x for x in pieces[::2]):
            raise ValueError(f"template {template!r}: only \\g<group> escapes are supported")
        out, at = [], 0
        for m in self.finditer(text):
            out.append(text[at : m.start()])
            for k, x in enumerate(pieces):
                g = (int(x) if x.isdigit() else x) if k % 2 else None
                out.append(x if g is None else m.group(g) or "")
            at = m.end()
        return "".join([*out, text[at:]])

    def split(self, text: str) -> list[str]:
        """As re's, for a pattern without groups."""
        out, at = [], 0
        for m in self.finditer(text):
            out.append(text[at : m.start()])
            at = m.end()
        return [*out, text[at:]]


def _class_end(pattern: str, i: int) -> int:
    """Where the class opened at pattern[i] closes (its `]`)."""
    j = i + 1 + (pattern[i + 1 : i + 2] == "^")
    j += pattern[j : j + 1] == "]"  # a ] right after the opening bracket is a literal
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j


def compile(pattern: str, flags: int = 0) -> Regex:
    """The pattern compiled by RE2 (flags: re.I, re.S, re.M); LinearError if RE2 cannot."""
    if flags & re.X and not any(c.isspace() or c == "#" for c in pattern):
        flags &= ~re.X  # verbose mode changes nothing without spaces or comments
    unknown = flags & ~(re.I | re.S | re.M)
    if unknown:
        raise LinearError(f"flags {unknown:#x} have no RE2 equivalent")
    inline = "".join(c for f, c in _FLAGS if flags & f)
    full = (f"(?{inline})" if inline else "") + translated(pattern)
    try:
        return Regex(re2.compile(full, _OPTIONS), pattern)
    except re2.error as e:
        raise LinearError(_reason(e)) from None


def _reason(e: Exception) -> str:
    msg = e.args[0] if e.args else str(e)
    msg = msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)
    for head, what in _WHY:
        if msg.startswith(head):
            return f"{what} is not supported (RE2 matches in linear time, without backtracking)"
    return msg


def problem(pattern: str, flags: int = 0) -> str | None:
    """Why RE2 cannot run the pattern (for a config's validation), or None."""
    try:
        compile(pattern, flags)
    except LinearError as e:
        return str(e)
    return None


def positions(text: str, sub: str) -> list[int]:
    """Where each occurrence of the literal `sub` starts (non-overlapping), no regex needed."""
    out, at = [], text.find(sub)
    while at >= 0:
        out.append(at)
        at = text.find(sub, at + len(sub))
    return out

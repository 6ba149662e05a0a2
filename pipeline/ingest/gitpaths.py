"""Paths in `git log --patch` output: C-style quoting undone, /dev/null, the header form."""

from __future__ import annotations

_ESCAPES = {b"a": 7, b"b": 8, b"t": 9, b"n": 10, b"v": 11, b"f": 12, b"r": 13}


def _diff_path(value: bytes, prefix: bytes) -> bytes | None:
    """The path of a "--- a/x" / "+++ b/x" line; None for /dev/null."""
    if value.endswith(b"\t"):  # git adds a tab after a name that holds a space
        value = value[:-1]
    if value == b"/dev/null":
        return None
    return _unquote(value).removeprefix(prefix)


def _header_path(head: bytes) -> bytes:
    """The path from "diff --git a/X b/X", for a file diff without ---/+++ or rename lines
    (binary, mode change, empty file): both names are then the same."""
    rest = head[len(b"diff --git ") :]
    if rest.startswith(b'"'):
        end = _quoted_end(rest)
        return _unquote(rest[:end]).removeprefix(b"a/")
    if rest.endswith(b'"'):
        return _unquote(rest[rest.rindex(b' "') + 1 :]).removeprefix(b"b/")
    half = (len(rest) - 1) // 2
    if rest[:half][2:] == rest[half + 1 :][2:]:
        return rest[half + 3 :]
    return rest.split(b" b/", 1)[-1]


def _quoted_end(s: bytes) -> int:
    i = 1
    while i < len(s) and s[i : i + 1] != b'"':
        i += 2 if s[i : i + 1] == b"\\" else 1
    return i + 1


def _unquote(s: bytes) -> bytes:
    """Undo git's C-style quoting ("a/\\303\\251.txt" -> a/é.txt as bytes)."""
    if not (s.startswith(b'"') and s.endswith(b'"') and len(s) >= 2):
        return s
    out = bytearray()
    body, i = s[1:-1], 0
    while i < len(body):
        ch = body[i : i + 1]
        if ch != b"\\":
            out += ch
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif body[i + 1 : i + 4].isdigit() and len(body[i + 1 : i + 4]) == 3:
            out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:  # \" and \\
            out += nxt
            i += 2
    return bytes(out)

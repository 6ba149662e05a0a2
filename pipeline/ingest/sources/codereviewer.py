"""The Microsoft CodeReviewer dataset (Zenodo 6900648) and data laid out like it.

JSON lines, gzip or not; refs are "line N" (1-based). A JSON array ("element N") or
pretty-printed objects ("value N") are read too (jsonio.iter_json_records tells the layout).
Each record's layout is told by its keys:

- refinement (`ref-*.jsonl`): `old`, `new`, `comment`, optional `repo`, `lang`, `ghid`, `id`,
  `path`. before = `old`, after = `new`. The real data often keeps each line's diff prefix
  ('+', '-', ' ') and sometimes an "@@ ... @@" header: those are stripped, but only from a
  text whose every line is so prefixed and which shows a '+'/'-' line or a header (or whose
  pair does), so plain code that merely starts with spaces is left as it is. A record with
  old == new is kept: telling no-op edits apart is the filter stage's job, as for every source.
- comment (`msg-*.jsonl`, `cls-*.jsonl`): `patch` (one unified-diff hunk), `msg`, `proj`,
  `lang`, optional `id`, `y`. before/after are the old and new sides of the hunk from its
  first to its last changed line; context is up to `context_lines` unchanged lines above.
  A missing `msg` (the `cls` files) gives an item with an empty comment.

`oldf` (the whole old file) is never kept: not in an item, not in an error's raw.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson

from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext, RawItem, Record, RecordError
from pipeline.ingest.count import count_json
from pipeline.ingest.jsonio import (
    iter_json_records,
    optional_str,
    require_object,
    require_str,
    type_name,
)
from pipeline.storage import Location

EXPECTS = "file"  # one JSON-lines file

_HEADER = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_NO_NEWLINE = "\\ No newline at end of file"
_DROPPED_KEYS = ("oldf",)  # too large to keep in an error's raw, and never needed


def read(spec: SourceConfig, path: Location, ctx: IngestContext) -> Iterator[Record | RecordError]:
    """One Record or RecordError per record (a non-blank line, an array element ...) of a
    CodeReviewer file."""
    seen = False
    for ref, value, raw in iter_json_records(path, ctx):
        seen = True
        obj = value if isinstance(value, RecordError) else require_object(value, ref, raw)
        if isinstance(obj, RecordError):
            yield obj
            continue
        rec = record(obj, ref, spec)
        if isinstance(rec, RecordError) and not rec.raw:
            rec.raw = _raw(obj, raw)
        yield rec
    if not seen:
        yield RecordError("file", "", "empty_source: the file holds no records", "skip")


def record(obj: dict[str, Any], ref: str, spec: SourceConfig) -> Record | RecordError:
    """One parsed record -> its item, by the layout its keys show."""
    if "patch" in obj and not ("old" in obj and "new" in obj):
        return _comment_record(obj, ref, spec)
    if "old" in obj or "new" in obj:
        return _refinement_record(obj, ref, spec)
    keys = sorted(k[:40] for k in obj)
    shown = ", ".join(keys[:12]) + (", ..." if len(keys) > 12 else "")
    return RecordError(
        ref,
        "",
        f"unknown record layout: keys {shown or '(none)'}; expected old/new/comment "
        "(refinement) or patch/msg (comment)",
    )


def _refinement_record(obj: dict[str, Any], ref: str, spec: SourceConfig) -> Record | RecordError:
    values = {}
    for key in ("old", "new", "comment"):
        v = require_str(obj, key, ref)
        if isinstance(v, RecordError):
            return v
        values[key] = v
    common = _common(obj, ref, spec, "repo", ("ghid", "id"))
    if isinstance(common, RecordError):
        return common
    old, new = strip_diff_prefixes(_normalise(values["old"]), _normalise(values["new"]))
    item = RawItem(before=old, after=new, comment=_crlf(values["comment"]), **common)
    return Record(ref, [item])


def _comment_record(obj: dict[str, Any], ref: str, spec: SourceConfig) -> Record | RecordError:
    patch = require_str(obj, "patch", ref)
    if isinstance(patch, RecordError):
        return patch
    msg = optional_str(obj, "msg", ref)
    if isinstance(msg, RecordError):
        return msg
    common = _common(obj, ref, spec, "proj", ("id",))
    if isinstance(common, RecordError):
        return common
    sides = hunk_sides(_normalise(patch), spec.context_lines)
    if sides is None:
        return RecordError(ref, "", "no_change: the patch has no added or removed line", "skip")
    context, before, after, removed, added = sides
    item = RawItem(
        before="\n".join(before),
        after="\n".join(after),
        context="\n".join(context),
        comment=_crlf(msg),
        lines_removed=removed,
        lines_added=added,
        **common,
    )
    return Record(ref, [item])


def _common(
    obj: dict[str, Any], ref: str, spec: SourceConfig, repo_key: str, change_keys: tuple[str, ...]
) -> dict[str, Any] | RecordError:
    """repo, change, path and language, the fields both layouts share."""
    out: dict[str, Any] = {}
    for name, key in (("repo", repo_key), ("path", "path"), ("language", "lang")):
        v = optional_str(obj, key, ref)
        if isinstance(v, RecordError):
            return v
        out[name] = v
    out["repo"] = out["repo"] or spec.repo
    out["change"] = ""
    for key in change_keys:
        c = obj.get(key)
        if c is None:
            continue
        if isinstance(c, bool) or not isinstance(c, (int, str)):
            reason = f"wrong type: {key} is {type_name(c)}, expected string or integer"
            return RecordError(ref, "", reason)
        out["change"] = str(c)
        break
    return out


def strip_diff_prefixes(old: str, new: str) -> tuple[str, str]:
    """`old` and `new` without their diff prefixes where they are diff text.

    A text is diff text when every line is empty, an "@@" header, "\\ No newline ...", or
    starts with '+', '-' or ' ', and some line is a header or starts with '+'/'-'. A text of
    only space-led lines is ambiguous (plain indented code, or context only): it is stripped
    only when its pair is diff text.
    """
    old_lines, new_lines = old.split("\n"), new.split("\n")
    old_ok, new_ok = _uniform(old_lines), _uniform(new_lines)
    old_marked = old_ok and _marked(old_lines)
    new_marked = new_ok and _marked(new_lines)
    if old_marked or (old_ok and new_marked):
        old = _strip(old_lines)
    if new_marked or (new_ok and old_marked):
        new = _strip(new_lines)
    return old, new


def _uniform(lines: list[str]) -> bool:
    return all(
        not line or line[0] in "+- " or line == _NO_NEWLINE or _HEADER.match(line) for line in lines
    )


def _marked(lines: list[str]) -> bool:
    return any(line[:1] in ("+", "-") or _HEADER.match(line) for line in lines)


def _strip(lines: list[str]) -> str:
    kept = [line[1:] for line in lines if line != _NO_NEWLINE and not _HEADER.match(line)]
    return "\n".join(kept)


def hunk_sides(
    patch: str, context_lines: int = 3
) -> tuple[list[str], list[str], list[str], int, int] | None:
    """(context, before, after, lines removed, lines added) of one unified-diff hunk, or None
    when no line is added or removed.

    Lines before the first "@@" header (file headers) and the headers themselves are dropped,
    as is "\\ No newline at end of file". A line with no diff prefix is taken as unchanged, as
    CodeReviewer's own loader does (an empty line is an unchanged empty line).
    """
    lines = patch.split("\n")
    first_header = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if first_header is not None:
        lines = lines[first_header:]
    parsed: list[tuple[str, str]] = []
    for line in lines:
        if _HEADER.match(line) or line == _NO_NEWLINE:
            continue
        mark = line[:1]
        if mark in ("+", "-", " "):
            parsed.append((mark, line[1:]))
        else:
            parsed.append((" ", line))
    changed = [i for i, (mark, _) in enumerate(parsed) if mark != " "]
    if not changed:
        return None
    first, last = changed[0], changed[-1]
    span = parsed[first : last + 1]
    context = [text for _, text in parsed[:first]][-context_lines:] if context_lines > 0 else []
    before = [text for mark, text in span if mark != "+"]
    after = [text for mark, text in span if mark != "-"]
    removed = sum(1 for mark, _ in span if mark == "-")
    return context, before, after, removed, len(changed) - removed


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n")


def _normalise(code: str) -> str:
    """CRLF to LF, and a single trailing newline dropped (the code-text convention)."""
    code = _crlf(code)
    return code[:-1] if code.endswith("\n") else code


def _raw(obj: dict[str, Any], text: str | bytes) -> str | bytes:
    """The record for errors.parquet, without `oldf`."""
    if not any(k in obj for k in _DROPPED_KEYS):
        return text
    kept = {k: v for k, v in obj.items() if k not in _DROPPED_KEYS}
    try:
        return orjson.dumps(kept).decode()
    except (TypeError, orjson.JSONEncodeError):
        return ""


def count(spec: SourceConfig, path: Location, limit: int) -> tuple[int, str]:
    """The file's records by their own count (count.py), for verify; an empty file is the
    reader's one error record."""
    n, unit = count_json(path, limit)
    return n or 1, unit

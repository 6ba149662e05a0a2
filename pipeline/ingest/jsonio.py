"""JSON and JSON-lines streams for every source.

A file is opened through `opening.open_source` (gzip detected by its magic bytes, a BOM
decoded, a FIFO or device refused) and streamed, so memory is bounded by
`ctx.max_record_bytes` whatever the file's size. `iter_json_records` reads any of the three
layouts people save JSON in (JSON lines, one array, pretty-printed values): a bad record (bad
JSON, a NUL byte, invalid UTF-8, an over-long line) costs that one record, and only a broken
array or stream ends the file early, with one error that says so.
"""

from __future__ import annotations

import codecs
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from pipeline.ingest.base import IngestContext, RecordError
from pipeline.ingest.jsonstream import JsonValue, iter_json_array, iter_json_values
from pipeline.ingest.opening import (
    BLANK_RUN,
    CHUNK,
    GZIP_MAGIC,
    READ_ERRORS,
    SWAP_CRLF,
    CountingReader,
    cr_line_ends,
    head_bytes,
    lf_lines,
    open_maybe_gzip,
    open_regular,
    open_source,
    skip_blank_lines,
)

__all__ = [
    "GZIP_MAGIC",
    "CountingReader",
    "JsonValue",
    "detect_layout",
    "iter_json_array",
    "iter_json_records",
    "iter_json_values",
    "iter_lines",
    "open_maybe_gzip",
    "optional_str",
    "require_object",
    "require_str",
    "type_name",
]

RAW_KEEP = 16 * 1024  # bytes of an over-long record kept as its raw
HEAD_BYTES = 64 * 1024  # decoded bytes looked at to tell the layout


def _open(path: Path, ctx: IngestContext):
    return open_source(path, ctx.advance, ctx.set_total)


# --- records of any layout ----------------------------------------------------------------


def iter_json_records(
    path: Path, ctx: IngestContext
) -> Iterator[tuple[str, Any | RecordError, str | bytes]]:
    """(ref, the parsed value or why it cannot be read, its raw text) for each record of a
    JSON file, whichever of the layouts `detect_layout` tells it is in.

    Refs are "line N" (JSON lines, blank lines are not records), "element N" (array) and
    "value N" (pretty-printed values), all 1-based. A value is whatever the JSON holds: the
    caller checks it is an object. The raw (the line's text, or the value's bytes) is for the
    caller's own RecordErrors. Progress counts bytes of the file itself.
    """
    with _open(path, ctx) as f:
        layout = detect_layout(path)
        if layout == "lines":
            yield from _parsed(_lines(f, ctx.max_record_bytes, cr=cr_line_ends(path)))
            return
        stream, unit = (
            (iter_json_array, "element") if layout == "array" else (iter_json_values, "value")
        )
        for v in stream(f, ctx.max_record_bytes):
            ref = f"{unit} {v.index}"
            yield ref, (RecordError(ref, v.raw, v.error) if v.error else v.value), v.raw


def detect_layout(path: Path) -> str:
    """The file's layout, "array", "values" or "lines", from its first 64 KiB (decoded).

    The first non-space byte decides: `[` is an array, a first line that is just `{` is a
    pretty-printed object (`jq .` output: several are read too), anything else is JSON lines.
    """
    head = head_bytes(path, HEAD_BYTES)[0].lstrip()
    if head.startswith(b"["):
        return "array"
    if head.split(b"\n", 1)[0].strip() == b"{":
        return "values"
    return "lines"


# --- JSON lines ---------------------------------------------------------------------------


def iter_lines(path: Path, ctx: IngestContext) -> Iterator[tuple[int, str | RecordError]]:
    """(1-based line number, the line's text or why it cannot be read) for each non-blank line.

    The text has its line ending removed (LF or CRLF). Blank lines are not records and are not
    yielded. An error's ref is "line N". A line over `ctx.max_record_bytes` is a "record too
    large" error keeping its first bytes; the rest of it is skipped in chunks, so the next line
    reads normally. A line with a NUL byte or bytes that do not decode is an error for that
    line. A corrupt or truncated gzip stream ends the file with one "unreadable input" error
    for the rest (the lines before it are kept).
    """
    with _open(path, ctx) as f:
        yield from _lines(f, ctx.max_record_bytes, cr=cr_line_ends(path))


def iter_line_range(
    path: Path, start: int, end: int, first: int, ctx: IngestContext
) -> Iterator[tuple[str, Any | RecordError, str | bytes]]:
    """iter_json_records over the bytes [start, end) of a plain UTF-8 JSON-lines file, whose
    first line is line `first`: a piece of the file cut at line starts (ingest/shards.py).
    A UTF-8 BOM at the start of the file is skipped, as open_source does."""
    with open_regular(path) as raw:
        if start == 0 and raw.read(len(codecs.BOM_UTF8)) == codecs.BOM_UTF8:
            start = len(codecs.BOM_UTF8)
            ctx.advance(start)
        raw.seek(start)
        piece = io.BufferedReader(_Bounded(CountingReader(raw, ctx.advance), end - start), CHUNK)
        yield from _parsed(_lines(piece, ctx.max_record_bytes, first))


def _parsed(lines: Iterator[tuple[int, str | RecordError]]):
    for n, text in lines:
        ref = f"line {n}"
        if isinstance(text, RecordError):
            yield ref, text, text.raw
        else:
            yield ref, _parse_line(ref, text), text


class _Bounded(io.RawIOBase):
    """The first `size` bytes of stream `f` (a piece of a file ends at a line start)."""

    def __init__(self, f: Any, size: int):
        self.f, self.left = f, size

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.left <= 0:
            return 0
        view = memoryview(b)[: min(len(b), self.left)]
        n = self.f.readinto(view)
        self.left -= n or 0
        return n or 0


def _lines(
    f: BinaryIO, limit: int, first: int = 1, cr: bool = False
) -> Iterator[tuple[int, str | RecordError]]:
    """iter_lines on an open (decoded) stream whose first line is line `first`; `cr`: its
    lines end in CR alone (cr_line_ends)."""
    encoding = getattr(f, "encoding_name", "UTF-8")
    f = lf_lines(f, cr)
    n = first - 1
    blanks = 0  # consecutive blank lines: after BLANK_RUN of them the run is skipped in bulk
    while True:
        try:
            line = f.readline(limit + 2)  # room for the record, "\r\n" and one more byte
        except READ_ERRORS as e:
            reason = f"unreadable input: {e}; rest of file not read"
            yield n + 1, RecordError(f"line {n + 1}", b"", reason)
            return
        if not line:
            return
        n += 1
        ref = f"line {n}"
        if len(line) == limit + 2 and not line.endswith(b"\n"):
            size, err = skip_rest(f, line)
            if err is not None:
                yield n, RecordError(ref, line[:RAW_KEEP], err)
                return
            reason = f"record too large: {size} bytes > {limit}"
            yield n, RecordError(ref, line[:RAW_KEEP], reason)
            continue
        body = line[:-1] if line.endswith(b"\n") else line
        body = body[:-1] if body.endswith(b"\r") else body
        if len(body) > limit:  # only "\r\n" or "\n" was left of it
            reason = f"record too large: {len(body)} bytes > {limit}"
            yield n, RecordError(ref, body[:RAW_KEEP], reason)
            continue
        if not body.strip():
            blanks += 1
            if blanks >= BLANK_RUN:
                n += skip_blank_lines(f, limit)
            continue
        blanks = 0
        yield n, _decode_line(ref, body.translate(SWAP_CRLF) if cr else body, encoding)


def _decode_line(ref: str, body: bytes, encoding: str) -> str | RecordError:
    nul = body.find(b"\0")
    if nul >= 0:
        return RecordError(ref, body, f"NUL byte at col {nul + 1}: binary data, not text")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as e:
        if encoding == "UTF-8":
            return RecordError(ref, body, f"invalid UTF-8: {e.reason} at byte {e.start}")
        return RecordError(ref, body, f"invalid {encoding}: undecodable code units in the line")


def skip_rest(f: BinaryIO, head: bytes) -> tuple[int, str | None]:
    """Consume the rest of an over-long line without holding it: (its size without the line
    ending, a read error met on the way or None)."""
    size, tail, chunk = len(head), head[-2:], head
    try:
        while not chunk.endswith(b"\n"):
            chunk = f.readline(CHUNK)
            if not chunk:
                break
            size += len(chunk)
            tail = (tail + chunk)[-2:]
    except READ_ERRORS as e:
        return size, f"unreadable input: {e}; rest of file not read"
    if tail.endswith(b"\n"):
        size -= 2 if tail == b"\r\n" else 1
    return size, None


def _parse_line(ref: str, text: str) -> Any | RecordError:
    """One JSON value from one line, or a "malformed JSON" RecordError."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        return RecordError(ref, text, f"malformed JSON: {e.msg} at col {e.pos + 1}")


def require_object(value: Any, ref: str, raw: str | bytes = "") -> dict[str, Any] | RecordError:
    """`value` if it is a JSON object, else a "not an object: got array" RecordError."""
    if isinstance(value, dict):
        return value
    return RecordError(ref, raw, f"not an object: got {type_name(value)}")


# --- fields of an object -----------------------------------------------------------------


def require_str(
    obj: dict[str, Any], key: str, ref: str, raw: str | bytes = ""
) -> str | RecordError:
    """obj[key] as a string; absent or null is "missing field", another type "wrong type"."""
    value = obj.get(key)
    if value is None:
        return RecordError(ref, raw, f"missing field: {key}")
    return _check_str(value, key, ref, raw)


def optional_str(
    obj: dict[str, Any], key: str, ref: str, raw: str | bytes = "", default: str = ""
) -> str | RecordError:
    """obj[key] as a string, `default` when absent or null; another type is "wrong type"."""
    value = obj.get(key)
    if value is None:
        return default
    return _check_str(value, key, ref, raw)


def _check_str(value: Any, key: str, ref: str, raw: str | bytes) -> str | RecordError:
    if isinstance(value, str):
        return value
    return RecordError(ref, raw, f"wrong type: {key} is {type_name(value)}, expected string")


def type_name(value: Any) -> str:
    """A JSON value's type in words: "object", "array", "null", "str", "int" ..."""
    return {dict: "object", list: "array", type(None): "null"}.get(
        type(value), type(value).__name__
    )

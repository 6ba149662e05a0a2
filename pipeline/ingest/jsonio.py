"""JSON and JSON-lines streams for every source.

A file is opened through `opening.open_source` (gzip detected by its magic bytes, a BOM
decoded, a FIFO or device refused) and streamed, so memory is bounded by
`ctx.max_record_bytes` whatever the file's size. `iter_json_records` reads any of the three
layouts people save JSON in (JSON lines, one array, pretty-printed values): a bad record (bad
JSON, a NUL byte, invalid UTF-8, an over-long line) costs that one record, and only a broken
array or stream ends the file early, with one error that says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, overload

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
    open_line_range,
    open_maybe_gzip,
    open_source,
    skip_blank_lines,
    unreadable,
)
from pipeline.storage import Location

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
# The most bytes of lines _blocks holds at once (and one line more): a block of bad lines is
# given line by line, so without this bound it would hold room() lines of up to the limit each.
BLOCK_BYTES = 16 << 20
HEAD_BYTES = 64 * 1024  # decoded bytes looked at to tell the layout


def _open(path: Location, ctx: IngestContext):
    return open_source(path, ctx.advance, ctx.set_total)


# --- records of any layout ----------------------------------------------------------------


Parsed = tuple[str, Any | RecordError, str | bytes]  # (ref, a value or why not, its raw)


@overload
def iter_json_records(
    path: Location, ctx: IngestContext, blocks: Literal[False] = False
) -> Iterator[Parsed]: ...
@overload
def iter_json_records(
    path: Location, ctx: IngestContext, blocks: bool
) -> Iterator[Block | Parsed]: ...
def iter_json_records(
    path: Location, ctx: IngestContext, blocks: bool = False
) -> Iterator[Block | Parsed]:
    """(ref, the parsed value or why it cannot be read, its raw text) for each record of a
    JSON file, whichever of the layouts `detect_layout` tells it is in.

    Refs are "line N" (JSON lines, blank lines are not records), "element N" (array) and
    "value N" (pretty-printed values), all 1-based. A value is whatever the JSON holds: the
    caller checks it is an object. The raw (the line's text, or the value's bytes) is for the
    caller's own RecordErrors. Progress counts bytes of the file itself. blocks: JSON lines of
    UTF-8 with LF or CRLF ends come as Blocks of `ctx.room()` objects where they can (_blocks).
    """
    with _open(path, ctx) as f:
        layout = detect_layout(path)
        cr = cr_line_ends(path)
        if layout == "lines" and blocks and not cr and getattr(f, "encoding_name", "") == "UTF-8":
            yield from _blocks(f, ctx.max_record_bytes, ctx.room)
            return
        if layout == "lines":
            yield from _parsed(_lines(f, ctx.max_record_bytes, cr=cr))
            return
        stream, unit = (
            (iter_json_array, "element") if layout == "array" else (iter_json_values, "value")
        )
        for v in stream(f, ctx.max_record_bytes):
            ref = f"{unit} {v.index}"
            yield ref, (RecordError(ref, v.raw, v.error) if v.error else v.value), v.raw


def detect_layout(path: Location) -> str:
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


def iter_lines(path: Location, ctx: IngestContext) -> Iterator[tuple[int, str | RecordError]]:
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
    path: Location, start: int, end: int, first: int, ctx: IngestContext, blocks: bool = False
) -> Iterator[Block | Parsed]:
    """iter_json_records over the bytes [start, end) of a plain UTF-8 JSON-lines file, whose
    first line is line `first`: a piece of the file cut at line starts (ingest/shards.py).
    A UTF-8 BOM at the start of the file is skipped, as open_source does."""
    with open_line_range(path, start, end, ctx.advance) as piece:
        if blocks:
            yield from _blocks(piece, ctx.max_record_bytes, ctx.room, first)
        else:
            yield from _parsed(_lines(piece, ctx.max_record_bytes, first))


def _parsed(lines: Iterable[tuple[int, str | RecordError]]):
    for n, text in lines:
        ref = f"line {n}"
        if isinstance(text, RecordError):
            yield ref, text, text.raw
        else:
            yield ref, _parse_line(ref, text), text


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
            yield n + 1, RecordError(f"line {n + 1}", b"", unreadable(e))
            return
        if not line:
            return
        n += 1
        got, stop = _line(f, line, f"line {n}", limit, cr, encoding)
        if got is None:
            blanks += 1
            if blanks >= BLANK_RUN:
                k, err = skip_blank_lines(f, limit)
                n += k
                if err is not None:
                    yield n + 1, RecordError(f"line {n + 1}", b"", err)
                    return
            continue
        blanks = 0
        yield n, got
        if stop:
            return


def _line(
    f: BinaryIO, line: bytes, ref: str, limit: int, cr: bool, encoding: str
) -> tuple[str | RecordError | None, bool]:
    """(One line as read by `f.readline(limit + 2)`: its text, why it cannot be read, or None
    for a blank line; whether the file ends there). An over-long line's rest is skipped on
    `f`, and a read error met there ends the file."""
    if len(line) == limit + 2 and not line.endswith(b"\n"):
        size, err = skip_rest(f, line)
        if err is not None:
            return RecordError(ref, line[:RAW_KEEP], err), True
        reason = f"record too large: {size} bytes > {limit}"
        return RecordError(ref, line[:RAW_KEEP], reason), False
    body = line[:-1] if line.endswith(b"\n") else line
    body = body[:-1] if body.endswith(b"\r") else body
    if len(body) > limit:  # only "\r\n" or "\n" was left of it
        reason = f"record too large: {len(body)} bytes > {limit}"
        return RecordError(ref, body[:RAW_KEEP], reason), False
    if not body.strip():
        return None, False
    return _decode_line(ref, body.translate(SWAP_CRLF) if cr else body, encoding), False


@dataclass(slots=True)
class Block:
    """Consecutive lines, from line `first` on, each one JSON object (`objs`, parsed)."""

    first: int
    objs: list[dict[str, Any]]


def _blocks(
    f: BinaryIO, limit: int, room: Callable[[], int], first: int = 1
) -> Iterator[Block | Parsed]:
    """What _parsed(_lines(f, limit, first)) gives, with each run of `room()` lines (at most
    BLOCK_BYTES of them) that are all JSON objects (none blank, over the limit or unreadable)
    as one Block instead: the records of a clean file cost one parse each and no per-line
    step. A run with any other line is given line by line, exactly as _lines does, and a run
    of blank lines is skipped in bulk as there. Only for UTF-8 streams with LF or CRLF ends."""
    n = first - 1
    blanks = 0  # consecutive blank lines, across runs: after BLANK_RUN, skipped in bulk
    while True:
        lines: list[bytes] = []
        size = 0
        error: str | None = None
        try:
            for _ in range(max(1, room())):
                line = f.readline(limit + 2)
                if not line:
                    break
                lines.append(line)
                size += len(line)
                if len(line) == limit + 2 or size >= BLOCK_BYTES:  # over-long: see _line
                    break
        except READ_ERRORS as e:
            error = unreadable(e)
        if not lines and error is None:
            return
        objs = _objects(lines, limit) if error is None else None
        if objs is not None:
            yield Block(n + 1, objs)
            n += len(lines)
            blanks = 0
            continue
        for line in lines:
            n += 1
            got, stop = _line(f, line, f"line {n}", limit, False, "UTF-8")
            blanks = blanks + 1 if got is None else 0
            if got is not None:
                yield from _parsed([(n, got)])
            if stop:
                return
        if error is None and blanks >= BLANK_RUN:
            k, error = skip_blank_lines(f, limit)
            n += k
        if error is not None:
            yield from _parsed([(n + 1, RecordError(f"line {n + 1}", b"", error))])
            return


def _objects(lines: list[bytes], limit: int) -> list[dict[str, Any]] | None:
    """Each line parsed, when every one is a JSON object of at most `limit` bytes; else None.
    orjson parses the line's bytes as _parse_line parses its decoded text (invalid UTF-8, a NUL
    byte, a blank line are JSON errors to it too, and then the lines go one by one)."""
    if max(map(len, lines)) > limit:
        return None
    try:
        objs = [orjson.loads(line) for line in lines]
    except orjson.JSONDecodeError:
        return None
    return objs if all(type(o) is dict for o in objs) else None


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
        return size, unreadable(e)
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

"""JSON and JSON-lines streams for every source.

A file is read in binary and streamed (gzip detected by its magic bytes, not its name), so
memory is bounded by `ctx.max_record_bytes` whatever the file's size. `iter_json_records` reads
any of the three layouts people save JSON in (JSON lines, one array, pretty-printed values):
a bad record costs that one record, and only a broken array or stream ends the file early, with
one error that says so.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from pipeline.ingest.base import IngestContext, RecordError, SourceUnreadable

GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"
CHUNK = 1 << 20  # bytes read at a time from the file, and when skipping an over-long line
RAW_KEEP = 16 * 1024  # bytes of an over-long record kept as its raw
AROUND = 200  # bytes kept either side of a syntax error that ends a stream
HEAD_BYTES = 64 * 1024  # decompressed bytes looked at to tell the layout
_READ_ERRORS = (OSError, EOFError, zlib.error)  # an I/O error, a truncated or corrupt gzip


# --- opening ------------------------------------------------------------------------------


class CountingReader(io.RawIOBase):
    """Reports the bytes read from the underlying file, for the progress bar."""

    def __init__(self, f: BinaryIO, advance: Callable[[int], None]):
        self.f, self.advance = f, advance

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        n = self.f.readinto(b)  # type: ignore[attr-defined]
        self.advance(n or 0)
        return n


def open_maybe_gzip(path: Path) -> BinaryIO:
    """The file's bytes, decompressed when it starts with the gzip magic bytes."""
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")  # type: ignore


@contextmanager
def _open_counted(path: Path, ctx: IngestContext) -> Iterator[BinaryIO]:
    """The (decompressed) stream of `path`; total and progress in bytes of the file itself."""
    try:
        raw = open(path, "rb", buffering=0)
    except IsADirectoryError:
        raise SourceUnreadable(f"{path}: is a folder; this source reads one file") from None
    except OSError as e:
        raise SourceUnreadable(f"{path}: {e.strerror or e}") from None
    with raw:
        ctx.set_total(Path(path).stat().st_size)
        counted = io.BufferedReader(CountingReader(raw, ctx.advance), buffer_size=CHUNK)
        try:
            gz = counted.peek(2)[:2] == GZIP_MAGIC
        except OSError as e:
            raise SourceUnreadable(f"{path}: cannot be read: {e}") from None
        yield gzip.GzipFile(fileobj=counted) if gz else counted  # type: ignore[misc]


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
    with _open_counted(path, ctx) as f:
        layout = detect_layout(path)
        if layout == "lines":
            for n, text in _lines(f, ctx.max_record_bytes):
                ref = f"line {n}"
                if isinstance(text, RecordError):
                    yield ref, text, text.raw
                else:
                    yield ref, _parse_line(ref, text), text
            return
        stream, unit = (
            (iter_json_array, "element") if layout == "array" else (iter_json_values, "value")
        )
        for v in stream(f, ctx.max_record_bytes):
            ref = f"{unit} {v.index}"
            yield ref, (RecordError(ref, v.raw, v.error) if v.error else v.value), v.raw


def detect_layout(path: Path) -> str:
    """The file's layout, "array", "values" or "lines", from its first 64 KiB (decompressed).

    The first non-space byte decides: `[` is an array, a first line that is just `{` is a
    pretty-printed object (`jq .` output: several are read too), anything else is JSON lines.
    """
    head = _head(path, HEAD_BYTES).removeprefix(BOM).lstrip()
    if head.startswith(b"["):
        return "array"
    if head.split(b"\n", 1)[0].strip() == b"{":
        return "values"
    return "lines"


def _head(path: Path, size: int) -> bytes:
    """Up to `size` (decompressed) bytes from the start of `path`: what could be read before
    an I/O or gzip error, which the reader meets again and reports as a record."""
    head = b""
    try:
        with open_maybe_gzip(path) as f:
            while len(head) < size and (data := f.read1(size - len(head))):  # type: ignore
                head += data
    except _READ_ERRORS:
        pass
    return head


# --- JSON lines ---------------------------------------------------------------------------


def iter_lines(path: Path, ctx: IngestContext) -> Iterator[tuple[int, str | RecordError]]:
    """(1-based line number, the line's text or why it cannot be read) for each non-blank line.

    The text has its line ending removed (LF or CRLF) and a leading UTF-8 BOM on line 1. Blank
    lines are not records and are not yielded. An error's ref is "line N". A line over
    `ctx.max_record_bytes` is a "record too large" error keeping its first bytes; the rest of
    it is skipped in chunks, so the next line reads normally. A corrupt or truncated gzip
    stream ends the file with one "unreadable input" error for the rest.
    """
    with _open_counted(path, ctx) as f:
        yield from _lines(f, ctx.max_record_bytes)


def _lines(f: BinaryIO, limit: int) -> Iterator[tuple[int, str | RecordError]]:
    """iter_lines on an open (decompressed) stream."""
    n = 0
    while True:
        try:
            line = f.readline(limit + 2)  # room for the record, "\r\n" and one more byte
        except _READ_ERRORS as e:
            reason = f"unreadable input: {e}; rest of file not read"
            yield n + 1, RecordError(f"line {n + 1}", b"", reason)
            return
        if not line:
            return
        n += 1
        ref = f"line {n}"
        if len(line) == limit + 2 and not line.endswith(b"\n"):
            size, err = _skip_rest(f, line)
            if err is not None:
                yield n, RecordError(ref, line[:RAW_KEEP], err)
                return
            reason = f"record too large: {size} bytes > {limit}"
            yield n, RecordError(ref, line[:RAW_KEEP], reason)
            continue
        body = line[:-1] if line.endswith(b"\n") else line
        body = body[:-1] if body.endswith(b"\r") else body
        if n == 1 and body.startswith(BOM):
            body = body[3:]
        if len(body) > limit:  # only "\r\n" or "\n" was left of it
            reason = f"record too large: {len(body)} bytes > {limit}"
            yield n, RecordError(ref, body[:RAW_KEEP], reason)
            continue
        if not body.strip():
            continue
        try:
            yield n, body.decode("utf-8")
        except UnicodeDecodeError as e:
            yield n, RecordError(ref, body, f"invalid UTF-8: {e.reason} at byte {e.start}")


def _skip_rest(f: BinaryIO, head: bytes) -> tuple[int, str | None]:
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
    except _READ_ERRORS as e:
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


# --- streamed values (an array, pretty-printed values) -------------------------------------


@dataclass(slots=True)
class JsonValue:
    """One top-level value of a JSON stream, or why it could not be read."""

    index: int  # 1-based: the element number (array) or value number
    offset: int  # byte offset of its first byte in the (decompressed) stream
    value: Any = None
    error: str | None = None  # a RecordError reason; `value` is then None
    raw: bytes = b""  # the value's bytes, or the bytes around the error
    final: bool = False  # the reader stopped here: this error also stands for the rest


class _Stop(Exception):
    """The stream cannot be followed past this point."""

    def __init__(self, reason: str, offset: int, raw: bytes):
        super().__init__(reason)
        self.reason, self.offset, self.raw = reason, offset, raw


_NONSPACE = re.compile(rb"[^ \t\r\n]")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
# A whole string, or a bracket; a lone quote is a string not yet complete in the buffer.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}"]', re.S)
_SCALAR_END = re.compile(rb"[ \t\r\n,\]}]")


class _Window:
    """A window on a binary stream that grows by chunks and drops what has been consumed.

    Values are found by their brackets and strings (without parsing), then parsed whole by
    orjson: so an over-long value is caught before it is held, and positions are exact bytes.
    """

    def __init__(self, f: BinaryIO, chunk_size: int, head: str, noun: str):
        self.f, self.chunk_size = f, chunk_size
        self.head, self.noun = head, noun  # "malformed JSON array", "element"
        self.buf = b""
        self.base = 0  # stream offset of buf[0]
        self.pos = 0  # index in buf of the next byte to consume
        self.eof = False

    def more(self) -> bool:
        if self.eof:
            return False
        try:
            data = self.f.read(self.chunk_size)
        except _READ_ERRORS as e:
            raise self.stop(f"unreadable input: {e}") from None
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def stop(self, reason: str, at: int | None = None) -> _Stop:
        """A _Stop at buf index `at` (default: pos), keeping the bytes around it."""
        at = self.pos if at is None else at
        raw = self.buf[max(0, at - AROUND) : at + AROUND]
        offset = self.base + at
        return _Stop(f"{reason} at byte {offset}; rest of file not read", offset, raw)

    def peek(self) -> bytes:
        """The next non-space byte (pos moves to it), b"" at the end of the stream."""
        cut = self.pos - AROUND  # drop what was consumed (bar some context for errors)
        if cut >= self.chunk_size:
            self.buf, self.base, self.pos = self.buf[cut:], self.base + cut, AROUND
        while True:
            m = _NONSPACE.search(self.buf, self.pos)
            if m:
                self.pos = m.start()
                return self.buf[self.pos : self.pos + 1]
            self.pos = len(self.buf)
            if not self.more():
                return b""

    def skip_bom(self) -> None:
        while len(self.buf) < 3 and self.more():
            pass
        if self.buf.startswith(BOM):
            self.pos = 3

    def value(self, index: int, max_bytes: int) -> JsonValue:
        """Read the value at pos (after peek): found by its extent, then parsed."""
        start = self.pos
        end = self._value_end(index, max_bytes)
        data = self.buf[start:end]
        self.pos = end
        offset = self.base + start
        obj, reason, at = _loads(data)
        if reason:
            return JsonValue(index, offset, error=f"{reason} at byte {offset + at}", raw=data)
        return JsonValue(index, offset, obj, raw=data)

    def _value_end(self, index: int, max_bytes: int) -> int:
        start = self.pos
        first = self.buf[start : start + 1]
        if first in (b"{", b"["):
            depth, i = 0, start
            while True:
                m = _TOKEN.search(self.buf, i)
                if m is None or (m.end() - m.start() == 1 and self.buf[m.start()] == 0x22):
                    i = len(self.buf) if m is None else m.start()
                    self._grow(start, index, max_bytes)
                    continue
                i = m.end()
                c = self.buf[m.start()]
                if c != 0x22:  # a bracket
                    depth += 1 if c in b"{[" else -1
                    if depth == 0:
                        break
            end = i
        elif first == b'"':
            while (m := _STRING.match(self.buf, start)) is None:
                self._grow(start, index, max_bytes)
            end = m.end()
        else:  # a number, true/false/null or garbage: up to the next delimiter
            while (m := _SCALAR_END.search(self.buf, start)) is None:
                if not self._grow(start, index, max_bytes, eof_ok=True):
                    break
            end = m.start() if m else len(self.buf)
            if end == start:
                found = first.decode("latin-1")
                raise self.stop(f"{self.head}: expected a value, found {found!r}")
        if end - start > max_bytes:
            self._too_large(start, index, max_bytes)
        return end

    def _grow(self, start: int, index: int, max_bytes: int, eof_ok: bool = False) -> bool:
        """Read more of a value that starts at buf[start]; False at the end if eof_ok."""
        if len(self.buf) - start > max_bytes:
            self._too_large(start, index, max_bytes)
        if self.more():
            return True
        if eof_ok:
            return False
        raise self.stop(f"{self.head}: file ends inside {self.noun} {index}", start)

    def _too_large(self, start: int, index: int, max_bytes: int) -> None:
        left = len(self.buf) - start
        raw = self.buf[start : start + RAW_KEEP]
        self.buf, self.pos = b"", 0
        while self.more():  # count what is left without holding it
            left += len(self.buf)
            self.buf = b""
        raise _Stop(
            f"record too large: {self.noun} {index} at byte {self.base + start} is over "
            f"{max_bytes} bytes; rest of file not read ({left} bytes)",
            self.base + start,
            raw,
        )


def iter_json_array(f: BinaryIO, max_bytes: int, chunk_size: int = CHUNK) -> Iterator[JsonValue]:
    """Stream the elements of one top-level JSON array, without holding the whole array.

    Yields a JsonValue per element (`index` 1-based). An element that is delimited but does not
    parse (a bad literal, invalid UTF-8) is an error for that element only and reading goes on.
    Where the structure itself is broken (no `[`, a missing `,`, the file ends inside the
    array, an element over `max_bytes`) the last JsonValue is an error with `final=True`
    that stands for the rest of the file, naming the byte offset.
    """
    w = _Window(f, chunk_size, "malformed JSON array", "element")
    index = 1
    try:
        w.skip_bom()
        if w.peek() != b"[":
            raise w.stop("malformed JSON array: expected '['")
        w.pos += 1
        if w.peek() == b"]":
            w.pos += 1
        else:
            while True:
                if not w.peek():
                    raise w.stop("malformed JSON array: file ends before the closing ']'")
                yield w.value(index, max_bytes)
                index += 1
                c = w.peek()
                if c == b"]":
                    w.pos += 1
                    break
                if c != b",":
                    found = f"found {c.decode('latin-1')!r}" if c else "file ends"
                    raise w.stop(f"malformed JSON array: expected ',' or ']', {found}")
                w.pos += 1
        if w.peek():
            raise w.stop("malformed JSON array: data after the closing ']'")
    except _Stop as e:
        yield JsonValue(index, e.offset, error=e.reason, raw=e.raw, final=True)


def iter_json_values(f: BinaryIO, max_bytes: int, chunk_size: int = CHUNK) -> Iterator[JsonValue]:
    """Stream whitespace-separated JSON values (one pretty-printed object, `jq .` output)."""
    w = _Window(f, chunk_size, "malformed JSON", "value")
    index = 1
    try:
        w.skip_bom()
        while w.peek():
            yield w.value(index, max_bytes)
            index += 1
    except _Stop as e:
        yield JsonValue(index, e.offset, error=e.reason, raw=e.raw, final=True)


def _loads(data: bytes) -> tuple[Any, str | None, int]:
    """Parse one JSON value; on failure (None, reason, byte offset of the fault in data)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"invalid UTF-8: {e.reason}", e.start
    try:
        return orjson.loads(text), None, 0
    except orjson.JSONDecodeError as e:
        return None, f"malformed JSON: {e.msg}", len(text[: e.pos].encode())


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

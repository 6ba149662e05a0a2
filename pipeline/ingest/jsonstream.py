"""Streamed JSON values: the elements of one top-level array, or whitespace-separated values.

Values are found by their brackets and strings without parsing, then each is parsed whole by
orjson, so an over-long value is caught before it is held and positions are exact bytes. A
value that is delimited but does not parse costs that value only; a broken structure ends the
stream with one error that stands for the rest of the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from pipeline.ingest.opening import CHUNK, READ_ERRORS, UNREADABLE

BOM = b"\xef\xbb\xbf"
RAW_KEEP = 16 * 1024  # bytes of an over-long value kept as its raw
AROUND = 200  # bytes kept either side of a syntax error that ends a stream


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
            data = self.f.read1(self.chunk_size)  # type: ignore[attr-defined]
        except READ_ERRORS as e:
            raise self.stop(f"{UNREADABLE}: {e}") from None
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
    nul = data.find(b"\0")
    if nul >= 0:
        return None, "NUL byte: binary data, not text", nul
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"invalid UTF-8: {e.reason}", e.start
    try:
        return orjson.loads(text), None, 0
    except orjson.JSONDecodeError as e:
        return None, f"malformed JSON: {e.msg}", len(text[: e.pos].encode())

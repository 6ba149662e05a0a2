"""Input records counted apart from the readers, for `editcurate verify`.

What "independent" means here, honestly: a counter opens the file through the same
`opening.open_source` as the reader (so both see the same bytes after gzip and BOM decoding)
and agrees with the reader on what one record is: the unit is part of the format's
definition, not something to discover twice. Everything after that is separate code: a
counter never parses JSON, never calls the csv module, never maps a field, never builds an
item, and keeps no state with the reader. So a reader that drops a record on any path (a
swallowed exception, a `continue` too many, one quote eating the rest of a CSV file, a bad
batch) is caught, because items + errors no longer add up to the count. What it cannot catch
is a byte lost before both (a decompressor bug) or a unit defined wrongly in both.

Units, with the reader's conventions that make every record land somewhere:

- JSON lines: non-blank lines, plus a line over `limit` bytes however blank, plus one for a
  read error (a truncated gzip) that ends the stream: the unterminated line before it and
  the rest are that one record.
- JSON array / pretty-printed values: top-level values delimited by brackets, strings and
  separators, plus one when the structure breaks (it ends the stream: the rest is one record).
- CSV/TSV: records by csvio's rule (see there), counted with a quote-state machine of its own.
- Parquet: the footer's row count.
- A table or CodeReviewer file with no non-blank line is one (skip) record.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pipeline.ingest.opening import (
    BLANK_RUN,
    CHUNK,
    READ_ERRORS,
    cr_line_ends,
    lf_lines,
    open_line_range,
    open_source,
    parquet_file,
)
from pipeline.storage import Location

if TYPE_CHECKING:
    from pipeline.config import RunConfig

_WS = b" \t\n\r\x0b\x0c"  # bytes.strip()'s whitespace: what the readers call blank


def count_parquet(path: Location) -> int:
    try:
        return parquet_file(path).metadata.num_rows
    except (pa.ArrowException, OSError):
        return 1  # the reader's one "unreadable Parquet" record


# --- JSON -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LineCuts:
    """A plain UTF-8 JSON-lines file's pieces, cut at line starts (ingest/shards.py): byte
    ranges counted apart, by tasks on `run`'s executor (its workers read the file)."""

    ranges: list[tuple[int, int]]
    run: RunConfig


def count_json(path: Location, limit: int, cuts: LineCuts | None = None) -> tuple[int, str]:
    from pipeline.ingest.jsonio import detect_layout

    layout = detect_layout(path)
    if layout == "lines":
        return count_lines(path, limit, cuts), "non-blank lines"
    unit = "array elements" if layout == "array" else "top-level values"
    return count_values(path, limit, array=layout == "array"), unit


def count_lines(path: Location, limit: int, cuts: LineCuts | None = None) -> int:
    """Records of a JSON-lines file; with `cuts`, its ranges' counts added up."""
    if cuts is not None:
        from pipeline.executors import tasks

        todo = [(path, s, e, limit) for s, e in cuts.ranges]
        return sum(c["records"] for _, c in tasks(cuts.run, todo, _count_range, None))
    with open_source(path) as raw:
        return _count_lines(lf_lines(raw, cr_line_ends(path)), limit)


def _count_range(task: tuple[Location, int, int, int], _: Any) -> Iterator[tuple[dict, dict]]:
    """Records of bytes [start, end) of a plain UTF-8 JSON-lines file cut at line starts."""
    path, start, end, limit = task
    with open_line_range(path, start, end) as f:
        yield {}, {"records": _count_lines(f, limit)}


def _count_lines(f: Any, limit: int) -> int:
    n = 0
    length, nonblank, last = 0, False, 0

    def end() -> int:
        body = length - (1 if last == 0x0D else 0)
        return 1 if nonblank or body > limit else 0

    while True:
        try:
            chunk = f.read1(CHUNK)
        except READ_ERRORS:
            return n + 1  # the unterminated line and the rest: one record
        if not chunk:
            break
        i, m = 0, len(chunk)
        while i < m:
            if length == 0:  # a line start: whole blank lines are counted in bulk
                j = chunk.rfind(b"\n", i, _blank_end(chunk, i)) + 1
                if j:
                    n += _over_limit(chunk, i, j, limit)
                    i = j
                    continue
            nl = chunk.find(b"\n", i)
            stop = m if nl < 0 else nl
            if stop > i:
                part = chunk[i:stop]
                length += len(part)
                last = part[-1]
                nonblank = nonblank or bool(part.strip(_WS))
            if nl < 0:
                break
            n += end()
            length, nonblank, last = 0, False, 0
            i = nl + 1
    return n + (end() if length else 0)


_BLANKS = re.compile(rb"[ \t\n\r\x0b\x0c]+")


def _blank_end(chunk: bytes, i: int) -> int:
    """Where the whitespace run from chunk[i] ends (a C scan, not a Python loop per line)."""
    mt = _BLANKS.match(chunk, i)
    return i if mt is None else mt.end()


def _over_limit(chunk: bytes, i: int, j: int, limit: int) -> int:
    """Lines of chunk[i:j] (whole blank lines, i a line start) over `limit` bytes without a
    final CR: each is a record (the readers' "record too large"). None can be when the span is
    within the limit. The run is matched from line starts only (`^`): `[^\\n]{N,}` alone was
    tried at every byte of a line, each try scanning to its end (two blank lines one byte
    short of a 200 KB limit: 15 s)."""
    if j - i <= limit:
        return 0
    long = re.compile(rb"(?m)^[^\n]{%d,}" % (limit + 1))
    return sum(
        (mt.end() - mt.start() - (chunk[mt.end() - 1] == 0x0D)) > limit
        for mt in long.finditer(chunk, i, j)
    )


_NONSPACE = re.compile(rb"[^ \t\r\n]")
_SCALAR_STOP = re.compile(rb"[ \t\r\n,\]}]")
_STRING_STOP = re.compile(rb'["\\]')
_COMPOUND_STOP = re.compile(rb'["\[\]{}]')
OPEN, FIRST, VALUE, AFTER, TRAIL, SCALAR, STRING, COMPOUND = range(8)


def count_values(path: Location, limit: int, array: bool) -> int:
    """Top-level values of an array (array=True) or of a whitespace-separated stream, +1 when
    the structure breaks (what is left is one record). A byte-level state machine over
    chunks: strings and brackets are followed, nothing is parsed or held."""
    n, phase = 0, OPEN if array else VALUE
    depth, in_str, esc, size = 0, False, False, 0
    with open_source(path) as f:
        while True:
            try:
                chunk = f.read1(CHUNK)
            except READ_ERRORS:
                return n + 1
            if not chunk:
                break
            i, m = 0, len(chunk)
            while i < m:
                if phase <= TRAIL:  # between values: skip spaces, then one byte decides
                    mt = _NONSPACE.search(chunk, i)
                    if mt is None:
                        break
                    i = mt.start()
                    c = chunk[i]
                    if phase == TRAIL or (phase == OPEN and c != 0x5B):
                        return n + 1
                    if phase == OPEN or (phase == FIRST and c == 0x5D):
                        phase, i = (FIRST if phase == OPEN else TRAIL), i + 1
                        continue
                    if phase == AFTER and array:
                        if c not in (0x2C, 0x5D):
                            return n + 1
                        phase, i = (VALUE if c == 0x2C else TRAIL), i + 1
                        continue
                    size = 0
                    if c in (0x7B, 0x5B):
                        phase, depth, in_str = COMPOUND, 0, False
                    elif c == 0x22:
                        phase, esc, size, i = STRING, False, 1, i + 1
                    elif c in (0x2C, 0x5D, 0x7D):
                        return n + 1  # expected a value
                    else:
                        phase = SCALAR
                    continue
                if phase == SCALAR:
                    mt = _SCALAR_STOP.search(chunk, i)
                    k = m if mt is None else mt.start()
                    size, i = size + k - i, k
                    if size > limit:
                        return n + 1
                    if mt is not None:
                        n, phase = n + 1, AFTER
                    continue
                if phase == STRING or in_str:
                    k, esc = _string_end(chunk, i, esc)
                    size, i = size + (m if k < 0 else k) - i, (m if k < 0 else k)
                    if size > limit:
                        return n + 1
                    if k >= 0:
                        if phase == STRING:
                            n, phase = n + 1, AFTER
                        in_str = False
                    continue
                mt = _COMPOUND_STOP.search(chunk, i)  # COMPOUND, outside strings
                k = m if mt is None else mt.end()
                size, i = size + k - i, k
                if size > limit:
                    return n + 1
                if mt is None:
                    continue
                b = chunk[k - 1]
                if b == 0x22:
                    in_str, esc = True, False
                else:
                    depth += 1 if b in (0x7B, 0x5B) else -1
                    if depth == 0:
                        n, phase = n + 1, AFTER
    if phase == SCALAR:
        n, phase = n + 1, AFTER
    if phase in (STRING, COMPOUND, OPEN) or (array and phase in (FIRST, VALUE, AFTER)):
        return n + 1  # the file ends inside a value, or before the closing ']'
    return n


def _string_end(chunk: bytes, i: int, esc: bool) -> tuple[int, bool]:
    """Inside a string at chunk[i] (`esc`: the previous chunk ended in an escaping
    backslash): (the index after the closing quote, False), or (-1, whether the chunk ends in
    an escaping backslash) when the string goes on."""
    m = len(chunk)
    if esc:
        i += 1
    while i < m:
        mt = _STRING_STOP.search(chunk, i)
        if mt is None:
            return -1, False
        if chunk[mt.start()] == 0x22:
            return mt.end(), False
        if mt.end() == m:
            return -1, True
        i = mt.end() + 1  # a backslash escapes the next byte
    return -1, False


# --- CSV ------------------------------------------------------------------------------

SR, SF, IF, IQ, QQ, EC = range(
    6
)  # start record/field, in field, in quoted, quote in quoted, eat CRLF


def count_csv(path: Location, limit: int, delimiter: str) -> int:
    """CSV records by csvio's rule, counted with an own state machine (strict quoting)."""
    from pipeline.ingest.csvio import Marker, PhysicalLines

    delim = delimiter.encode()[0]
    stop = re.compile(b"[" + re.escape(delimiter.encode()) + rb"\r\n]")
    n, width, blanks = 0, None, 0
    with open_source(path) as f:
        lines = PhysicalLines(f, limit, cr_line_ends(path))
        while (first := lines.next()) is not None:
            line = first[1]
            if isinstance(line, Marker):
                n += 1
                if line.final:
                    break
                continue
            if not line.strip():
                blanks += 1
                if blanks >= BLANK_RUN:  # a flood of them: skipped in bulk, as csvio does
                    lines.skip_blank()
                continue
            blanks = 0
            taken, size = [first], len(line)
            state, fields, broken = _csv_line(line, SR, 0, delim, stop)
            while not broken and state == IQ:
                nxt = lines.next()
                if nxt is None or isinstance(nxt[1], Marker) or size + len(nxt[1]) > limit:
                    if nxt is not None:
                        lines.push([nxt])
                    broken = True
                    break
                size += len(nxt[1])
                taken.append(nxt)
                state, fields, broken = _csv_line(nxt[1], state, fields, delim, stop)
            if not broken and width is not None and len(taken) > 1 and fields != width:
                broken = True
            if broken:
                lines.push(taken[1:])
                n += 1
            elif width is None:
                width = fields  # the header
            else:
                n += 1
    return n if width is not None or n else 1  # no record and no header: empty_source


def _csv_line(line: bytes, state: int, fields: int, delim: int, stop: re.Pattern):
    """Run one physical line through the csv state machine: (state, fields, broken)."""
    i, m = 0, len(line)
    while i < m:
        c = line[i]
        if state == SR:
            if c in (0x0A, 0x0D):
                state, i = EC, i + 1
            else:
                state = SF
        elif state == SF:
            i += 1
            if c in (0x0A, 0x0D):
                fields, state = fields + 1, EC
            elif c == 0x22:
                state = IQ
            elif c == delim:
                fields += 1
            else:
                state = IF
        elif state == IF:
            mt = stop.search(line, i)
            if mt is None:
                i = m
                continue
            i = mt.end()
            fields += 1
            state = SF if line[mt.start()] == delim else EC
        elif state == IQ:
            j = line.find(b'"', i)
            if j < 0:
                i = m
                continue
            state, i = QQ, j + 1
        elif state == QQ:
            i += 1
            if c == 0x22:
                state = IQ
            elif c == delim:
                fields, state = fields + 1, SF
            elif c in (0x0A, 0x0D):
                fields, state = fields + 1, EC
            else:
                return state, fields, True  # "',' expected after '\"'"
        else:  # EC
            if c not in (0x0A, 0x0D):
                return state, fields, True  # "new-line character seen in unquoted field"
            i += 1
    if state in (SF, IF, QQ):
        fields, state = fields + 1, SR
    elif state == EC:
        state = SR
    return state, fields, False

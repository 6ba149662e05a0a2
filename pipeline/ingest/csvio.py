"""CSV/TSV records read so that one broken quote costs one record, not the rest of the file.

The stream is split into physical lines (LF, or CR alone in a file whose first 64 KiB have CRs
and no LF: classic Mac OS; each at most `limit` bytes, a longer one is an error of its own and
skipped in chunks) and each record is parsed by the csv module in strict
mode from the lines it needs. A record is *broken* when the csv module rejects it (a stray
character after a closing quote, a lone CR), when its quoted field is still open at the end
of the file or after `limit` bytes, or when it spans several lines and gives another number
of fields than the header. A broken record is its first line alone: it becomes one error and
reading starts again on the next line, so an unclosed quote in row 5 does not swallow rows 6
onwards. The first record that is not broken is the header.

count.py counts records by this rule with its own quote-state machine (not the csv module);
`editcurate verify` compares the two.
"""

from __future__ import annotations

import csv
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

from pipeline.ingest.jsonio import skip_rest
from pipeline.ingest.opening import (
    BLANK_RUN,
    READ_ERRORS,
    SWAP_CRLF,
    lf_lines,
    skip_blank_lines,
    unreadable,
)

RAW_KEEP = 16 * 1024


@dataclass(slots=True)
class Marker:
    """A physical line that is not text to parse: too long, or where reading failed."""

    reason: str
    raw: bytes
    final: bool = False  # reading stopped here


class PhysicalLines:
    """(1-based line number, the line's bytes with its ending | Marker); lines can be pushed
    back to be read again."""

    def __init__(self, f: BinaryIO, limit: int, cr: bool = False):
        self.swap = cr  # CR-only line ends (cr_line_ends): lines are cut at CR
        self.f = lf_lines(f, cr)
        self.limit = limit
        self.n = 0
        self.back: deque[tuple[int, bytes | Marker]] = deque()
        self.ended = False

    def next(self) -> tuple[int, bytes | Marker] | None:
        if self.back:
            return self.back.popleft()
        got = self._next()
        if got is None or not self.swap:
            return got
        no, line = got
        if isinstance(line, Marker):
            return no, Marker(line.reason, line.raw.translate(SWAP_CRLF), line.final)
        return no, line.translate(SWAP_CRLF)

    def _next(self) -> tuple[int, bytes | Marker] | None:
        if self.ended:
            return None
        limit = self.limit
        try:
            line = self.f.readline(limit + 2)
        except READ_ERRORS as e:
            self.ended = True
            return self.n + 1, Marker(unreadable(e), b"", True)
        if not line:
            self.ended = True
            return None
        self.n += 1
        if len(line) == limit + 2 and not line.endswith(b"\n"):
            size, err = skip_rest(self.f, line)
            if err is not None:
                self.ended = True
                return self.n, Marker(err, line[:RAW_KEEP], True)
            return self.n, Marker(f"record too large: {size} bytes > {limit}", line[:RAW_KEEP])
        body = line.rstrip(b"\n")
        body = body[:-1] if body.endswith(b"\r") else body
        if len(body) > limit:
            return self.n, Marker(f"record too large: {len(body)} bytes > {limit}", body[:RAW_KEEP])
        return self.n, line

    def skip_blank(self) -> None:
        """Skip the blank lines that follow in bulk (opening.skip_blank_lines), when none was
        pushed back: for a reader between records, never inside a quoted field."""
        if not self.back and not self.ended:
            k, err = skip_blank_lines(self.f, self.limit)
            self.n += k
            if err is not None:  # the next line is that error's record
                self.ended = True
                self.back.append((self.n + 1, Marker(err, b"", True)))

    def push(self, items: Sequence[tuple[int, bytes | Marker]]) -> None:
        self.back.extendleft(reversed(items))


class _TooLarge(Exception):
    pass


@dataclass(slots=True)
class CsvRecord:
    line: int  # the physical line it starts on
    row: list[str] | None  # None: see `error`
    error: str | None = None
    raw: bytes = b""
    header: bool = False
    final: bool = False


def iter_csv_records(
    f: BinaryIO, limit: int, delimiter: str, cr: bool = False
) -> Iterator[CsvRecord]:
    """The header (`header=True`, the first record that is not broken), then every record:
    a row of strings (fields decoded with surrogateescape: the caller checks them) or an
    error. Blank lines are not records. `cr`: the lines end in CR alone (cr_line_ends)."""
    lines = PhysicalLines(f, limit, cr)
    width: int | None = None
    blanks = 0  # consecutive blank lines: after BLANK_RUN of them the run is skipped in bulk
    while (first := lines.next()) is not None:
        no, line = first
        if isinstance(line, Marker):
            yield CsvRecord(no, None, line.reason, line.raw, final=line.final)
            if line.final:
                return
            continue
        if not line.strip():
            blanks += 1
            if blanks >= BLANK_RUN:
                lines.skip_blank()
            continue
        blanks = 0
        taken: list[tuple[int, bytes]] = [(no, line)]
        row, error = _parse(line, lines, taken, limit, delimiter)
        if row is not None and width is not None and len(taken) > 1 and len(row) != width:
            error = (
                f"malformed CSV: the record from line {no} spans {len(taken)} lines and has "
                f"{len(row)} fields, the header {width}: an unbalanced quote?"
            )
            row = None
        if row is None:
            lines.push(taken[1:])  # read again from the next line
            yield CsvRecord(no, None, f"{error}; read again from line {no + 1}", line[:RAW_KEEP])
            continue
        if width is None:
            width = len(row)
            yield CsvRecord(no, row, header=True)
        else:
            yield CsvRecord(no, row, raw=b"".join(t[1] for t in taken)[:RAW_KEEP])


def _parse(
    line: bytes, lines: PhysicalLines, taken: list[tuple[int, bytes]], limit: int, delimiter: str
) -> tuple[list[str] | None, str | None]:
    """Parse the record that starts with `line`, pulling more lines into `taken` while a
    quoted field is open: (row, None) or (None, why it is broken)."""
    size = len(line)

    def feed() -> Iterator[str]:
        nonlocal size
        yield line.decode("utf-8", "surrogateescape")
        while True:
            nxt = lines.next()
            if nxt is None:
                return
            no, more = nxt
            if isinstance(more, Marker):
                lines.push([nxt])
                return
            if size + len(more) > limit:
                lines.push([nxt])
                raise _TooLarge
            size += len(more)
            taken.append((no, more))
            yield more.decode("utf-8", "surrogateescape")

    reader = csv.reader(feed(), delimiter=delimiter, strict=True)
    start = taken[0][0]
    try:
        return next(reader), None
    except _TooLarge:
        return None, f"record too large: a quoted field from line {start} runs past {limit} bytes"
    except csv.Error as e:
        if str(e) == "unexpected end of data":
            return None, f"unclosed quote: the quoted field opened in line {start} never closes"
        return None, f"malformed CSV: {e}"
    except StopIteration:  # not reached: `line` is not blank
        return None, "malformed CSV: no row"

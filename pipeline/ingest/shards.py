"""Pieces of a source that workers read on their own, and the sums of what they read.

A big source is cut so that the executor (run.executor) can read its pieces at once: a plain
UTF-8 JSON-lines file at line starts every `ingest.shard_bytes` bytes (the planning pass
counts the newlines before each cut, so refs keep the file's own line numbers), a Parquet
table (a file or a folder of parts) at row-group boundaries (rows numbered across them).
Anything else (gzip, UTF-16 with a BOM or without, a JSON array, CSV with its quoted
newlines, the other kinds) is one piece, read as before. `read_piece` is the pure per-piece
step: a generator of item and error batches with the piece's counts; `Tally` sums them per
source in the driver, which then checks what needs the whole source (a mapped field no record
had, a file with no record). The stage writes the batches re-chunked to `ingest.batch_size`
rows, so the output does not depend on where the cuts fall, nor on which executor read the
pieces.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline import storage
from pipeline.config import RunConfig, SourceConfig
from pipeline.executors import tasks
from pipeline.ingest.base import PROBLEM_REFS, Batcher, IngestContext, SourceUnreadable
from pipeline.ingest.mapping import UnmappedField
from pipeline.ingest.opening import (
    BOMS,
    CHUNK,
    GZIP_MAGIC,
    SNIFF,
    cr_line_ends,
    open_regular,
    parquet_file,
    utf16_guess,
)
from pipeline.ingest.sources import SOURCES
from pipeline.secrets.masking import shown
from pipeline.storage import Location


@dataclass(frozen=True)
class Shard:
    """A piece of one source: JSON lines `[start, end)` bytes, or Parquet row groups
    `[start, end)` counted across the source's files; `first` numbers its first line/row."""

    kind: str  # "lines" | "groups"
    start: int
    end: int
    first: int
    of: int  # the whole source's bytes (lines) or rows (groups): the progress bar's total
    files: tuple[int, int] = (0, 0)  # groups: the files [lo, hi) holding them, and
    k0: int = 0  # the number (across files) of file lo's first row group


def plan(
    spec: SourceConfig, path: Location, shard_bytes: int, run: RunConfig | None = None
) -> list[Shard | None]:
    """The pieces `path` is read in; [None] (the whole source, one reader) unless its kind
    says how to cut it (Source.pieces: a table's row groups or lines) and it is big enough.
    `run`: the executor a JSON-lines file is scanned for its cuts on (None: this process)."""
    pieces = SOURCES[spec.kind].pieces
    if pieces is None:
        return [None]
    try:
        layout = pieces(spec, path)
        if layout is not None:
            how, paths = layout
            if how == "groups":
                return _groups(paths, shard_bytes)
            return _lines(paths[0], shard_bytes, run)
    except (SourceUnreadable, OSError, pa.ArrowException):
        pass  # the reader meets it again and reports it, reading the source whole
    return [None]


def _groups(paths: list[Location], shard_bytes: int) -> list[Shard | None]:
    sizes: list[int] = []
    rows: list[int] = []
    file_of: list[int] = []  # the file of each row group
    first_group: list[int] = []  # the number of each file's first row group
    for i, p in enumerate(paths):
        md = parquet_file(p).metadata
        first_group.append(len(sizes))
        for g in range(md.num_row_groups):
            sizes.append(md.row_group(g).total_byte_size)
            rows.append(md.row_group(g).num_rows)
            file_of.append(i)
    cuts = [0]
    size = 0
    for k, s in enumerate(sizes[:-1]):
        size += s
        if size >= shard_bytes:
            cuts.append(k + 1)
            size = 0
    if len(cuts) < 2:
        return [None]
    out: list[Shard | None] = []
    first = 1
    for start, end in zip(cuts, [*cuts[1:], len(sizes)], strict=True):
        lo, hi = file_of[start], file_of[end - 1] + 1
        out.append(Shard("groups", start, end, first, sum(rows), (lo, hi), first_group[lo]))
        first += sum(rows[start:end])
    return out


def _lines(path: Location, shard_bytes: int, run: RunConfig | None) -> list[Shard | None]:
    """Cuts right after the first newline at or past every `shard_bytes` bytes of the file,
    each with the number of its first line (1 + the newlines before it). The file is read by
    byte ranges on the executor (`_scan_range`: a range's newlines and where its first one
    is), so on Ray the workers read it and this process adds up a few numbers a range."""
    from pipeline.ingest.jsonio import detect_layout

    with open_regular(path) as f:
        size = storage.size(f)
        if size <= shard_bytes:  # one piece: no need to count lines
            return [None]
        head = f.read(SNIFF)
    if (
        head[:2] == GZIP_MAGIC
        or _foreign_bom(head)
        or utf16_guess(head) is not None  # UTF-16 without a BOM: an LF byte is half a char
        or cr_line_ends(path)  # lines end at CRs: cut by the reader, not at LF bytes
        or detect_layout(path) != "lines"
    ):
        return [None]
    step = max(shard_bytes, -(-size // MAX_RANGES))
    ranges = [(path, s, min(s + step, size)) for s in range(0, size, step)]
    found = [c for _, c in tasks(run, ranges, _scan_range, None)] if run else _scanned(ranges)
    # newlines before each range; then, from the last range back, the first newline at or
    # past each range's start (in it, or in a later one when a line is longer than a range)
    before = [0]
    for c in found:
        before.append(before[-1] + c["newlines"])
    cuts: list[tuple[int, int]] = []
    nxt: tuple[int, int] | None = None
    for k in range(len(found) - 1, 0, -1):
        if found[k]["first"] is not None:
            nxt = (found[k]["first"] + 1, before[k] + 2)  # the line after that newline
        if nxt is not None and nxt[0] < size and (not cuts or cuts[-1] != nxt):
            cuts.append(nxt)
    cuts = [(0, 1), *reversed(cuts)]
    if len(cuts) < 2:
        return [None]
    ends = [c[0] for c in cuts[1:]] + [size]
    return [Shard("lines", s, e, n, size) for (s, n), e in zip(cuts, ends, strict=True)]


MAX_RANGES = 1 << 16  # byte ranges a JSON-lines file is scanned in, at most


def _scan_range(task: tuple[Location, int, int], _: Any) -> Iterator[tuple[dict, dict]]:
    """Bytes [start, end) of a file: how many newlines, and the offset of the first (None:
    none there)."""
    path, start, end = task
    n, first, at = 0, None, start
    with open_regular(path) as f:
        f.seek(start)
        while at < end and (chunk := f.read(min(CHUNK, end - at))):
            if first is None and (i := chunk.find(b"\n")) >= 0:
                first = at + i
            n += chunk.count(b"\n")
            at += len(chunk)
    yield {}, {"newlines": n, "first": first}


def _scanned(ranges: list[tuple[Location, int, int]]) -> list[dict[str, Any]]:
    """_scan_range of each range, in this process."""
    return [c for r in ranges for _, c in _scan_range(r, None)]


def _foreign_bom(head: bytes) -> bool:
    """A BOM open_source transcodes (UTF-16/32): byte cuts do not apply to such a file."""
    return any(head.startswith(bom) for bom, codec, _ in BOMS if codec)


# --- the per-piece step ----------------------------------------------------------------


@dataclass(frozen=True)
class Params:
    """What a worker needs besides the piece: the ingest config's limits."""

    max_record_bytes: int
    batch_size: int
    bot_patterns: tuple[str, ...]
    record_scan_budget: int | None = None  # the secret-scan work one item may take


COUNTERS = ("records", "items", "errors", "skipped")
SUMS = ("reasons", "field_problems", "secrets")


def read_piece(task: tuple[str, SourceConfig, Location, Shard | None], p: Params) -> Any:
    """Yields ({"items.parquet": batch, "errors.parquet": batch}, {"advance", "total"}) every
    `batch_size` records of one piece, then ({}, {"done": its counts, warnings and mapping
    state}); a failure that stops the source is ({}, {"raise": [kind, message]})."""
    name, spec, path, shard = task
    live: dict[str, Any] = {"advance": 0, "total": None}
    warnings: list[str] = []
    fields: dict[str, Any] = {}

    def advance(n: int) -> None:
        live["advance"] += n

    def seen(m: Any) -> None:
        fields.update(objects=m.objects, unseen=dict(m.unseen), keys=list(m.keys_seen))

    ctx = IngestContext(
        max_record_bytes=p.max_record_bytes,
        batch_size=p.batch_size,
        bot_patterns=p.bot_patterns,
        scan_budget=p.record_scan_budget,
        advance=advance,
        set_total=lambda n: live.__setitem__("total", n),
        warn=lambda w: warnings.append(shown(w)),  # names a file, a header
        shard=shard,
        fields_seen=seen,
    )
    batcher = Batcher(name, ctx)
    ctx.room = lambda: p.batch_size - batcher.pending

    def flush() -> tuple[dict[str, Any], dict[str, Any]]:
        outs = {"items.parquet": batcher.take_items(), "errors.parquet": batcher.take_errors()}
        counts = dict(live)
        live["advance"] = 0
        return {k: v for k, v in outs.items() if v is not None}, counts

    try:
        for rec in SOURCES[spec.kind].read(spec, path, ctx):
            batcher.add(rec)
            if batcher.pending >= p.batch_size:
                yield flush()
    except SourceUnreadable as e:
        yield {}, {"raise": ["unreadable", str(e)]}
        return
    except UnmappedField as e:  # a config error found by reading
        yield {}, {"raise": ["unmapped", str(e)]}
        return
    except ValueError as e:  # a bad option (unknown transform ...), before any record
        yield {}, {"raise": ["option", str(e)]}
        return
    yield flush()
    yield {}, {"done": tallied(batcher), "warnings": warnings, "fields": fields}


def tallied(b: Batcher) -> dict[str, Any]:
    """A Batcher's counts, for Tally.add."""
    return {k: getattr(b, k) for k in (*COUNTERS, *SUMS, "problem_refs")}


class Tally:
    """A source's counts summed over its pieces, in piece order (Batcher's names)."""

    def __init__(self) -> None:
        self.records = self.items = self.errors = self.skipped = 0
        self.reasons: dict[str, int] = {}
        self.field_problems: dict[str, int] = {}
        self.secrets: dict[str, int] = {}
        self.problem_refs: dict[str, list[str]] = {}
        self.warnings: list[str] = []
        self.objects = 0
        self.unseen: dict[str, str] | None = None  # mapped fields no piece has seen
        self.keys: dict[str, None] = {}

    def add(self, c: dict[str, Any]) -> None:
        d = c["done"]
        for k in COUNTERS:
            setattr(self, k, getattr(self, k) + d[k])
        for k in SUMS:
            total = getattr(self, k)
            for key, n in d[k].items():
                total[key] = total.get(key, 0) + n
        for key, refs in d["problem_refs"].items():
            self.problem_refs[key] = (self.problem_refs.get(key, []) + refs)[:PROBLEM_REFS]
        self.warnings += [w for w in c["warnings"] if w not in self.warnings]
        f = c["fields"]
        if f:
            self.objects += f["objects"]
            u = f["unseen"]
            old = u if self.unseen is None else self.unseen
            self.unseen = {k: v for k, v in old.items() if k in u}
            if len(self.keys) < 64:
                self.keys.update(dict.fromkeys(f["keys"][:64]))

    def unmapped(self) -> UnmappedField | None:
        """The mapped field that no record of any piece had (what Mapper.check_mapped says
        for a source read whole)."""
        if self.objects and self.unseen:
            item, src = next(iter(self.unseen.items()))
            return UnmappedField(item, src, list(self.keys))
        return None

"""Stage outputs as folders of Parquet parts: `kept.parquet/part-00000.parquet`, ...

A part holds `run.part_rows` rows (the last one fewer), so part boundaries and names follow
from the row count alone: the same rows give the same parts whichever executor wrote them,
and no file grows with the corpus. Readers (a later stage, Ray Data, polars) can split work
by file. The folder keeps the `.parquet` name the single file had (the Hive/Spark
convention): `pl.read_parquet`, `pl.scan_parquet`, `pq.read_table` and pandas read a whole
output by that path. A plain Parquet file still reads as a one-part output (runs written
before parts, or a table a user hands in).

The folder is written as a temp folder beside it and renamed into place when complete, so a
reader never sees a half-written output. On object storage (a run folder at a URL), which has
no rename, the parts are written in place and the stage's manifest is the commit
(pipeline/storage.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import storage
from pipeline.errors import DataError
from pipeline.storage import Location

PART_ROWS = 1 << 18  # rows per part: a few row groups of any stage's batch size
PART_GLOB = "part-*.parquet"
ROW = "_row"  # a numbered batch's last column: each row's position in the output (with_rows)


def part_name(k: int) -> str:
    return f"part-{k:05d}.parquet"


def part_files(path: Location) -> list[Location]:
    """The parts of an output in row order (a plain file is its own one part)."""
    if not path.is_dir():
        return [path]
    found: list[Location] = sorted(path.glob(PART_GLOB), key=str)  # zero-padded: row order
    if not found:
        raise DataError(f"{path}: a folder output with no Parquet parts ({PART_GLOB})")
    return found


def open_parquet(path: Location | str) -> pq.ParquetFile:
    """A part's reader, local or an object, without pre-buffering (see Parts)."""
    if not isinstance(path, str) and storage.is_remote(path):
        return pq.ParquetFile(storage.open_read(path), pre_buffer=False)
    return pq.ParquetFile(path, pre_buffer=False)


def read_schema(path: Location) -> pa.Schema:
    return open_parquet(part_files(path)[0]).schema_arrow


def num_rows(path: Location) -> int:
    return sum(open_parquet(f).metadata.num_rows for f in part_files(path))


def scan_output(path: Location) -> pl.LazyFrame:
    """An output (its parts, in row order) as a polars LazyFrame, local or on object storage."""
    files = part_files(path)
    opts = storage.polars_source(path)[1]
    return pl.scan_parquet([storage.polars_source(f)[0] for f in files], storage_options=opts)


def read_output(path: Location, columns: list[str] | None = None) -> pl.DataFrame:
    """An output's rows (only `columns`) as a polars DataFrame."""
    lf = scan_output(path)
    return (lf.select(columns) if columns is not None else lf).collect()


def read_table(path: Location, columns: list[str] | None = None) -> pa.Table:
    """An output's rows (only `columns`) as an Arrow table, its parts in order."""
    tables = [open_parquet(f).read(columns=columns) for f in part_files(path)]
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


@dataclass(frozen=True)
class Span:
    """Rows [skip, skip + rows) of the row groups `groups` ((file, row group), in order):
    consecutive batches of a Parts.iter_batches, read by one worker (read_span)."""

    groups: list[tuple[Location | str, int]]
    skip: int
    rows: int
    first: int  # the output's row the span starts at


def read_span(span: Span, size: int, columns: list[str] | None = None) -> Iterator[pa.RecordBatch]:
    """A span's rows (only `columns`) in batches of exactly `size` rows (the last one
    fewer), streamed: the rows before `skip` are decoded and dropped, and the last group
    is read only as far as the span goes."""
    opened: dict[str, pq.ParquetFile] = {}

    def rows() -> Iterator[pa.RecordBatch]:
        skip, left = span.skip, span.rows
        for path, rg in span.groups:
            f = opened.get(str(path)) or opened.setdefault(str(path), open_parquet(path))
            for b in f.iter_batches(batch_size=size, row_groups=[rg], columns=columns):
                if skip >= b.num_rows:
                    skip -= b.num_rows
                    continue
                b = b.slice(skip, left)
                skip, left = 0, left - b.num_rows
                yield b
                if not left:
                    return

    yield from exact_batches(rows(), size)


def with_rows(reader: Iterable[pa.RecordBatch], first: int) -> Iterator[pa.RecordBatch]:
    """Batches with a column ROW of their rows' positions, the first one's being `first`."""
    at = first
    for b in reader:
        yield b.append_column(ROW, pa.array(np.arange(at, at + b.num_rows, dtype=np.int64)))
        at += b.num_rows


def exact_batches(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """The rows of `batches` in batches of exactly `size` rows (the last one fewer)."""
    pending: list[pa.RecordBatch] = []
    held = 0
    for b in batches:
        if not pending and b.num_rows == size:
            yield b
            continue
        pending.append(b)
        held += b.num_rows
        while held >= size:
            whole = pa.Table.from_batches(pending).combine_chunks()
            yield whole.slice(0, size).to_batches()[0]
            rest = whole.slice(size)
            pending = rest.to_batches() if rest.num_rows else []
            held = rest.num_rows
    if held:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


class Parts:
    """An output's parts read as one table: rows numbered across the parts in order.

    Files are opened without pre-buffering: with it, a reader keeps every page it read for
    as long as it lives, and memory would grow with the corpus."""

    def __init__(self, path: Location):
        self.path = path
        # workers' cwd may differ: absolute paths (an object's URL travels with its options)
        self.paths: list[Location | str] = [
            f if storage.is_remote(f) else str(f.absolute()) for f in part_files(path)
        ]
        self.files = [open_parquet(f) for f in self.paths]
        self.schema_arrow: pa.Schema = self.files[0].schema_arrow
        # global row number where each row group starts, and its (file, group)
        starts, where, at = [], [], 0
        for i, f in enumerate(self.files):
            for g in range(f.metadata.num_row_groups):
                starts.append(at)
                where.append((i, g))
                at += f.metadata.row_group(g).num_rows
        self.num_rows = at
        self._starts = np.asarray(starts + [at], dtype=np.int64)
        self._where = where

    @property
    def num_row_groups(self) -> int:
        return len(self._where)

    def row_groups(self) -> list[tuple[Location | str, int, int]]:
        """(part file, row group, rows) of every row group, in row order."""
        sizes = np.diff(self._starts)
        return [(self.paths[i], g, int(n)) for (i, g), n in zip(self._where, sizes, strict=True)]

    def iter_batches(
        self, batch_size: int, columns: list[str] | None = None, exact: bool = True
    ) -> Iterator[pa.RecordBatch]:
        """Batches of exactly `batch_size` rows (the last one fewer) across part boundaries,
        so a step sees the same batches however the output was cut into parts. exact=False:
        at most `batch_size` rows, a part's last batch shorter (no copy to join parts: for
        readers that do not care where batches end, as a count or a digest)."""
        reader = (
            b for f in self.files for b in f.iter_batches(batch_size=batch_size, columns=columns)
        )
        if not exact:
            yield from reader
            return
        yield from exact_batches(reader, batch_size)

    def spans(self, size: int) -> list[Span]:
        """iter_batches(size)'s batches as spans of consecutive batches, for workers that
        read their own (read_span). A span holds at least a row group's worth of rows, so
        the rows decoded and dropped before its first batch (the part of a group the span
        before it read) are at most as many as its own."""
        n = self.num_rows
        biggest = int(np.diff(self._starts).max()) if len(self._where) else 0
        per = max(1, -(-biggest // size)) * size  # rows per span: whole batches
        out = []
        for s in range(0, n, per):
            e = min(s + per, n)
            g0 = int(np.searchsorted(self._starts, s, side="right")) - 1
            g1 = int(np.searchsorted(self._starts, e, side="left"))
            groups = [(self.paths[i], rg) for i, rg in self._where[g0:g1]]
            out.append(Span(groups, s - int(self._starts[g0]), e - s, s))
        return out

    def take(self, rows: np.ndarray | list[int], columns: list[str]) -> pa.Table:
        """`columns` of the given rows, in the order given, reading only their row groups."""
        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        srt = rows[order]
        if len(srt) and (srt[0] < 0 or srt[-1] >= self.num_rows):
            raise IndexError(f"{self.path}: row out of range 0..{self.num_rows - 1}")
        out = []
        group_of = np.searchsorted(self._starts, srt, side="right") - 1
        for g in np.unique(group_of):
            i, rg = self._where[g]
            sel = srt[group_of == g] - self._starts[g]
            out.append(self.files[i].read_row_group(rg, columns=columns).take(pa.array(sel)))
        t = pa.concat_tables(out) if out else self.schema_arrow.empty_table().select(columns)
        if len(rows) and not (order == np.arange(len(rows))).all():
            t = t.take(pa.array(np.argsort(order, kind="stable")))
        return t


class PartSink:
    """A writer of an output's parts: `write_table` cuts at every `part_rows` rows; `close`
    renames the finished folder into place (and `abort` drops it). On object storage the
    parts are written in place, the output's old objects deleted first (no rename there:
    the stage's manifest is the commit)."""

    def __init__(self, dest: Location, schema: pa.Schema, part_rows: int = PART_ROWS, **opts: Any):
        self.dest = dest
        self.tmp: Location = dest
        if storage.is_remote(dest):
            storage.delete(dest)
        else:
            self.tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
            remove(self.tmp)
            self.tmp.mkdir(parents=True)
        self.schema = schema
        self.part_rows = part_rows
        self.opts = opts
        self.k = 0
        self.in_part = 0
        self.writer: PartWriter | None = None
        self.sha256: dict[str, str] = {}  # part name -> its bytes' sha256, as written

    def _open(self) -> PartWriter:
        self.writer = PartWriter(self.tmp / part_name(self.k), self.schema, **self.opts)
        return self.writer

    def write_table(self, table: pa.Table, row_group_size: int | None = None) -> None:
        at = 0
        while at < table.num_rows:
            w = self.writer or self._open()
            piece = table.slice(at, self.part_rows - self.in_part)
            w.write_table(piece, row_group_size=row_group_size)
            at += piece.num_rows
            self.in_part += piece.num_rows
            if self.in_part == self.part_rows:
                self._close_part(w)
                self.writer, self.in_part, self.k = None, 0, self.k + 1

    def _close_part(self, w: PartWriter) -> None:
        w.close()
        self.sha256[part_name(self.k)] = w.sha256

    def write_batch(self, batch: pa.RecordBatch, row_group_size: int | None = None) -> None:
        self.write_table(pa.Table.from_batches([batch]), row_group_size)

    write = write_table

    def close(self) -> None:
        if self.writer is None and self.k == 0:
            self._open()  # no rows: one empty part, so the output still has its schema
        if self.writer is not None:
            self._close_part(self.writer)
        if not storage.is_remote(self.dest):
            replace_tree(self.tmp, self.dest)  # type: ignore[arg-type]

    def abort(self) -> None:
        """After a failure: what was written goes. Errors here are dropped, so that the
        failure that brought us here is the one reported."""
        try:
            if self.writer is not None:
                self.writer.abort()
            remove(self.tmp)
        except Exception:
            pass


class PartWriter(pq.ParquetWriter):
    """A ParquetWriter on a local file or an object (uploaded as it is closed). It hashes
    the bytes as it writes them: `sha256` once closed, so the output's record needs no
    second read of it (on object storage, a download)."""

    def __init__(self, path: Location | str, schema: pa.Schema, **opts: Any):
        self._path = Path(path) if isinstance(path, str) else path
        p = self._path
        f = storage.open_write(p) if storage.is_remote(p) else open(p, "wb")  # noqa: SIM115
        self._file: _Hashing | None = _Hashing(f)
        self.sha256 = ""
        try:
            super().__init__(self._file, schema, **opts)
        except BaseException:
            f.close()
            raise

    def close(self) -> None:
        f, self._file = self._file, None
        try:
            super().close()
        finally:
            if f is not None:
                f.close()
        if f is not None:
            self.sha256 = f.sha.hexdigest()

    def __exit__(self, exc_type: Any, *rest: Any) -> Literal[False]:
        if exc_type is None:
            self.close()
        else:
            self.abort()
        return False

    def abort(self) -> None:
        """After a failure: the file (or the object, once its upload ends) removed, so no
        half-written part is left to be read. Errors here are dropped: the failure that
        brought us here is the one reported."""
        try:
            self.close()
        except Exception:
            pass
        try:
            remove(self._path)
        except Exception:
            pass


class _Hashing:
    """A binary file that hashes what is written to it (all pyarrow asks of a file)."""

    def __init__(self, f: Any):
        self.f = f
        self.sha = hashlib.sha256()
        self.at = 0

    @property
    def closed(self) -> bool:
        return bool(self.f.closed)

    def write(self, b: Any) -> int:
        self.sha.update(b)
        self.at += len(b)
        self.f.write(b)
        return len(b)

    def tell(self) -> int:
        return self.at

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        self.f.flush()

    def close(self) -> None:
        self.f.close()


def as_table(b: Any) -> pa.Table:
    """A step's output as an Arrow Table (steps may return RecordBatches or polars frames)."""
    if isinstance(b, pa.RecordBatch):
        return pa.Table.from_batches([b])
    if isinstance(b, pa.Table):
        return b
    table: pa.Table = b.to_arrow()  # a polars DataFrame
    return table


def as_frame(b: Any) -> pl.DataFrame:
    """A batch, table or polars frame as a polars DataFrame (a step's polars view of it)."""
    if isinstance(b, pl.DataFrame):
        return b
    frame = pl.from_arrow(as_table(b))
    assert isinstance(frame, pl.DataFrame)
    return frame


class Writer:
    """Outputs (`schemas`: name -> schema) written through atomic sinks (`sink(name, schema)`,
    the runner's StageIO.sink) in row groups of exactly `size` rows (the last before a
    `restart` shorter), however the pieces came:
    the files are the same whichever executor made the pieces, and however it cut them.
    `size` None: each piece is written as it came (its own row groups, cut only at part
    boundaries), for steps whose pieces are the same whichever executor made them (a batch's
    rows)."""

    def __init__(
        self,
        sink: Callable[[str, pa.Schema], Any],
        schemas: dict[str, pa.Schema],
        size: int | None,
        stack: Any,
    ):
        self.size = size
        self.schemas = schemas
        self.sinks = {n: stack.enter_context(sink(n, s)) for n, s in self.schemas.items()}
        self.pending: dict[str, list[pa.Table]] = {n: [] for n in self.schemas}
        self.rows = dict.fromkeys(self.schemas, 0)

    def add(self, outs: dict[str, Any]) -> None:
        for name, b in outs.items():
            t = as_table(b).cast(self.schemas[name])  # the declared schema
            if self.size is None:
                self.sinks[name].write_table(t)
                continue
            self.pending[name].append(t)
            self.rows[name] += t.num_rows
            while self.rows[name] >= self.size:
                self._write(name, self.size)

    def _write(self, name: str, n: int) -> None:
        assert self.size is not None  # (pieces are only held to be cut at `size`)
        whole = pa.concat_tables(self.pending[name])
        # one chunk per row group: Parquet pages follow chunk boundaries, which vary with
        # how the pieces came
        group = whole.slice(0, n).combine_chunks()
        self.sinks[name].write_table(group, row_group_size=max(n, 1))
        rest = whole.slice(n)
        self.pending[name] = [rest] if rest.num_rows else []
        self.rows[name] = rest.num_rows

    def restart(self, name: str) -> None:
        """The row-group grid of output `name` starts again at the next row: what is
        pending is one (short) row group (shapes.parquet's row groups start at each scope)."""
        if self.size is not None and self.rows[name]:
            self._write(name, self.rows[name])

    def close(self) -> None:
        for name in self.schemas:
            if self.rows[name]:
                self._write(name, self.rows[name])


def remove(path: Location) -> None:
    """Remove whatever is at `path`: a folder's tree, or a file or symlink itself (never what
    a link points at). A temp path is cleared so before it is written: shutil.rmtree refuses
    a symlink, and a writer given the path would write through it. An object, or a prefix's
    objects, are deleted."""
    if storage.is_remote(path):
        storage.delete(path)
    elif path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def replace_tree(src: Path, dest: Path) -> None:
    """Move folder `src` to `dest`, over whatever file or folder was there."""
    if dest.exists() or dest.is_symlink():
        old = dest.with_name(f".{dest.name}.{os.getpid()}.old.tmp")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dest, old)
        os.replace(src, dest)
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        else:
            old.unlink()
    else:
        os.replace(src, dest)

"""Generic tables: JSON (lines, an array or pretty-printed objects: jsonio tells which), CSV or
Parquet, gzip-compressed or not, with a field mapping from the config (see mapping.py).
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from pipeline import storage
from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext, Items, Record, RecordError, SourceUnreadable
from pipeline.ingest.count import LineCuts, count_csv, count_json, count_parquet
from pipeline.ingest.csvio import iter_csv_records
from pipeline.ingest.jsonio import Block, Parsed, iter_json_records, iter_line_range
from pipeline.ingest.mapping import Mapper, mapped_columns
from pipeline.ingest.opening import (
    check_source_path,
    cr_line_ends,
    encoding_of,
    head_bytes,
    open_regular,
    open_source,
    parquet_file,
)
from pipeline.ingest.rowsize import oversized
from pipeline.storage import Location

EXPECTS = "any"  # a file, or a folder of Parquet parts (a stage output, a dataset's shards)

SNIFF_BYTES = 8192


def detect_format(path: Location, head: bytes) -> str:
    """By extension first (".jsonl.gz" counts as ".jsonl"), then by the first bytes."""
    name = path.name.lower().removesuffix(".gz")
    for ext, fmt in (
        (".jsonl", "jsonl"),
        (".ndjson", "jsonl"),
        (".json", "json"),
        (".csv", "csv"),
        (".tsv", "csv"),
        (".parquet", "parquet"),
    ):
        if name.endswith(ext):
            return fmt
    if head.startswith(b"PAR1"):
        return "parquet"
    stripped = head.lstrip()
    if stripped.startswith(b"["):
        return "json"
    if stripped.startswith(b"{"):
        return "jsonl"
    return "csv"


def folder_parts(path: Location, spec: SourceConfig) -> list[Location]:
    """The Parquet files of a folder source (a stage output, a dataset's shards), in name
    order: one table, rows numbered across them. SourceUnreadable when it holds none."""
    if spec.format not in ("auto", "parquet"):
        raise SourceUnreadable(f"{path}: is a folder; format {spec.format!r} reads one file")
    parts = sorted(
        p
        for p in path.glob("*.parquet")
        if not p.name.startswith((".", "_")) and (not storage.is_remote(p) or p.is_file())
    )  # (a store lists a prefix named x.parquet too; a local folder so named fails the read)
    if not parts:
        raise SourceUnreadable(
            f"{path}: is a folder with no Parquet files (*.parquet) in it; a table source "
            "reads one file or a folder of Parquet parts"
        )
    return parts


def file_format(spec: SourceConfig, path: Location) -> str:
    """The configured format, or the one the name and first bytes tell (detect_format)."""
    with open_regular(path) as f:
        raw_head = f.read(SNIFF_BYTES)
    head = raw_head if raw_head[:4] == b"PAR1" else head_bytes(path, SNIFF_BYTES)[0]
    return spec.format if spec.format != "auto" else detect_format(path, head)


def read(spec: SourceConfig, path: Location, ctx: IngestContext) -> Iterator[Record | RecordError]:
    check_source_path(path, "any")
    mapper = Mapper(spec)
    if ctx.shard is not None:  # one piece of the source (shards.py)
        yield from _read_shard(spec, mapper, path, ctx)
        ctx.fields_seen(mapper)  # checked by the stage over every piece
        return
    if path.is_dir():  # a folder of Parquet parts
        yield from _read_parquet(spec, mapper, folder_parts(path, spec), ctx, in_folder=True)
        ctx.fields_seen(mapper)
        mapper.check_mapped()
        return
    fmt = file_format(spec, path)
    if fmt != "parquet":
        _warn_binary(path, ctx)
    if fmt in ("jsonl", "json"):  # the same reader: it tells lines, an array, values apart
        yield from _read_json(spec, mapper, path, ctx)
    elif fmt == "csv":
        yield from _read_csv(spec, mapper, path, ctx)
    else:
        yield from _read_parquet(spec, mapper, [path], ctx)
    ctx.fields_seen(mapper)  # the keys records had, for the stage's messages
    mapper.check_mapped()


def _warn_binary(path: Location, ctx: IngestContext) -> None:
    """A warning for a text file that may not be one, or whose encoding was guessed."""
    enc = encoding_of(path)
    if enc.endswith("(no BOM)"):
        ctx.warn(
            f"{path.name}: no byte-order mark; read as {enc.split()[0]}, as the NUL bytes of "
            "its first KiB say"
        )
    elif b"\0" in head_bytes(path, SNIFF_BYTES)[0]:
        ctx.warn(f"{path.name}: NUL bytes in the first 8 KiB: is it a binary file?")


def _read_shard(spec: SourceConfig, mapper: Mapper, path: Location, ctx: IngestContext):
    shard = ctx.shard
    if shard.kind == "groups":  # only the files holding its row groups are opened
        parts = folder_parts(path, spec) if path.is_dir() else [path]
        if shard.start == 0:  # the first piece warns for every file, as a whole read does
            for p in parts:
                _warn_missing(spec, p, parquet_file(p).schema_arrow.names, ctx)
        lo, hi = shard.files
        yield from _read_parquet(spec, mapper, parts[lo:hi], ctx, in_folder=path.is_dir())
        return
    if shard.start == 0:
        _warn_binary(path, ctx)
    yield from _mapped(
        mapper, iter_line_range(path, shard.start, shard.end, shard.first, ctx, True)
    )


EMPTY = "empty_source: the file holds no records"


def _mapped(
    mapper: Mapper, records: Iterator[Block | Parsed]
) -> Iterator[Record | RecordError | Items]:
    """Each record mapped; a Block of objects whole where every one maps cleanly."""
    for got in records:
        if isinstance(got, Block):
            fields = mapper.columns(got.objs)
            refs = [f"line {got.first + k}" for k in range(len(got.objs))]
            if fields is not None:
                yield Items(refs, fields)
            else:
                yield from map(mapper, got.objs, refs)
            continue
        ref, obj, _ = got
        yield obj if isinstance(obj, RecordError) else mapper(obj, ref)


def _read_json(spec: SourceConfig, mapper: Mapper, path: Location, ctx: IngestContext):
    seen = False
    for rec in _mapped(mapper, iter_json_records(path, ctx, True)):
        seen = True
        yield rec
    if not seen:  # only blank lines, or an empty array: one skip, so the file is accounted for
        yield RecordError("file", "", EMPTY, "skip")


def csv_delimiter(spec: SourceConfig, path: Location) -> str:
    return "\t" if path.name.lower().removesuffix(".gz").endswith(".tsv") else spec.csv_delimiter


def _read_csv(spec: SourceConfig, mapper: Mapper, path: Location, ctx: IngestContext):
    csv.field_size_limit(max(csv.field_size_limit(), ctx.max_record_bytes + 2))
    header: list[str] | None = None
    row_no = 0
    with open_source(path, ctx.advance, ctx.set_total) as f:
        cr = cr_line_ends(path)
        for rec in iter_csv_records(f, ctx.max_record_bytes, csv_delimiter(spec, path), cr):
            if rec.header:
                header = rec.row
                _check_header(spec, path, header, ctx)  # type: ignore[arg-type]
                continue
            row_no += 1
            ref = f"row {row_no} (line {rec.line})"
            if rec.row is None:
                yield RecordError(ref, rec.raw, rec.error or "malformed CSV")
                continue
            yield _csv_row(mapper, ref, rec.row, rec.raw, header)
    if header is None and row_no == 0:
        yield RecordError("file", "", EMPTY, "skip")


def _warn_repeated(path: Location, names: list[str], ctx: IngestContext) -> None:
    """A row is read as {name: value}, so of columns sharing a name only the last is read."""
    repeated = sorted(c for c, n in Counter(names).items() if n > 1)
    if repeated:
        ctx.warn(
            f"{path.name}: the header repeats column(s) {repeated[:12]}; only the last "
            "column of each name is read"
        )


def _check_header(spec: SourceConfig, path: Location, header: list[str], ctx: IngestContext):
    _warn_repeated(path, header, ctx)
    fields = mapped_columns(spec).items()
    missing = sorted({col for name, col in fields if name in spec.fields and col not in header})
    if missing:
        # Every row will then lack the field; each row still gets its own error record.
        ctx.warn(
            f"{path.name}: mapping names column(s) {missing} absent from the header {header[:12]}"
        )


def _csv_row(mapper: Mapper, ref: str, row: list[str], raw: bytes, header: list[str] | None):
    joined = "\x1f".join(row)
    if "\0" in joined:
        col = next(i for i, v in enumerate(row) if "\0" in v) + 1
        return RecordError(ref, raw, f"NUL byte in field {col}: binary data, not text")
    if _has_surrogates(joined):
        col = next(i for i, v in enumerate(row) if _has_surrogates(v)) + 1
        return RecordError(ref, raw, f"invalid UTF-8: undecodable bytes in field {col}")
    if header is None or len(row) != len(header):
        n = 0 if header is None else len(header)
        return RecordError(ref, raw, f"wrong column count: {len(row)} fields, header has {n}")
    return mapper(dict(zip(header, row, strict=True)), ref)


def _read_parquet(
    spec: SourceConfig, mapper: Mapper, paths: list[Location], ctx: IngestContext, in_folder=False
):
    """Rows by row group, file after file, numbered across them; a row group that cannot be
    decoded is an error per row it holds (the footer says how many), and the next group reads
    normally. A file that cannot be opened is one error record ("file", or "file NAME" in a
    folder). A row over ctx.max_record_bytes is an error sized from the batch's offsets
    (sized_rows), as a JSON line over it is."""
    files = []
    for path in paths:
        try:
            files.append((path, parquet_file(path)))
        except (pa.ArrowException, OSError) as e:
            with open_regular(path) as f:
                ref = f"file {path.name}" if in_folder else "file"
                yield RecordError(ref, f.read(256), f"unreadable Parquet: {e}")
    span = ctx.shard  # a piece: row groups [start, end) counted across the files
    if span is None:
        ctx.set_total(sum(pf.metadata.num_rows for _, pf in files))
    row = 0 if span is None else span.first - 1
    k = 0 if span is None else span.k0  # row groups before this file's
    for path, pf in files:
        groups = range(pf.metadata.num_row_groups)
        if span is not None:
            groups = range(max(0, span.start - k), max(0, min(len(groups), span.end - k)))
        else:
            _warn_missing(spec, path, pf.schema_arrow.names, ctx)
        k += pf.metadata.num_row_groups
        for g in groups:
            end = row + pf.metadata.row_group(g).num_rows
            try:
                for batch in pf.iter_batches(batch_size=ctx.batch_size, row_groups=[g]):
                    for obj in sized_rows(batch, ctx.max_record_bytes):
                        row += 1
                        ref = f"row {row}"
                        yield (
                            RecordError(ref, *obj) if isinstance(obj, tuple) else mapper(obj, ref)
                        )
                    ctx.advance(batch.num_rows)
            except (pa.ArrowException, OSError) as e:
                reason = f"unreadable Parquet: row group {g}: {str(e)[:200]}"
                for r in range(row + 1, end + 1):
                    yield RecordError(f"row {r}", "", reason)
                ctx.advance(end - row)
            row = end


def _warn_missing(spec: SourceConfig, path: Location, names: list[str], ctx: IngestContext) -> None:
    _warn_repeated(path, names, ctx)
    missing = sorted({c for n, c in mapped_columns(spec).items() if n in spec.fields} - set(names))
    if missing:
        ctx.warn(f"{path.name}: mapping names column(s) {missing} absent from the file")


def sized_rows(batch: pa.RecordBatch, limit: int) -> list[dict | tuple[str, str]]:
    """The batch's rows as dicts, except that a row over `limit` bytes (rowsize.oversized) is
    (raw, reason), as is a row holding a value Python cannot hold (_rows): the over-large
    rows are left out before anything is converted, so their values never become Python
    objects."""
    big = oversized(batch, limit)
    if not big:
        return [_as_error(r) for r in _rows(batch)]
    keep = np.ones(batch.num_rows, bool)
    keep[list(big)] = False
    rest = iter(_rows(batch.filter(pa.array(keep))))
    return [(big[k][1], big[k][0]) if k in big else _as_error(next(rest)) for k in range(len(keep))]


def _as_error(row: dict | str) -> dict | tuple[str, str]:
    return ("", row) if isinstance(row, str) else row


def _rows(batch: pa.RecordBatch) -> list[dict | str]:
    """The batch's rows as dicts; a row with a value Python cannot hold (a timestamp past
    year 9999 ...) is the reason instead, and costs that row only."""
    try:
        return batch.to_pylist()
    except (OverflowError, ValueError, pa.ArrowException):
        pass
    out: list[dict | str] = []
    for k in range(batch.num_rows):
        try:
            out.append(batch.slice(k, 1).to_pylist()[0])
        except (OverflowError, ValueError, pa.ArrowException) as e:
            out.append(f"unreadable value: {str(e)[:200]}")
    return out


def _has_surrogates(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def pieces(spec: SourceConfig, path: Location) -> tuple[str, list[Location]] | None:
    """How shards.py may cut the table for workers: its Parquet files by row groups
    ("groups"), a JSON-lines file at line starts ("lines"), or None (one reader)."""
    if path.is_dir():
        return "groups", folder_parts(path, spec)
    fmt = file_format(spec, path)
    if fmt == "parquet":
        return "groups", [path]
    if fmt in ("jsonl", "json"):
        return "lines", [path]
    return None


def count(
    spec: SourceConfig, path: Location, limit: int, cuts: LineCuts | None = None
) -> tuple[int, str]:
    """The table's records by their own count (count.py), for verify; `cuts`: a JSON-lines
    file's pieces, counted apart."""
    if path.is_dir():  # a folder of Parquet parts
        return sum(count_parquet(p) for p in folder_parts(path, spec)), "Parquet rows (footers)"
    with open_regular(path) as f:
        raw_head = f.read(SNIFF_BYTES)
    head = raw_head if raw_head[:4] == b"PAR1" else head_bytes(path, SNIFF_BYTES)[0]
    fmt = spec.format if spec.format != "auto" else detect_format(path, head)
    if fmt == "parquet":
        return count_parquet(path), "Parquet rows (footer)"
    if fmt == "csv":
        return count_csv(path, limit, csv_delimiter(spec, path)), "CSV records (quote-state count)"
    n, unit = count_json(path, limit, cuts)
    return (n or 1), unit

"""Generic tables: JSON (lines, an array or pretty-printed objects: jsonio tells which), CSV or
Parquet, gzip-compressed or not, with a field mapping from the config (see mapping.py).
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext, Record, RecordError, SourceUnreadable
from pipeline.ingest.jsonio import CountingReader, iter_json_records, open_maybe_gzip
from pipeline.ingest.mapping import Mapper, mapped_columns

SNIFF_BYTES = 8192


def detect_format(path: Path, head: bytes) -> str:
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


def read(spec: SourceConfig, path: Path, ctx: IngestContext) -> Iterator[Record | RecordError]:
    if not path.exists():
        raise SourceUnreadable(f"{path}: no such file")
    if path.is_dir():
        raise SourceUnreadable(f"{path}: is a folder; a table source reads one file")
    mapper = Mapper(spec)
    with open(path, "rb") as f:
        raw_head = f.read(SNIFF_BYTES)
    if raw_head[:4] == b"PAR1":
        head = raw_head
    else:
        with open_maybe_gzip(path) as f:
            try:
                head = f.read(SNIFF_BYTES)
            except (OSError, EOFError) as e:
                yield RecordError("file", raw_head, f"unreadable: corrupt gzip ({e})")
                return
    fmt = spec.format if spec.format != "auto" else detect_format(path, head)
    if not head.strip():
        yield RecordError("file", "", "empty_source: the file holds no records", "skip")
        return
    if fmt != "parquet" and b"\0" in head:
        yield RecordError("file", head[:256], "binary file: NUL bytes in the first 8 KiB, not text")
        return
    if fmt in ("jsonl", "json"):  # the same reader: it tells lines, an array, values apart
        yield from _read_json(spec, mapper, path, ctx)
    elif fmt == "csv":
        yield from _read_csv(spec, mapper, path, ctx)
    else:
        yield from _read_parquet(spec, mapper, path, ctx)


def _read_json(spec: SourceConfig, mapper: Mapper, path: Path, ctx: IngestContext):
    for ref, obj, _ in iter_json_records(path, ctx):
        yield obj if isinstance(obj, RecordError) else mapper(obj, ref)


def _read_csv(spec: SourceConfig, mapper: Mapper, path: Path, ctx: IngestContext):
    csv.field_size_limit(ctx.max_record_bytes)
    ctx.set_total(path.stat().st_size)
    with open(path, "rb") as raw:
        counted = io.BufferedReader(CountingReader(raw, ctx.advance))
        binary = gzip.GzipFile(fileobj=counted) if _is_gzip(path) else counted
        # surrogateescape: a bad byte must not abort the file; the row is reported instead.
        text = io.TextIOWrapper(binary, encoding="utf-8", errors="surrogateescape", newline="")
        delim = "\t" if path.name.lower().removesuffix(".gz").endswith(".tsv") else None
        reader = csv.reader(text, delimiter=delim or spec.csv_delimiter)
        try:
            header = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            yield RecordError("line 1", "", f"malformed CSV header: {e}")
            return
        missing = sorted(
            {
                col
                for name, col in mapped_columns(spec).items()
                if name in spec.fields and col not in header
            }
        )
        if missing:
            # Every row will then lack the field; each row still gets its own error record.
            ctx.warn(
                f"{path.name}: mapping names column(s) {missing} absent from the header "
                f"{header[:12]}"
            )
        row_no, start = 0, reader.line_num + 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as e:
                row_no += 1
                yield RecordError(f"row {row_no} (line {start})", "", f"malformed CSV: {e}")
                start = reader.line_num + 1
                continue
            row_no += 1
            ref = f"row {row_no} (line {start})"
            start = reader.line_num + 1
            if not row or row == [""]:
                row_no -= 1  # a blank line is not a record
                continue
            joined = "\x1f".join(row)
            if _has_surrogates(joined):
                raw = joined.encode("utf-8", "surrogateescape")
                yield RecordError(ref, raw, "invalid UTF-8: undecodable bytes in the row")
                continue
            if len(row) != len(header):
                yield RecordError(
                    ref,
                    ",".join(row),
                    f"wrong column count: {len(row)} fields, header has {len(header)}",
                )
                continue
            yield mapper(dict(zip(header, row, strict=True)), ref)


def _read_parquet(spec: SourceConfig, mapper: Mapper, path: Path, ctx: IngestContext):
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowInvalid, OSError) as e:
        with open(path, "rb") as f:
            yield RecordError("file", f.read(256), f"unreadable Parquet: {e}")
        return
    ctx.set_total(pf.metadata.num_rows)
    names = set(pf.schema_arrow.names)
    missing = sorted({c for n, c in mapped_columns(spec).items() if n in spec.fields} - names)
    if missing:
        ctx.warn(f"{path.name}: mapping names column(s) {missing} absent from the file")
    row = 0
    for batch in pf.iter_batches(batch_size=ctx.batch_size):
        for obj in batch.to_pylist():
            row += 1
            yield mapper(obj, f"row {row}")
        ctx.advance(batch.num_rows)


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def _has_surrogates(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False

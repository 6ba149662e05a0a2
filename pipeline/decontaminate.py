"""The decontaminate stage: dedup/kept.parquet -> kept / removed, away from benchmark items.

`[decontaminate] against` lists benchmark test sets: files in any table format ingest reads,
in the item's field names. They are read by ingest's own table reader and batcher (so their
secrets are masked as the corpus's were), shingled, MinHashed and banded into an in-memory
index exactly as dedup indexes a run (pipeline/dedup/index.py: the same functions), and every
item is matched against it batch by batch: an item whose exact shingle Jaccard to a benchmark
item (over `fields`, by default before and after) reaches `threshold` goes to removed.parquet
with the closest benchmark item's source (the `against` entry), ref (its line or row), id
and J, kind `same_content` (the same text in every field) or `near`. Everything else is kept,
in input order. With no `against` the stage is a pass-through: every item is kept.
"""

from __future__ import annotations

from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa
from rich.markup import escape

from pipeline.config import Config, DedupConfig, SourceConfig, canonical_text, updated
from pipeline.console import console
from pipeline.dedup import index as ix
from pipeline.errors import EnvError
from pipeline.executors import batches, writer
from pipeline.executors.contract import merge
from pipeline.ingest.base import Batcher, IngestContext, SourceUnreadable
from pipeline.ingest.opening import check_source_path
from pipeline.ingest.sources import table
from pipeline.parts import num_rows, read_schema
from pipeline.runs import StageFailed, input_fingerprint

if TYPE_CHECKING:
    from pipeline.runner import StageIO

REMOVED_EXTRA = [
    ("benchmark_source", pa.string()),  # the decontaminate.against entry
    ("benchmark_ref", pa.string()),  # its line or row
    ("benchmark_id", pa.string()),
    ("j", pa.float64()),  # exact shingle Jaccard to that benchmark item
    ("kind", pa.string()),  # same_content | near
]
# The [dedup] keys that shape the match: shingles, signatures, bands, big buckets.
FROM_DEDUP = ("shingle", "ngram", "num_perm", "seed", "bands", "rows", "bucket_cap", "max_bucket")


class BenchmarkUnreadable(EnvError):
    """A benchmark file that cannot be read at all (exit 3)."""


def settings(cfg: Config) -> DedupConfig:
    """How items are matched: [dedup]'s shingling with this section's fields and threshold,
    and no change check (a benchmark's code seen in training leaks whatever edit it makes)."""
    c = cfg.decontaminate
    return updated(
        cfg.dedup,
        "decontaminate",
        threshold=c.threshold,
        fields=list(c.fields),
        against=[],
        change_threshold=0.0,
    )


def key(cfg: Config) -> tuple[str, dict[str, str]]:
    """[dedup]'s shingling is part of this stage's key; the benchmark files are its inputs."""
    inputs = {}
    for entry in cfg.decontaminate.against:
        inputs[f"benchmark:{entry}"] = input_fingerprint(_checked(cfg, entry))
    shingling = {k: getattr(cfg.dedup, k) for k in FROM_DEDUP}
    return canonical_text(shingling), inputs


def _checked(cfg: Config, entry: str) -> Path:
    p = cfg.resolve(entry)
    try:
        check_source_path(p, "any")  # a file, or a folder of Parquet parts
    except SourceUnreadable as e:
        raise BenchmarkUnreadable(f"decontaminate.against: {entry}: {e}") from None
    return p


def read_benchmark(cfg: Config, entry: str) -> tuple[pa.Table, dict[str, Any]]:
    """The items of one benchmark file, read as an ingest table source named `entry`."""
    spec = SourceConfig(kind="table", path=entry, name=entry)
    warnings: list[str] = []
    ctx = IngestContext(max_record_bytes=cfg.ingest.max_record_bytes, warn=warnings.append)
    batcher = Batcher(entry, ctx)
    try:
        for rec in table.read(spec, _checked(cfg, entry), ctx):
            batcher.add(rec)
    except SourceUnreadable as e:
        raise BenchmarkUnreadable(f"decontaminate.against: {entry}: {e}") from None
    items = batcher.take_items()
    got: dict[str, Any] = {"records": batcher.records, "items": batcher.items}
    got |= {"errors": batcher.errors, "reasons": dict(sorted(batcher.reasons.items()))}
    if items is None:
        top = ", ".join(f"{k} {v}" for k, v in Counter(batcher.reasons).most_common(3))
        raise StageFailed(
            f"decontaminate.against: {entry}: no benchmark item in {batcher.records} records"
            + (f" ({top})" if top else "")
            + "; it must be a table in the item's field names (before, after, ...)"
        )
    for w in warnings:
        console.print(f"[yellow]warning[/] benchmark {escape(entry)}: {escape(w)}")
    return pa.Table.from_batches([items]), got


def benchmark_index(cfg: Config, d: DedupConfig) -> tuple[ix.Index, dict[str, Any]]:
    """Every benchmark's items as one in-memory index (dedup's index code)."""
    tables, per = [], {}
    for entry in cfg.decontaminate.against:
        t, per[entry] = read_benchmark(cfg, entry)
        text = pl.from_arrow(t.select(list(d.fields)))
        assert isinstance(text, pl.DataFrame)
        offsets, _, sig = ix.shingle_and_sign(text, np.arange(t.num_rows), d)
        tables.append(ix.index_table(t, sig, np.diff(offsets).astype(np.int32), d))
    return ix.Index.of(list(tables), d), per


def step(cfg: Config, io: StageIO) -> tuple[dict[str, Any], dict[str, Any]]:
    d = settings(cfg)
    src = io.input(io.source)
    schema = read_schema(src)
    removed_schema = schema
    for name, typ in REMOVED_EXTRA:
        removed_schema = removed_schema.append(pa.field(name, typ))
    index, per = benchmark_index(cfg, d) if cfg.decontaminate.against else (None, {})
    n = num_rows(src)
    counts: dict[str, Any] = {"items_in": n, "kept": 0, "removed": 0}
    schemas = {"kept.parquet": schema, "removed.parquet": removed_schema}
    with ExitStack() as stack:
        # the matching runs on the configured executor (run.executor), batch by batch; on
        # Ray the workers write the rows too
        out = writer(cfg.run, io.sink, schemas, None, stack)
        bar = stack.enter_context(io.progress())
        task = bar.add_task("decontaminate", total=n)
        ctx = (index, d, schema, removed_schema)
        for outs, c, rows in batches(cfg, src, _match_batch, ctx, d.batch_size, held=schemas):
            out.add(outs)
            merge(counts, c)
            bar.advance(task, rows)
        out.close()
    hits = counts.pop("hits", {})
    for entry, got in per.items():
        got["removed"] = hits.get(entry, 0)
    counts["benchmark_items"] = len(index) if index is not None else 0
    extra = {"threshold": d.threshold, "fields": list(d.fields), "benchmarks": per}
    return counts, extra


def _match_batch(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One batch -> kept (and removed) rows and counts; pure, so any executor may run it."""
    index, d, schema, removed_schema = ctx
    t = pa.Table.from_batches([batch], schema=schema)
    if index is None:
        return {"kept.parquet": t}, {"kept": t.num_rows}
    kept, removed, got = _one_batch(t, index, d)
    c: dict[str, Any] = {**got, "hits": dict(Counter(removed["benchmark_source"].to_pylist()))}
    return {"kept.parquet": kept, "removed.parquet": removed.cast(removed_schema)}, c


def _one_batch(
    t: pa.Table, index: ix.Index, d: DedupConfig
) -> tuple[pa.Table, pa.Table, dict[str, int]]:
    """(kept, removed with REMOVED_EXTRA, counts) of one batch of items."""
    text = pl.from_arrow(t.select(list(d.fields)))
    assert isinstance(text, pl.DataFrame)
    offsets, values, sig = ix.shingle_and_sign(text, np.arange(t.num_rows), d)
    eligible = np.flatnonzero(np.diff(offsets) > 0)
    m = ix.match(index, sig, offsets, values, eligible, d)
    row, j = ix.best(m, t.num_rows)
    hit = np.flatnonzero(row >= 0)
    same = ix.same_text(index, row[hit], text[hit])
    u, inv = np.unique(row[hit], return_inverse=True)
    bench = index.take(u, ix.ITEM_COLUMNS).take(pa.array(inv))
    removed = t.take(pa.array(hit))
    for (name, typ), col in zip(
        REMOVED_EXTRA,
        (
            bench["source"],
            bench["source_ref"],
            bench["id"],
            pa.array(j[hit], pa.float64()),
            pa.array(np.where(same, "same_content", "near").tolist(), pa.string()),
        ),
        strict=True,
    ):
        removed = removed.append_column(pa.field(name, typ), col)
    keep = np.ones(t.num_rows, dtype=bool)
    keep[hit] = False
    c = {"kept": int(keep.sum()), "removed": len(hit), "removed_same_content": int(same.sum())}
    c["removed_near"] = int(len(hit) - same.sum())
    c |= {k: v for k, v in m.counts.items()}
    return t.filter(pa.array(keep)), removed, c


def print_summary(m: dict[str, Any] | None) -> None:
    if not m:
        return
    c = m["counts"]
    if not m.get("benchmarks"):
        console.print(f"decontaminate: no benchmark (decontaminate.against): {c['kept']} kept")
        return
    for entry, b in m["benchmarks"].items():
        console.print(
            f"decontaminate: benchmark {escape(entry)}: {b['items']} items "
            f"({b['errors']} records unreadable); {b['removed']} corpus items removed"
        )
    console.print(
        f"decontaminate: {c['items_in']} items -> {c['kept']} kept, {c['removed']} removed "
        f"({c.get('removed_same_content', 0)} same content, {c.get('removed_near', 0)} near) "
        f"at J >= {m.get('threshold')} to one of {c['benchmark_items']} benchmark items"
    )

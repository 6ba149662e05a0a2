"""The ingest stage: every configured source -> items.parquet + errors.parquet.

Sources are read in config order and streamed in batches, so memory stays bounded whatever the
input size. Every input record ends in exactly one of the two outputs; the manifest records,
per source, how many records were read, so `editcurate verify` can re-check that later.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import polars as pl
from rich.table import Table

from pipeline.config import Config, SourceConfig
from pipeline.console import console, progress
from pipeline.ingest.base import Batcher, IngestContext, SourceUnreadable
from pipeline.runs import (
    StageFailed,
    StageRun,
    code_version,
    input_fingerprint,
    parquet_sink,
    stage_fingerprint,
)
from pipeline.schema import ERROR_SCHEMA, ITEM_SCHEMA

STAGE = "ingest"
READERS = {
    "table": "pipeline.ingest.table",
    "github": "pipeline.ingest.github",
    "codereviewer": "pipeline.ingest.codereviewer",
    "git": "pipeline.ingest.git",
    "hf": "pipeline.ingest.hf",
}


class IngestFailed(StageFailed):
    """A source could not be read at all; the message is one line naming it."""


def source_path(cfg: Config, spec: SourceConfig) -> Path:
    return cfg.resolve(spec.path)


def prepare(cfg: Config) -> StageRun:
    inputs: dict[str, str] = {}
    for spec in cfg.ingest.sources:
        p = source_path(cfg, spec)
        if not p.exists():
            raise IngestFailed(f"source {spec.display_name()!r}: {p}: no such file or folder")
        rev = spec.rev if spec.kind == "git" else None
        inputs[spec.display_name()] = input_fingerprint(p, rev)
    return StageRun(
        run_dir=cfg.run_dir,
        stage=STAGE,
        fingerprint=stage_fingerprint(STAGE, cfg.fingerprint("ingest"), code_version("ingest")),
        config_fingerprint=cfg.fingerprint(),
        inputs=inputs,
    )


def run(cfg: Config, stage: StageRun) -> dict[str, Any]:
    if not cfg.ingest.sources:
        raise IngestFailed("no sources configured: add [[ingest.sources]] to the config")
    stage.begin()
    per_source: dict[str, dict[str, Any]] = {}
    items_path, errors_path = stage.dir / "items.parquet", stage.dir / "errors.parquet"
    with (
        parquet_sink(items_path, ITEM_SCHEMA, stage.meta) as items_w,
        parquet_sink(errors_path, ERROR_SCHEMA, stage.meta) as errors_w,
        progress() as bar,
    ):
        for spec in cfg.ingest.sources:
            name = spec.display_name()
            task = bar.add_task(f"ingest {name}", total=None)
            warnings: list[str] = []
            ctx = IngestContext(
                max_record_bytes=cfg.ingest.max_record_bytes,
                batch_size=cfg.ingest.batch_size,
                bot_patterns=tuple(cfg.ingest.bot_patterns),
                advance=lambda n, t=task: bar.advance(t, n),
                set_total=lambda n, t=task: bar.update(t, total=n),
                warn=warnings.append,
            )
            batcher = Batcher(name, ctx)
            reader = importlib.import_module(READERS[spec.kind]).read
            try:
                for rec in reader(spec, source_path(cfg, spec), ctx):
                    batcher.add(rec)
                    if batcher.pending >= cfg.ingest.batch_size:
                        _flush(batcher, items_w, errors_w)
            except SourceUnreadable as e:
                raise IngestFailed(f"source {name!r} ({spec.kind}): {e}") from None
            except ValueError as e:  # a bad option (unknown transform ...), before any record
                raise IngestFailed(f"source {name!r} ({spec.kind}): {e}") from None
            _flush(batcher, items_w, errors_w)
            bar.update(task, completed=bar.tasks[task].total or 0)
            for w in warnings:
                console.print(f"[yellow]warning[/] source {name!r}: {w}")
            per_source[name] = {
                "kind": spec.kind,
                "records": batcher.records,
                "items": batcher.items,
                "errors": batcher.errors,
                "skipped": batcher.skipped,
                "reasons": dict(sorted(batcher.reasons.items())),
                "warnings": warnings,
            }
    stage.record_output("items.parquet", "items")
    stage.record_output("errors.parquet", "terminal")
    counts = _counts(items_path, per_source)
    stage.finish(counts, {"conservation": {"kind": "records", "sources": per_source}})
    return counts


def _flush(batcher: Batcher, items_w, errors_w) -> None:
    b = batcher.take_items()
    if b is not None:
        items_w.write_batch(b)
    e = batcher.take_errors()
    if e is not None:
        errors_w.write_batch(e)


def _counts(items_path: Path, per_source: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ids = (
        pl.scan_parquet(items_path)
        .select(pl.len().alias("rows"), pl.col("id").n_unique().alias("unique"))
        .collect()
    )
    rows, unique = ids["rows"][0], ids["unique"][0]
    return {
        "records_in": sum(s["records"] for s in per_source.values()),
        "items_out": rows,
        "errors_out": sum(s["errors"] for s in per_source.values()),
        "skipped_out": sum(s["skipped"] for s in per_source.values()),
        "unique_ids": unique,
        "exact_duplicates": rows - unique,
    }


def print_summary(m: dict[str, Any] | None) -> None:
    """A table per source (records, items, errors, skipped, top reasons) and the totals."""
    if not m:
        return
    t = Table(title="ingest", title_justify="left")
    for c in ("source", "kind", "records", "items", "errors", "skipped", "reasons"):
        numeric = c in ("records", "items", "errors", "skipped")
        t.add_column(c, justify="right" if numeric else "left")
    for name, s in m["conservation"]["sources"].items():
        top = ", ".join(f"{k} {v}" for k, v in sorted(s["reasons"].items(), key=lambda kv: -kv[1]))
        t.add_row(
            name,
            s["kind"],
            str(s["records"]),
            str(s["items"]),
            str(s["errors"]),
            str(s["skipped"]),
            top[:120],
        )
    console.print(t)
    c = m["counts"]
    console.print(
        f"ingest: {c['records_in']} records -> {c['items_out']} items "
        f"({c['exact_duplicates']} exact-duplicate rows kept for dedup), "
        f"{c['errors_out']} errors, {c['skipped_out']} skipped"
    )

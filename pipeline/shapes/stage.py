"""The shapes stage: decontaminate/kept.parquet -> shapes.parquet, kept / removed, by edit shape.

Two items have the same edit shape when the lines their before -> after diff removes and adds
are equal after normalisation (normalise.py). Such items (version bumps, pinned SHA bumps, one
change made across many files) share almost no shingles, so dedup never sees them; batched
together they can still blow up a training step, and split apart they leak. Groups
(group.py) are written for every scope to shapes.parquet; `policy` acts on `scope`.

Memory: the input is read a batch at a time, twice: first only the columns the shapes are
computed from, each batch turned into compact rows (columns.key_frame: no item text is kept;
on Ray the rows stay with the workers), then whole, streamed into kept and removed on the
configured executor (on Ray the workers read and write those rows, given what was decided
per row). Between the two, each scope's groups are made a range of keys at a time
(group.scope_range through executors.by_range: on Ray a shuffle of tasks that write
shapes.parquet, the driver gathering only figures and fixed-width per-row outcomes,
group.Gathered). Spread's kept is put in batch_order a range of positions at a time
(pipeline/reorder.py), on the executor too.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa
from rich.markup import escape
from rich.table import Table

from pipeline.config import SHAPE_SCOPES, Config, ShapesConfig
from pipeline.console import console
from pipeline.dedup.clusters import RANK_COLUMNS, TIE_BREAK
from pipeline.executors import batches, by_range, range_count, reordered, writer
from pipeline.executors.side import Side
from pipeline.jit import warm_items
from pipeline.parts import ROW, Parts
from pipeline.shapes import group
from pipeline.shapes.columns import key_frame
from pipeline.shapes.group import (
    NOTES,
    SCOPES,
    SHAPES,
    Gathered,
    ShapesResult,
    group_count,
    notes_schema,
    scope_columns,
    scope_range,
)

if TYPE_CHECKING:
    from pipeline.runner import StageIO

SHAPES_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("scope", pa.string()),  # change | repo | corpus | edit
        ("shape_key", pa.string()),  # sha256 of the group's key: scope, where, shape ...
        ("shape_text", pa.string()),  # "-removed" / "+added" normalised lines
        ("digit_only", pa.bool_()),
        ("group_id", pa.int64()),  # per scope, numbered in shape_key order
        ("group_size", pa.int64()),
    ]
)
REMOVED_EXTRA = [
    ("reason", pa.string()),
    ("scope", pa.string()),
    ("group_id", pa.int64()),
    ("keeper_id", pa.string()),
]
SHAPES_OUT = {SHAPES: SHAPES_SCHEMA}
KEYS = "keys"  # the key frames (columns.key_frame), the stage's own: never written
BATCH = 20_000  # input rows per step: the per-item work holds two batches' text at a time
SPREAD_BUCKET = 100_000  # spread: kept rows sorted in memory at a time


# ------------------------------------------------------------------------ stage I/O


def key(cfg: Config) -> tuple[str, dict[str, str]]:
    """cap ranks items as dedup ranks its keepers: dedup.keeper is part of this stage's key."""
    return ",".join(cfg.dedup.keeper), {}


def input_columns(s: ShapesConfig, keeper: list[str], have: list[str]) -> list[str]:
    """The input columns the shapes are computed from: text and counts, where, and what the
    policy ranks or hashes by; the others are streamed from the input into the outputs."""
    want = ["id", "repo", "change", "path", "before", "after", "lines_removed", "lines_added"]
    if s.context_key:
        want.append("context")
    if s.policy == "spread":
        want += ["source", "source_ref"]
    if s.policy == "cap":
        for k in [*keeper, *TIE_BREAK]:
            want += RANK_COLUMNS.get(k.lstrip("-"), [k.lstrip("-")])
    return [c for c in have if c in want]


def _fetch(src: Parts, rows: list[int]) -> pl.DataFrame:
    """path, repo and comment of a few rows, reading only their row groups."""
    return pl.from_arrow(src.take(rows, ["path", "repo", "comment"]))  # type: ignore[return-value]


def _key_batch(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """key_frame of one numbered input batch (its rows numbered as in the input)."""
    s, rank = ctx
    t = pa.Table.from_batches([batch])
    at = int(t[ROW][0].as_py()) if t.num_rows else 0
    return {KEYS: key_frame(pl.DataFrame(pl.from_arrow(t.drop_columns([ROW]))), s, rank, at)}, {}


def _key_pieces(
    cfg: Config, src: Parts, cols: list[str], rank: list[str] | None, bar: Any
) -> tuple[list[Any], list[str]]:
    """key_frame of every input batch, on the configured executor (run.executor), and the
    key frames' columns: on Ray the frames stay with the workers; locally two batches at a
    time on threads (the kernels and polars release the GIL, so one batch's line diffs
    overlap the other's hashing)."""
    task = bar.add_task("shapes: line diffs", total=src.num_rows)
    empty = src.schema_arrow.empty_table().select(cols)
    none = key_frame(pl.DataFrame(pl.from_arrow(empty)), cfg.shapes, rank)
    held = {KEYS: none.to_arrow().schema}
    out: list[Any] = []
    ctx = (cfg.shapes, rank)
    for outs, _, rows in batches(
        cfg, src.path, _key_batch, ctx, BATCH, cols, threads=2, held=held, numbered=True
    ):
        out += [outs[KEYS]] if KEYS in outs else []
        bar.advance(task, rows)
    return out or [none], none.columns


def _grouped(
    cfg: Config, src: Parts, pieces: list[Any], have: list[str], io: StageIO, bar: Any
) -> tuple[ShapesResult, list[Any]]:
    """Every scope's groups, a key range at a time (executors.by_range: on Ray the ranges
    are tasks and the driver gets only their results), shapes.parquet written from the
    ranges as they come (on Ray by the workers): what analyse does, past one process. A
    range's rows (locally a whole scope's) are let go before the next range is made. With
    annotate, also each range's NOTES (the rows' group columns; on Ray left there)."""
    s, keeper = cfg.shapes, list(cfg.dedup.keeper)
    gathered = Gathered(src.num_rows, s, keeper)
    count = range_count(cfg, src.num_rows)
    task = bar.add_task("shapes: groups", total=len(SHAPE_SCOPES))
    notes: list[Any] = []  # annotate's group columns per row, by range (on Ray held there)
    with ExitStack() as stack:
        out = writer(cfg.run, io.sink, SHAPES_OUT, group.CHUNK, stack)
        for scope in SCOPES:
            key, offsets = f"_k_{scope}", [0]
            if count > 1:  # each range's groups are numbered after the ranges' before it
                words = [key, f"_l_{scope}"]
                found = by_range(cfg, pieces, key, words, count, group_count, scope, {})
                offsets = np.cumsum([0, *[k for k, _ in found]])[:-1].tolist()
            cols = scope_columns(scope, s, keeper, have)
            ctx = gathered.ctx(scope, offsets)
            schemas = SHAPES_OUT | ({NOTES: _notes_held(scope)} if s.policy == "annotate" else {})
            for res, outs in by_range(cfg, pieces, key, cols, count, scope_range, ctx, schemas):
                gathered.add(scope, res)
                _write_rows(out, outs.pop(SHAPES, None))  # and let go of them
                notes += [outs[NOTES]] if NOTES in outs else []
            out.restart(SHAPES)  # each scope's rows start a row group
            bar.advance(task)
        out.close()
    return gathered.result(lambda rows: _fetch(src, rows)), notes


def _notes_held(scope: str) -> pa.Schema:
    """scope_range's NOTES rows: the row number, then the scope's group columns."""
    return pa.schema([pa.field("_row", pa.int64()), *notes_schema(scope)])


def _write_rows(out: Any, rows: Any) -> None:
    """A range's shapes rows to the writer, a row group at a time where they are a frame
    here (locally: a whole scope, turned into Arrow a group at a time, not at once); held
    rows as they are."""
    if not isinstance(rows, pl.DataFrame):
        out.add({SHAPES: rows} if rows is not None else {})
        return
    for at in range(0, rows.height, group.CHUNK):
        out.add({SHAPES: rows.slice(at, group.CHUNK)})


def warm(cfg: Config) -> None:
    """Compiles the stage's kernels: one batch of jit.warm_items, as step keys its batches."""
    keeper = list(cfg.dedup.keeper)
    items = warm_items()
    cols = input_columns(cfg.shapes, keeper, items.column_names)
    numbered = items.select(cols).append_column(ROW, pa.array(range(items.num_rows), pa.int64()))
    rank = keeper if cfg.shapes.policy == "cap" else None
    _key_batch(numbered.combine_chunks().to_batches()[0], (cfg.shapes, rank))


def step(cfg: Config, io: StageIO) -> tuple[dict[str, Any], dict[str, Any]]:
    s = cfg.shapes
    keeper = list(cfg.dedup.keeper)
    src = io.parts(io.source)
    cols = input_columns(s, keeper, src.schema_arrow.names)
    rank = keeper if s.policy == "cap" else None
    with io.progress() as bar:
        pieces, have = _key_pieces(cfg, src, cols, rank, bar)
        res, notes = _grouped(cfg, src, pieces, have, io, bar)
    del pieces
    write_outputs(src, res, s, io, notes)
    del notes
    extra = {
        "policy": s.policy,
        "scope": s.scope,
        "shapes_config": s.model_dump(),  # window, seed, caps: for report and why
        "groups_by_size": res.by_size,
        "largest": res.largest,
    }
    return res.counts, extra


def write_outputs(
    src: Parts, res: ShapesResult, s: ShapesConfig, io: StageIO, notes: list[Any]
) -> None:
    """kept (input order, or batch_order for spread) and removed (input order); the input
    is streamed a batch at a time, on the configured executor (on Ray, read and written by
    the workers). Annotate's group columns (`notes`: scope_range's NOTES) are joined to the
    batches by row number (executors.side: on Ray by the tasks, the driver holds none)."""
    n = src.num_rows
    gone = np.zeros(n, dtype=bool)
    gone[res.removed["_row"].to_numpy()] = True
    # Arrow and numpy, not polars: on Ray each task maps them from the object store (a polars
    # frame is copied into every task)
    removed = res.removed.sort("_row").to_arrow().combine_chunks()
    rem_schema = src.schema_arrow
    side = Side(notes, notes_schema()) if s.policy == "annotate" else None
    kept_schema = pa.unify_schemas([src.schema_arrow, side.schema]) if side else src.schema_arrow
    for name, typ in REMOVED_EXTRA:
        rem_schema = rem_schema.append(pa.field(name, typ))
    spread = s.policy == "spread"
    schemas = {"removed.parquet": rem_schema}
    if not spread:  # spread writes kept in its own order (_write_spread)
        schemas["kept.parquet"] = kept_schema
    ctx = (gone, removed, src.schema_arrow.names, schemas)
    with ExitStack() as stack:
        out = writer(io.cfg.run, io.sink, schemas, None, stack)
        for outs, _, _ in batches(
            io.cfg, src.path, _kept_and_removed, ctx, BATCH, held=schemas, numbered=True, side=side
        ):
            out.add(outs)
        out.close()
    del side, removed, gone, ctx
    if spread:
        assert res.batch_order is not None, "Gathered sets batch_order under policy 'spread'"
        _write_spread(src, res.batch_order, io)


def _kept_and_removed(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One numbered input batch (with annotate's group columns joined, after ROW) -> its
    kept rows (with them) and its removed rows with why (REMOVED_EXTRA), by what was
    decided per row (_grouped)."""
    gone, removed, items, schemas = ctx
    t = pa.Table.from_batches([batch])
    at = int(t[ROW][0].as_py()) if t.num_rows else 0
    t = t.drop_columns([ROW])
    here = gone[at : at + t.num_rows]
    outs = {}
    if "kept.parquet" in schemas:
        k = t
        if here.any():
            k = k.take(pa.array(np.flatnonzero(~here), pa.int64()))
        outs["kept.parquet"] = k.cast(schemas["kept.parquet"])
    out = t.select(items).take(pa.array(np.flatnonzero(here), pa.int64()))
    done = int(np.searchsorted(removed["_row"].to_numpy(), at))
    extra = removed.slice(done, out.num_rows)
    out = out.append_column("reason", pa.array(["edit_shape"] * out.num_rows, pa.string()))
    for name, typ in REMOVED_EXTRA[1:]:
        out = out.append_column(name, extra[name].cast(typ))
    outs["removed.parquet"] = out.cast(schemas["removed.parquet"])
    return outs, {}


def _write_spread(src: Parts, order: np.ndarray, io: StageIO) -> None:
    """kept in batch_order: the rows put in that order a range of SPREAD_BUCKET positions at
    a time (pipeline/reorder.py; on Ray by a shuffle of tasks, the workers writing them)."""
    # described for the dataset card in schema.COLUMN_DOCS
    schemas = {"kept.parquet": src.schema_arrow.append(pa.field("batch_order", pa.int64()))}
    with io.scratch("spread") as work, ExitStack() as stack:
        out = writer(io.cfg.run, io.sink, schemas, None, stack)
        for outs in reordered(
            io.cfg, src.path, order, SPREAD_BUCKET, _in_batch_order, None, work, schemas
        ):
            out.add(outs)
        out.close()


def _in_batch_order(t: pa.Table, k: int, ctx: Any) -> dict[str, pa.Table]:
    """A range of batch positions in order: its rows, their position as batch_order."""
    return {"kept.parquet": t.rename_columns([*t.column_names[:-1], "batch_order"])}


def print_summary(m: dict[str, Any] | None) -> None:
    """Groups by size per scope, the digit-only share, and the ten largest groups."""
    if not m:
        return
    c = m["counts"]
    t = Table(title="shapes: groups by size", title_justify="left")
    t.add_column("size")
    for scope in SHAPE_SCOPES:
        t.add_column(scope, justify="right")
    labels = ("1", "2", "3-4", "5-9", "10-49", "50+")
    for label in labels:
        t.add_row(
            label, *(str(m["groups_by_size"].get(sc, {}).get(label, 0)) for sc in SHAPE_SCOPES)
        )
    console.print(t)
    big = Table(title=f"ten largest groups (scope {m['scope']})", title_justify="left")
    for col in ("group", "size", "digit-only", "file", "shape", "example comment"):
        big.add_column(col, justify="right" if col in ("group", "size") else "left")
    for g in m["largest"]:
        big.add_row(
            str(g["group_id"]),
            str(g["size"]),
            "yes" if g["digit_only"] else "no",
            escape(f"{g['repo']}:{g['path']}"),
            escape(g["shape_text"].replace("\n", " | ")[:70]) or "(no changed lines)",
            escape(g["comment"].replace("\n", " ")[:40]),
        )
    console.print(big)
    console.print(
        f"shapes ({m['policy']}, scope {m['scope']}): {c['items_in']} items, "
        f"{c['digit_only']} digit-only ({100 * c['digit_only_share']:.1f}%); grouped items "
        + ", ".join(
            f"{sc} {c.get(f'grouped_items_{sc}', 0)} in {c.get(f'groups_{sc}', 0)}"
            for sc in SHAPE_SCOPES
        )
        + f"; {c['kept']} kept, {c['removed']} removed"
        + (f", {c['spread_conflicts']} spread conflicts" if m["policy"] == "spread" else "")
    )

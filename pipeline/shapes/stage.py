"""The shapes stage: decontaminate/kept.parquet -> shapes.parquet, kept / removed, by edit shape.

Two items have the same edit shape when the lines their before -> after diff removes and adds
are equal after normalisation (normalise.py). Such items (version bumps, pinned SHA bumps, one
change made across many files) share almost no shingles, so dedup never sees them; batched
together they can still blow up a training step, and split apart they leak. Groups
(group.py) are written for every scope to shapes.parquet; `policy` acts on `scope`.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from rich.markup import escape
from rich.table import Table

from pipeline.config import Config, ShapesConfig
from pipeline.console import console
from pipeline.shapes.group import SCOPES, ShapesResult, find_shapes

if TYPE_CHECKING:
    from pipeline.runner import StageIO

INPUT = "decontaminate/kept.parquet"
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


# ------------------------------------------------------------------------ stage I/O


def key(cfg: Config) -> tuple[str, dict[str, str]]:
    """cap ranks items as dedup ranks its keepers: dedup.keeper is part of this stage's key."""
    return ",".join(cfg.dedup.keeper), {}


def _arrow(df: pl.DataFrame) -> pa.Table:
    return df.to_arrow(compat_level=pl.CompatLevel.oldest())


# What shapes are computed from (text and counts, and the ranks cap and spread order by);
# the other columns are streamed from the input into the outputs.
NEEDED = (
    "id",
    "source",
    "source_ref",
    "repo",
    "change",
    "path",
    "before",
    "after",
    "context",
    "comment",
    "lines_removed",
    "lines_added",
    "created_at",
    "author_is_bot",
)
BATCH = 50_000


def step(cfg: Config, io: StageIO) -> tuple[dict[str, Any], dict[str, Any]]:
    s = cfg.shapes
    src = pq.ParquetFile(io.input(INPUT))
    cols = [c for c in NEEDED if c in src.schema_arrow.names]
    with io.progress() as bar:
        task = bar.add_task("shapes: line diffs", total=1)
        frame = pl.read_parquet(io.input(INPUT), columns=cols)
        res = find_shapes(frame, s, list(cfg.dedup.keeper))
        del frame
        bar.advance(task, 1)
    write_outputs(src, res, s, io)
    extra = {
        "policy": s.policy,
        "scope": s.scope,
        "shapes_config": s.model_dump(),  # window, seed, caps: for report and why
        "groups_by_size": res.by_size,
        "largest": res.largest,
    }
    return res.counts, extra


def write_outputs(src: pq.ParquetFile, res: ShapesResult, s: ShapesConfig, io: StageIO) -> None:
    """kept (input order, or batch_order for spread), removed (input order), shapes; the input
    is streamed a batch at a time (spread, which reorders every row, reads it whole)."""
    n = src.metadata.num_rows
    gone = np.zeros(n, dtype=bool)
    gone[res.removed["_row"].to_numpy()] = True
    removed = res.removed.sort("_row")
    kept_schema = rem_schema = src.schema_arrow
    if s.policy == "annotate":
        for c in res.annotations.columns[1:]:
            kept_schema = kept_schema.append(pa.field(c, res.annotations[c].to_arrow().type))
    for name, typ in REMOVED_EXTRA:
        rem_schema = rem_schema.append(pa.field(name, typ))
    spread = s.policy == "spread"
    with ExitStack() as stack:
        kept = None if spread else stack.enter_context(io.sink("kept.parquet", kept_schema))
        rem = stack.enter_context(io.sink("removed.parquet", rem_schema))
        at = done = 0
        for batch in src.iter_batches(batch_size=BATCH):
            t = pa.Table.from_batches([batch])
            here = gone[at : at + t.num_rows]
            if kept is not None:
                if s.policy == "annotate":
                    part = res.annotations.slice(at, t.num_rows)
                    for c in part.columns[1:]:
                        t = t.append_column(c, part[c].to_arrow())
                keep = np.flatnonzero(~here)
                kept.write_table(t.take(pa.array(keep, pa.int64())).cast(kept_schema))
            out = pa.Table.from_batches([batch]).take(pa.array(np.flatnonzero(here), pa.int64()))
            extra = removed.slice(done, out.num_rows)
            out = out.append_column("reason", pa.array(["edit_shape"] * out.num_rows, pa.string()))
            for name, typ in REMOVED_EXTRA[1:]:
                out = out.append_column(name, extra[name].to_arrow().cast(typ))
            rem.write_table(out.cast(rem_schema))
            at, done = at + batch.num_rows, done + out.num_rows
    if spread:
        order = res.batch_order
        assert order is not None, "find_shapes sets batch_order under policy 'spread'"
        whole = src.read().append_column("batch_order", pa.array(order, pa.int64()))
        io.write("kept.parquet", whole.take(pa.array(np.argsort(order, kind="stable"))))
    io.write("shapes.parquet", _arrow(res.shapes.drop("_row")).cast(SHAPES_SCHEMA))


def print_summary(m: dict[str, Any] | None) -> None:
    """Groups by size per scope, the digit-only share, and the ten largest groups."""
    if not m:
        return
    c = m["counts"]
    t = Table(title="shapes: groups by size", title_justify="left")
    t.add_column("size")
    for scope in SCOPES:
        t.add_column(scope, justify="right")
    labels = ("1", "2", "3-4", "5-9", "10-49", "50+")
    for label in labels:
        t.add_row(label, *(str(m["groups_by_size"].get(sc, {}).get(label, 0)) for sc in SCOPES))
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
            f"{sc} {c.get(f'grouped_items_{sc}', 0)} in {c.get(f'groups_{sc}', 0)}" for sc in SCOPES
        )
        + f"; {c['kept']} kept, {c['removed']} removed"
        + (f", {c['spread_conflicts']} spread conflicts" if m["policy"] == "spread" else "")
    )

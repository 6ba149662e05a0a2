"""The export stage: shapes/kept.parquet -> train / validation / test Parquet, hf/ (a
`datasets.DatasetDict`) and README.md (the dataset card). Groups and splits: split.py."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, cast

import polars as pl
import pyarrow as pa
from rich.table import Table
from rich.text import Text

from pipeline.config import Config
from pipeline.console import console
from pipeline.executors import batches, writer
from pipeline.executors.contract import merge
from pipeline.export.card import card, save_hf
from pipeline.export.split import (
    assign_splits,
    component_col,
    leakage,
    manifest_groupings,
    sharing_by_source,
    sharing_change,
    split_rule,
)
from pipeline.parts import ROW, read_output, read_schema, scan_output
from pipeline.stage import SPLITS
from pipeline.template import render
from pipeline.verify import SHARING

if TYPE_CHECKING:
    from pipeline.runner import StageIO


def _split_batch(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One numbered batch of shapes' kept rows -> its rows per split (pure: any executor
    runs it), each row's split and group read at its row number in the context's arrays.
    (A join with every item's split, as before, hashed them all for every batch: the stage
    was quadratic, a second a batch at 10M items; and on Ray every task copied them.)"""
    split_code, group, schema, fmt = ctx
    t = pa.Table.from_batches([batch])
    at = int(t[ROW][0].as_py()) if t.num_rows else 0
    code = split_code[at : at + t.num_rows]
    rows = cast(pl.DataFrame, pl.from_arrow(t.drop_columns([ROW])))
    rows = rows.with_columns(export_group=pl.Series(group[at : at + t.num_rows], dtype=pl.Int64))
    outs, counts = {}, {}
    for k, name in enumerate(SPLITS):
        part = rows.filter(pl.Series(code == k)).to_arrow()
        outs[f"{name}.parquet"] = (_with_sft(part) if fmt == "sft" else part).cast(schema)
        counts[name] = part.num_rows
    return outs, counts


def _with_sft(t: pa.Table) -> pa.Table:
    cols = [t[c].to_pylist() for c in ("path", "comment", "context", "before", "after")]
    pc = [render(*row) for row in zip(*cols, strict=True)]
    t = t.append_column("prompt", pa.array([p for p, _ in pc], pa.string()))
    return t.append_column("completion", pa.array([c for _, c in pc], pa.string()))


KEYS = ["id", "source", "repo", "change", "created_at"]  # all the splits are decided from
BATCH = 50_000  # rows streamed into the split files at a time


def step(cfg: Config, io: StageIO) -> tuple[dict[str, Any], dict[str, Any]]:
    """Splits are assigned from ids and group keys only; the rows are then streamed from
    shapes' kept items into the split files a batch at a time, and the HF dataset is built
    from those files: memory stays bounded by the batch, whatever the corpus size."""
    e = cfg.export
    kept, shape_rows, cluster_rows = io.stage.reads  # as PIPELINE declares them
    src = io.input(kept)
    items = read_output(src, KEYS)
    # of dedup's clusters only the ids and their component: its other columns (keeper ids,
    # exact twins' ids) are text as large as the ids
    cpath = io.input(cluster_rows)
    component = component_col(read_schema(cpath).names)
    clusters = read_output(cpath, ["id", component])
    # only shape groups of two or more bind items (shapes.parquet has a row per item and scope)
    shapes = (
        scan_output(io.input(shape_rows))
        .filter(pl.col("group_size") > 1)
        .select("id", "scope", "group_id")
        .collect()
    )
    assigned = assign_splits(items, clusters, shapes, e)
    cross = leakage(assigned, items, clusters, shapes, e)
    # split names as codes; the group frames are done with (10M rows each at scale)
    split_of = assigned.select("id", pl.col("split").cast(pl.Enum(list(SPLITS))), "export_group")
    n_groups = assigned["export_group"].n_unique()
    del assigned, clusters, shapes
    # each kept row's split (its code: index in SPLITS) and group, in row order: numpy, which
    # Ray's workers map, each batch reading its rows' slice
    by_row = items.select("id").join(split_of, on="id", how="left", maintain_order="left")
    assert by_row["split"].null_count() == 0, "export: every kept item's split is dealt"
    split_code = by_row["split"].to_physical().to_numpy()
    group = by_row["export_group"].to_numpy()
    del by_row
    # the exported columns: each described in schema.COLUMN_DOCS (the card's Fields table)
    schema = read_schema(src).append(pa.field("export_group", pa.int64()))
    if e.format == "sft":
        schema = schema.append(pa.field("prompt", pa.string()))
        schema = schema.append(pa.field("completion", pa.string()))
    counts: dict[str, Any] = dict.fromkeys(SPLITS, 0)
    schemas = {f"{name}.parquet": schema for name in SPLITS}
    with ExitStack() as stack:
        # rows are split on the configured executor (run.executor), batch by batch; on Ray
        # the workers write them too
        out = writer(cfg.run, io.sink, schemas, None, stack)
        ctx = (split_code, group, schema, e.format)
        for outs, c, _ in batches(cfg, src, _split_batch, ctx, BATCH, held=schemas, numbered=True):
            out.add(outs)
            merge(counts, c)
        out.close()
    per_item = items.select("id", "source").join(split_of, on="id", how="left")
    counts["items_in"] = items.height
    counts["groups"] = n_groups
    for name in SPLITS:
        counts[f"groups_{name}"] = per_item.filter(pl.col("split") == name)[
            "export_group"
        ].n_unique()
    counts["cross_split_groups"] = sum(cross.values())
    sharing = sharing_by_source(items, split_of)
    counts[SHARING] = int(sharing["sharing_change"].sum())
    by_source = (
        per_item.group_by("source", "split").len().sort("source", "split").to_dicts()
        if items.height
        else []
    )
    extra = {
        "leakage": {
            "splits": {s: f"{s}.parquet" for s in SPLITS},
            "groupings": manifest_groupings(e, component),
        },
        "split_by": e.split_by,
        "split_rule": split_rule(e),
        "seed": e.seed,
        "sharing_change": {"by_source": sharing.to_dicts()},
        "ratios": list(e.ratios),
        "cross_split": cross,
        "by_source": by_source,
        "format": e.format,
    }
    files = {s: io.dir / f"{s}.parquet" for s in SPLITS}  # folders of parts
    io.write_tree("hf", lambda dest: save_hf(files, dest))
    io.write_text("README.md", card(counts, extra, cfg, io.run, schema))
    return counts, extra


def print_summary(m: dict[str, Any] | None) -> None:
    """The split table, the rule, and the cross-split count."""
    if not m:
        return
    c = m["counts"]
    n = max(c["items_in"], 1)
    t = Table(title="export: splits", title_justify="left")
    for col in ("split", "items", "share", "target", "groups"):
        t.add_column(col, justify="left" if col == "split" else "right")
    for s, r in zip(SPLITS, m["ratios"], strict=True):
        t.add_row(s, str(c[s]), f"{100 * c[s] / n:.2f}%", f"{100 * r:.2f}%", str(c[f"groups_{s}"]))
    console.print(t)
    console.print(Text(f"export rule: {m['split_rule']}"))
    dev = max(abs(100 * c[s] / n - 100 * r) for s, r in zip(SPLITS, m["ratios"], strict=True))
    ratio = m.get("split_by") == "ratio" and c["items_in"] > 0
    off = f"; max deviation from ratios {dev:.2f} pp" if ratio else ""
    console.print(
        f"export: {c['items_in']} items in {c['groups']} groups -> "
        + ", ".join(f"{s} {c[s]} ({100 * c[s] / n:.2f}%)" for s in SPLITS)
        + f"{off}; cross-split groups {c['cross_split_groups']} "
        + "("
        + ", ".join(f"{k} {v}" for k, v in m["cross_split"].items())
        + ")"
    )
    sh = sharing_change(c, m)
    if sh.get("warning"):
        console.print(Text("export: warning: " + sh["warning"], style="yellow"))
    elif sh["recorded"]:
        console.print(Text(f"export: held-out items sharing a change with train: {sh['note']}"))

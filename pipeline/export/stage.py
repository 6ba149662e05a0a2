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
from pipeline.executors import batches, range_count, writer
from pipeline.executors.contract import merge
from pipeline.executors.side import Side
from pipeline.export import assign as A
from pipeline.export.card import card, save_hf
from pipeline.export.split import component_col, manifest_groupings, sharing_change, split_rule
from pipeline.parts import num_rows, read_schema
from pipeline.stage import SPLITS
from pipeline.storage import Location
from pipeline.template import render
from pipeline.verify import SHARING

if TYPE_CHECKING:
    from pipeline.runner import StageIO


def _split_batch(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One batch of shapes' kept rows, each with its node (joined by row number: batches'
    side) -> its rows per split (pure: any executor runs it), each row's split and group
    read at its node in the context's arrays (a join with every item's split hashed them
    all for every batch: quadratic), and its rows per source and split (the manifest's
    by_source)."""
    split_code, group, schema, fmt = ctx
    t = pa.Table.from_batches([batch])
    node = t["node"].to_numpy()
    code = split_code[node]
    rows = cast(pl.DataFrame, pl.from_arrow(t.drop_columns(["node"])))
    rows = rows.with_columns(export_group=pl.Series(group[node], dtype=pl.Int64))
    outs: dict[str, Any] = {}
    counts: dict[str, Any] = {}
    by_source: dict[str, dict[str, int]] = {}
    for k, name in enumerate(SPLITS):
        part = rows.filter(pl.Series(code == k))
        outs[f"{name}.parquet"] = (
            _with_sft(part.to_arrow()) if fmt == "sft" else part.to_arrow()
        ).cast(schema)
        counts[name] = part.height
        for source, n in part.group_by("source").len().iter_rows():
            by_source.setdefault(source, {})[name] = n
    return outs, counts | {BY_SOURCE: by_source}


def _with_sft(t: pa.Table) -> pa.Table:
    cols = [t[c].to_pylist() for c in ("path", "comment", "context", "before", "after")]
    pc = [render(*row) for row in zip(*cols, strict=True)]
    t = t.append_column("prompt", pa.array([p for p, _ in pc], pa.string()))
    return t.append_column("completion", pa.array([c for _, c in pc], pa.string()))


KEYS = ["id", "source", "repo", "change", "created_at"]  # all the splits are decided from
BY_SOURCE = "by_source"  # a batch's rows per source and split, among its counts
BATCH = 50_000  # rows streamed into the split files at a time


def _members(
    cfg: Config,
    kept: Location,
    shape_rows: Location,
    cluster_rows: Location,
    component: str,
    count: int,
) -> list[Any]:
    """Pass 1 of assign.py: the members of the kept rows, dedup's components and the shape
    groups, in `count` id ranges (their boundaries sampled from the kept ids), a batch at a
    time on the configured executor (on Ray they stay with the workers)."""
    e = cfg.export
    bounds = None
    if count > 1:
        every = max(1, num_rows(kept) // (count * A.SAMPLE_PER_RANGE))
        got = batches(cfg, kept, A.sample_batch, every, BATCH, ["id"])
        bounds = A.id_bounds([outs["ids"] for outs, _, _ in got], count)
    o = (bounds, count)
    held = {A.MEMBERS: A.SCHEMAS[A.MEMBERS]}
    passes = [
        (kept, A.kept_batch, KEYS, (e, o), True),
        # of dedup's clusters only the ids and their component: its other columns (keeper
        # ids, exact twins' ids) are text as large as the ids
        (cluster_rows, A.clusters_batch, ["id", component], (component, o), False),
        (shape_rows, A.shapes_batch, ["id", "scope", "group_id", "group_size"], (e, o), False),
    ]
    pieces: list[Any] = []
    for path, fn, cols, ctx, numbered in passes:
        for outs, _, _ in batches(cfg, path, fn, ctx, BATCH, cols, held=held, numbered=numbered):
            pieces += [outs[A.MEMBERS]] if A.MEMBERS in outs else []
    return pieces


def step(cfg: Config, io: StageIO) -> tuple[dict[str, Any], dict[str, Any]]:
    """Splits are assigned from ids and group keys only, a key range at a time (assign.py:
    the driver holds a few numbers per item); the rows are then streamed from shapes' kept
    items into the split files a batch at a time, and the HF dataset is built from those
    files: memory stays bounded by the batch, whatever the corpus size."""
    e = cfg.export
    src, shape_rows, cluster_rows = (io.input(r) for r in io.stage.reads)  # as PIPELINE declares
    component = component_col(read_schema(cluster_rows).names)
    rows = num_rows(src)
    count = range_count(cfg, rows)
    a = A.assign(cfg, _members(cfg, src, shape_rows, cluster_rows, component, count), count)
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
        ctx = (a.split, a.group, schema, e.format)  # per node; each row's node joined to it
        side = Side(a.nodes, A.ROW_NODE)
        for outs, c, _ in batches(cfg, src, _split_batch, ctx, BATCH, held=schemas, side=side):
            out.add(outs)
            merge(counts, c)
        del side
        out.close()
    per_source = counts.pop(BY_SOURCE, {})
    counts["items_in"] = rows
    counts["groups"] = sum(a.groups)
    for name, n in zip(SPLITS, a.groups, strict=True):
        counts[f"groups_{name}"] = n
    counts["cross_split_groups"] = sum(a.cross.values())
    counts[SHARING] = sum(a.sharing.values())
    sources = sorted(per_source)
    by_source = [
        {"source": s, "split": name, "len": per_source[s][name]}
        for s in sources
        for name in SPLITS
        if name in per_source[s]
    ]
    held_out = {s: sum(per_source[s].get(name, 0) for name in SPLITS[1:]) for s in sources}
    sharing = [
        {"source": s, "held_out": held_out[s], "sharing_change": a.sharing.get(s, 0)}
        for s in sources
        if held_out[s]
    ]
    extra = {
        "leakage": {
            "splits": {s: f"{s}.parquet" for s in SPLITS},
            "groupings": manifest_groupings(e, component),
        },
        "split_by": e.split_by,
        "split_rule": split_rule(e),
        "seed": e.seed,
        "sharing_change": {"by_source": sharing},
        "ratios": list(e.ratios),
        "cross_split": a.cross,
        "by_source": by_source,
        "format": e.format,
    }
    files = {s: io.dir / f"{s}.parquet" for s in SPLITS}  # folders of parts
    io.write_tree("hf", lambda dest: save_hf(files, dest), anywhere=True)  # on Ray a worker
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

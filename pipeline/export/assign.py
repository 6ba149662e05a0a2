"""Export's groups and splits as partitioned work: split.py's rule, computed a key range at a
time (executors.by_range), so that on Ray the driver holds a few fixed-width arrays per item,
never the items' ids, repositories, changes or sources.

The nodes are the kept items' distinct ids, numbered in id order (so a group's label, the
smallest node of its component, is the index of its smallest id, as split.py defines
export_group). Passes:

1. members: every relation that binds items as rows (kind, key, id): a kept row (ITEM), its
   change (CHANGE, always: the held-out sharing count needs it), its repository under
   split_by = "repo", its dedup component, its shape groups at `export.scope` and its
   normalised edit (shapes' `edit` scope, groups of two or more). Keys are 128 bits: text keys
   (NFC) their sha256, integer keys themselves.
2. numbered, by ranges of id order (`_o`: boundaries sampled from the ids, so the ranges come
   in id order whatever the ids look like): each range numbers its distinct ids after the
   ranges before it (a counting pass first gives the offsets) and gives the driver each
   node's seeded order (sha256 of seed and id) and whether any of its rows is late (split_by
   = "time"); its other members, joined to their nodes, and its kept rows' nodes (NODES,
   which the split files' batches are joined to by row number) stay with the workers.
3. edges, by ranges of the key's hash (`_h`): a key held by two or more nodes joins each to
   its smallest; those keys' members stay with the workers for pass 5.
4. components of the edges (clusters.components here; large-star / small-star rounds on Ray,
   dedup/ray_graph.py), then the deal over the groups (split.deal_order) in the driver.
5. checked, by the same key ranges: per grouping, the keys whose nodes are in two or more
   splits (the export manifest's cross_split), and per source the held-out rows that share a
   change with train (verify.held_out_sharing_change's definition).

Locally every pass is one range (in this process). `assign_splits` runs the same passes on
frames in memory (tests, the Python API).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config import Config, ExportConfig
from pipeline.dedup import clusters as C
from pipeline.executors.side import arrays
from pipeline.export.split import EDIT_SCOPE, component_col, cutoff, deal_order
from pipeline.keys import arrow_schema, key_hash, text_key, unsigned
from pipeline.leakage import spanning
from pipeline.parts import ROW, as_frame
from pipeline.schema import CHANGE_COLUMNS, known
from pipeline.shapes.sha import sha256_128
from pipeline.stage import SPLITS

# what binds items (`kind`), in the export manifest's order of groupings
ITEM, COMPONENT, SHAPE, EDIT, REPO, CHANGE = range(6)
MEMBERS = "members"  # pass 1's rows, cut by id range
KEYED = "keyed"  # pass 2's: members with their node, cut by key range
EDGES = "edges"  # pass 3's
BOUND = "bound"  # pass 3's: members of keys held by two or more nodes
NODES = "nodes"  # pass 2's: each kept row's node (ROW, node), joined back to the rows
SAMPLE_PER_RANGE = 64  # ids sampled per id range, for its boundaries

_U64 = pl.UInt64
_MEMBER_SCHEMA: dict[str, Any] = {
    "_o": _U64,
    "id": pl.String,
    "kind": pl.Int8,
    "k1": _U64,
    "k2": _U64,
    "row": pl.Int64,
    "late": pl.Boolean,
    "source": pl.String,
}
_KEYED_SCHEMA: dict[str, Any] = {
    "_h": _U64,
    "kind": pl.Int8,
    "k1": _U64,
    "k2": _U64,
    "node": pl.Int64,
}
_KEYED_SCHEMA |= {"source": pl.String}
_EDGE_SCHEMA = {"a": pl.Int64, "b": pl.Int64}
_NODE_SCHEMA = {ROW: pl.Int64, "node": pl.Int64}


def _empty(schema: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


SCHEMAS = {
    MEMBERS: arrow_schema(_MEMBER_SCHEMA),
    KEYED: arrow_schema(_KEYED_SCHEMA),
    EDGES: arrow_schema(_EDGE_SCHEMA),
    BOUND: arrow_schema(_KEYED_SCHEMA),
    NODES: arrow_schema(_NODE_SCHEMA),
}
ROW_NODE = pa.schema([SCHEMAS[NODES].field("node")])  # what NODES joins to each kept row


def grouping_names(e: ExportConfig) -> list[tuple[int, str]]:
    """(kind, name) of every grouping the export keeps whole, in split.groupings' order."""
    out = [(ITEM, "id"), (COMPONENT, "dedup component")]
    if e.scope not in ("none", EDIT_SCOPE):
        out.append((SHAPE, f"shape group ({e.scope})"))
    out.append((EDIT, "normalised edit"))
    if e.split_by == "repo":
        out.append((REPO, "repo"))
    if e.split_by == "change":
        out.append((CHANGE, "change"))
    return out


# ------------------------------------------------------------------------ pass 1: members


def id_ranks(ids: pl.Series, bounds: pl.Series | None, count: int) -> np.ndarray:
    """`_o` of each id: a uint64 in id range p (executors.by_range's ranges: the keys k with
    ((k >> 32) * count) >> 32 == p), p the number of `bounds` (sorted ids) at or below the id."""
    if bounds is None or count == 1:
        return np.zeros(len(ids), np.uint64)
    p = bounds.search_sorted(ids, side="right").to_numpy().astype(np.uint64)
    return ((p << np.uint64(32)) + np.uint64(count - 1)) // np.uint64(count) << np.uint64(32)


def _members(
    ids: pl.Series, kind: int, k1: Any, k2: Any, o: tuple[pl.Series | None, int], **more: Any
) -> pl.DataFrame:
    n = len(ids)
    cols = {"_o": id_ranks(ids, *o), "id": ids, "kind": np.full(n, kind, np.int8)}
    cols |= {"k1": k1, "k2": k2, "row": np.full(n, -1, np.int64), "late": np.zeros(n, bool)}
    cols |= {"source": pl.Series([None] * n, dtype=pl.String)} | more
    return pl.DataFrame(cols, schema=_MEMBER_SCHEMA)


def item_members(items: pl.DataFrame, e: ExportConfig, o: tuple[Any, int]) -> pl.DataFrame:
    """Members of kept rows (ROW: their positions): the row itself, its change (when known)
    and, with split_by = "repo", its repository."""
    zero = np.zeros(items.height, np.uint64)
    late = np.zeros(items.height, bool)
    if e.split_by == "time":
        after = (pl.col("created_at") >= cutoff(e.after)).fill_null(False)
        late = items.select(after).to_series().to_numpy()
    rows = items[ROW].cast(pl.Int64)
    out = [_members(items["id"], ITEM, zero, zero, o, row=rows, late=late)]
    c = items.filter(known(CHANGE_COLUMNS))
    hi, lo = text_key(c, CHANGE_COLUMNS)
    out.append(_members(c["id"], CHANGE, hi, lo, o, row=c[ROW], source=c["source"]))
    if e.split_by == "repo":
        out.append(_members(items["id"], REPO, *text_key(items, ["repo"]), o))
    return pl.concat(out)


def cluster_members(clusters: pl.DataFrame, component: str, o: tuple[Any, int]) -> pl.DataFrame:
    """Members of dedup components (clusters.parquet's rows: kept and removed ids alike)."""
    zero = np.zeros(clusters.height, np.uint64)
    return _members(clusters["id"], COMPONENT, unsigned(clusters[component]), zero, o)


def shape_members(shapes: pl.DataFrame, e: ExportConfig, o: tuple[Any, int]) -> pl.DataFrame:
    """Members of shape groups (shapes.parquet's rows of groups of two or more) at the
    export's scope and of normalised edits."""
    out = []
    kinds = {EDIT_SCOPE: EDIT} | ({e.scope: SHAPE} if e.scope not in ("none", EDIT_SCOPE) else {})
    for scope, kind in kinds.items():
        s = shapes.filter(pl.col("scope") == scope)
        out.append(
            _members(s["id"], kind, unsigned(s["group_id"]), np.zeros(s.height, np.uint64), o)
        )
    return pl.concat(out)


def kept_batch(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """item_members of one numbered batch of kept rows (executors.batches)."""
    e, o = ctx
    return {MEMBERS: item_members(as_frame(batch), e, o)}, {}


def clusters_batch(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """cluster_members of one batch of clusters.parquet (id and component)."""
    component, o = ctx
    return {MEMBERS: cluster_members(as_frame(batch), component, o)}, {}


def shapes_batch(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """shape_members of one batch of shapes.parquet (id, scope, group_id, group_size)."""
    e, o = ctx
    f = as_frame(batch).filter(pl.col("group_size") > 1)  # a group of one binds nothing
    return {MEMBERS: shape_members(f, e, o)}, {}


def sample_batch(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every `ctx`-th id of one batch: the id ranges' boundaries are their quantiles."""
    return {"ids": as_frame(batch).select(pl.col("id").gather_every(ctx)).to_arrow()}, {}


def id_bounds(samples: list[Any], count: int) -> pl.Series | None:
    """The `count` - 1 boundaries of `count` id ranges of about equal size, from sampled ids
    (the ranges only spread the work: any boundaries give the same outputs)."""
    tables = [as_frame(t) for t in samples]
    ids = pl.concat(tables)["id"].sort() if tables else pl.Series("id", [], pl.String)
    if count <= 1 or not len(ids):
        return None
    at = (np.arange(1, count) * len(ids)) // count
    return ids.gather(at)


# ------------------------------------------------------------------------ pass 2: numbered


def count_ids(frame: pl.DataFrame, p: int, ctx: Any) -> tuple[int, dict[str, Any]]:
    """An id range's distinct kept ids."""
    return frame.filter(pl.col("kind") == ITEM)["id"].n_unique(), {}


@dataclass
class Numbered:
    """An id range's nodes: seeded and late per node, in id order."""

    seeded: np.ndarray
    late: np.ndarray


def number(frame: pl.DataFrame, p: int, ctx: Any) -> tuple[Numbered, dict[str, Any]]:
    """An id range's distinct kept ids numbered from its offset, in id order; its other
    members joined to their nodes (those of ids not kept drop out), keyed by `_h`; its kept
    rows' nodes (NODES), for the split files' rows."""
    offsets, seed = ctx
    items = frame.filter(pl.col("kind") == ITEM)
    per_id = items.group_by("id").agg(pl.col("late").any()).sort("id")
    first = int(offsets[p])
    nodes = per_id.select("id", node=pl.int_range(first, first + per_id.height, dtype=pl.Int64))
    rows = items.select("id", "row").join(nodes, on="id", how="left")
    seeded = sha256_128(f"{seed}\0" + per_id["id"])[0] if per_id.height else np.zeros(0, np.uint64)
    keyed = frame.filter(pl.col("kind") != ITEM).join(nodes, on="id", how="inner")
    h = key_hash(keyed["kind"], keyed["k1"], keyed["k2"])
    keyed = keyed.select(pl.Series("_h", h, _U64), "kind", "k1", "k2", "node", "source")
    res = Numbered(seeded, per_id["late"].to_numpy())
    return res, {KEYED: keyed, NODES: rows.select(pl.col("row").alias(ROW), "node")}


# ------------------------------------------------------------------------ pass 3: edges


def edges(frame: pl.DataFrame, p: int, ctx: Any) -> tuple[int, dict[str, Any]]:
    """A key range's keys held by two or more nodes: each node joined to the key's smallest
    (the kinds in `ctx` only: the change binds under split_by = "change" alone), and their
    members, for the checks (a row per kept row of a change: sharing counts rows)."""
    (binding,) = ctx
    key = ["kind", "k1", "k2"]
    bound = frame.filter(pl.col("node").n_unique().over(key) > 1)
    pairs = bound.filter(pl.col("kind").is_in(binding)).select(*key, "node").unique()
    pairs = pairs.select(a=pl.col("node").min().over(key), b=pl.col("node"))
    pairs = pairs.filter(pl.col("a") != pl.col("b"))
    return pairs.height, {EDGES: pairs, BOUND: bound}


def _components(cfg: Config, pieces: list[Any], n: int) -> np.ndarray:
    """The smallest node of each node's component under the edges `pieces`."""
    if cfg.run.executor == "ray":
        from pipeline.dedup.ray_graph import components

        return components(cfg.run, pieces, n)
    e = pl.concat(pieces) if pieces else _empty(_EDGE_SCHEMA)  # edges' own frames, locally
    return C.components(n, e["a"].to_numpy(), e["b"].to_numpy())


# ------------------------------------------------------------------------ pass 4: the deal


def split_of_nodes(
    label: np.ndarray, seeded: np.ndarray, late: np.ndarray, e: ExportConfig
) -> tuple[np.ndarray, list[int]]:
    """Each node's split (its index in SPLITS) and the groups per split: split.py's rule over
    the groups (label: each node's group, its smallest node; a group's key is its smallest
    id, so its seeded order is its label's, ties by label)."""
    n = len(label)
    roots = np.flatnonzero(label == np.arange(n))
    size = np.bincount(label, minlength=n)[roots]
    ratios = list(e.ratios)
    held = np.zeros(len(roots), bool)
    if e.split_by == "time":
        held = np.bincount(label, weights=late, minlength=n)[roots] > 0
        ratios = [ratios[0], ratios[1], 0.0]
        if ratios[0] + ratios[1] == 0:
            ratios = [1.0, 0.0, 0.0]
    early = np.flatnonzero(~held)
    # by seeded key, ties by label: roots[early] ascends, so a stable sort of the keys alone
    order = np.argsort(seeded[roots[early]], kind="stable")
    split = np.full(len(roots), 2, np.int8)
    split[early] = deal_order(size[early], order, ratios)
    by_label = np.zeros(n, np.int8)
    by_label[roots] = split
    return by_label[label], np.bincount(split, minlength=len(SPLITS)).tolist()


# ------------------------------------------------------------------------ pass 5: checks


def checks(frame: pl.DataFrame, p: int, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A key range's keys whose nodes are in two or more splits, per kind; and per source, the
    held-out rows of a change that has a train row (leakage.spanning, a node an id)."""
    (split,) = ctx
    f = frame.with_columns(split=pl.Series(split[frame["node"].to_numpy()], dtype=pl.Int8))
    cross, sharing = spanning(f, "node", CHANGE, SPLITS.index("train"))
    return {"cross": cross, "sharing": sharing}, {}


# ------------------------------------------------------------------------ the passes


@dataclass
class Assigned:
    """Each node's split (its index in SPLITS) and group, and the kept rows' nodes (`nodes`:
    tables of ROW, node; on Ray held by the workers, for batches' side); the groups in each
    split, the groupings' cross-split counts (by name) and each source's held-out rows sharing a
    change with train."""

    split: np.ndarray
    group: np.ndarray
    nodes: list[Any]
    groups: list[int]
    cross: dict[str, int]
    sharing: dict[str, int]


def assign(cfg: Config, pieces: list[Any], count: int) -> Assigned:
    """Passes 2-5 over the members `pieces` (pass 1, in `count` id ranges)."""
    from pipeline.executors import by_range

    e = cfg.export
    pieces = pieces or [_empty(_MEMBER_SCHEMA)]
    offsets = [0]
    if count > 1:
        found = [
            n
            for n, _ in by_range(
                cfg, pieces, "_o", ["_o", "kind", "id"], count, count_ids, None, {}
            )
        ]
        offsets = np.cumsum([0, *found])[:-1].tolist()
    seeded: list[np.ndarray] = []
    late: list[np.ndarray] = []
    keyed: list[Any] = []
    row_nodes: list[Any] = []
    cols = list(_MEMBER_SCHEMA)
    made = {KEYED: SCHEMAS[KEYED], NODES: SCHEMAS[NODES]}
    for res, outs in by_range(cfg, pieces, "_o", cols, count, number, (offsets, e.seed), made):
        seeded.append(res.seeded)
        late.append(res.late)
        keyed += [outs[KEYED]] if KEYED in outs else []
        row_nodes += [outs[NODES]] if NODES in outs else []
    seeded_a = np.concatenate(seeded)
    late_a = np.concatenate(late)
    n = len(seeded_a)
    binding = [COMPONENT, SHAPE, EDIT, REPO] + ([CHANGE] if e.split_by == "change" else [])
    two = {EDGES: SCHEMAS[EDGES], BOUND: SCHEMAS[BOUND]}
    edge_pieces: list[Any] = []
    bound: list[Any] = []
    keyed = keyed or [_empty(_KEYED_SCHEMA)]
    for _, outs in by_range(cfg, keyed, "_h", list(_KEYED_SCHEMA), count, edges, (binding,), two):
        edge_pieces += [outs[EDGES]] if EDGES in outs else []
        bound += [outs[BOUND]] if BOUND in outs else []
    del keyed
    label = _components(cfg, edge_pieces, n)
    split_node, groups = split_of_nodes(label, seeded_a, late_a, e)
    del seeded_a, late_a, edge_pieces
    cross: dict[int, int] = {}
    sharing: dict[str, int] = {}
    bound = bound or [_empty(_KEYED_SCHEMA)]
    for res, _ in by_range(cfg, bound, "_h", list(_KEYED_SCHEMA), count, checks, (split_node,), {}):
        for k, v in res["cross"].items():
            cross[k] = cross.get(k, 0) + v
        for s, v in res["sharing"].items():
            sharing[s] = sharing.get(s, 0) + v
    # (an id is one node, so "id" never spans splits: it has no members past pass 2)
    names = grouping_names(e)
    return Assigned(
        split_node,
        label,
        row_nodes,
        groups,
        {name: cross.get(kind, 0) for kind, name in names},
        sharing,
    )


def assign_splits(
    items: pl.DataFrame, clusters: pl.DataFrame, shapes: pl.DataFrame, e: ExportConfig
) -> pl.DataFrame:
    """id, export_group, split for each unique id of `items` (sorted by id), from frames in
    memory (clusters: id and its component; shapes: id, scope, group_id of groups of two or
    more): the stage's passes, in one range."""
    o = (None, 1)
    rows = items.with_row_index(ROW)
    pieces = [
        item_members(rows, e, o),
        cluster_members(clusters, component_col(clusters.columns), o),
        shape_members(shapes, e, o),
    ]
    a = assign(Config(export=e), pieces, 1)
    (node,) = arrays(a.nodes, 0, items.height, ROW_NODE)
    out = pl.DataFrame(
        {
            "id": items["id"],
            "export_group": a.group[node],
            "split": pl.Series(np.asarray(SPLITS)[a.split[node]], dtype=pl.String),
        }
    )
    return out.unique("id").sort("id")

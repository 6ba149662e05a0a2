"""The dedup stage: filter/kept.parquet -> kept / removed, with the evidence for every removal.

1. Exact duplicates: rows with the same id, or the same content over the shingled fields,
   form one exact group (a blank item -- every field whitespace only -- matches only its own
   id). Only the best-ranked row of each group (its representative) goes on.
2. Near duplicates: MinHash (datasketch affine32 semantics) over field-tagged shingles,
   banding into candidate pairs (buckets over `bucket_cap` scanned on signatures, see lsh.py),
   each pair verified once by exact Jaccard of the shingle sets. Edges down to `edge_floor`
   are kept in edges.parquet for `editcurate tune`.
3. Clusters are ranked-keeper stars over the verified edges at or above `threshold`
   (clusters.py): best-ranked first (`keeper` rank, never input order), an unclaimed item
   keeps and removes its unclaimed neighbours. Every removed item is within the threshold of
   its own keeper (removed.parquet: keeper_id, exact j), and no two kept items share a found
   edge at or above it (counted as kept_pairs_above_threshold, always 0). The connected
   component of each cluster is recorded too (component_id) so export keeps it whole.

4. Incremental runs (`against`): the dedup indexes of earlier runs (index.py) are matched as
   well; an item whose exact group holds an indexed id, or that is a verified near duplicate
   of an indexed item, is removed with that item as keeper (kind same_id_indexed,
   same_content_indexed or near_indexed). `index/` holds this run's own kept items for the
   next run: written only when asked for (`dedup.index`) or when this run is itself
   incremental (`against`), as it costs about 0.4 KB per kept item and a sixth of the time.

Rows are processed in (id, source, source_ref) order and every output is sorted by a stable
key, so shuffling the input changes no output byte.

Memory is bounded by what must be resident per item (rank values, a content hash, input row,
group and cluster numbers until the representatives are found, then each row's
representative: the ids, input rows and rank values wait on disk in position order,
store.py; 1.7 GB peak at 10M items on Ray), not by the text or the signatures: the input
is read a batch at a time (scan.py), shingle sets and band keys go to working files in the
stage folder (store.py), bands are grouped one at a time and candidates verified a chunk at
a time (find.py), and the outputs are gathered in output order through a scatter of the
input into partitions (write.py). Exact groups compare a 128-bit hash of the shingled text.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa
from rich.table import Table

from pipeline.config import Config, ConfigError
from pipeline.console import console
from pipeline.dedup import index as ix
from pipeline.dedup.find import (
    DedupResult,
    Placement,
    find,
    find_duplicates,
    needed_columns,
    scan_floor,
)
from pipeline.dedup.lsh import p_candidate
from pipeline.dedup.pairs import EDGE_SCHEMA
from pipeline.dedup.scan import (
    collect,
    exact_groups,
    held_schemas,
    scan_batch,
    scan_context,
    scanned_columns,
)
from pipeline.dedup.store import Store
from pipeline.dedup.write import write_rows
from pipeline.executors import batches
from pipeline.parts import Parts, Writer
from pipeline.runs import read_manifest

if TYPE_CHECKING:
    from pipeline.runner import StageIO

__all__ = ["DedupResult", "find_duplicates", "needed_columns", "scan_floor"]  # the pure part


CLUSTER_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("cluster_id", pa.int64()),  # the star: one keeper and the items it removed
        ("component_id", pa.int64()),  # connected component of edges >= threshold (splits)
        ("size", pa.int64()),  # rows in the star
        ("is_keeper", pa.bool_()),
        ("keeper_id", pa.string()),
        ("j_to_keeper", pa.float64()),
        ("kind", pa.string()),  # keeper | same_id | same_content | near
        ("exact_of", pa.string()),  # the id of the row's exact-group representative
    ]
)
OVERSIZED_SCHEMA = pa.schema(
    [
        ("band", pa.int32()),
        ("bucket", pa.uint64()),
        ("size", pa.int64()),
        ("scanned", pa.bool_()),  # False: over max_bucket, skipped (its pairs unverified)
        ("compared", pa.int64()),  # pairs compared on signatures (first shared band only)
        ("found", pa.int64()),  # pairs with estimated J >= scan_floor, then verified
        ("sample_ids", pa.list_(pa.string())),
    ]
)
READ_ROWS = 1 << 20  # input rows read at once when exact_groups reads every row's ids
REMOVED_EXTRA = [("keeper_id", pa.string()), ("j", pa.float64()), ("kind", pa.string())]


# ------------------------------------------------------------------------ stage I/O


def index_fingerprint(cfg: Config, entry: str) -> str:
    """The content fingerprint of the dedup index of the earlier run `entry` (a
    dedup.against path); ConfigError naming it when it has none or one made otherwise."""
    run = cfg.resolve(entry)
    where = f"dedup.against: {entry}"
    if run.resolve() == cfg.run_dir.resolve():
        raise ConfigError(f"{where}: is this run's own folder; name an earlier run")
    m = read_manifest(run / "dedup")
    out = (m or {}).get("outputs", {}).get("index")
    if not isinstance(out, dict) or not (run / "dedup" / "index").is_dir():
        raise ConfigError(
            f"{where}: no dedup index in {run / 'dedup'} (dedup writes one only with "
            "dedup.index = true); re-run that run's dedup with it: editcurate dedup "
            f"{shlex.quote(str(run))} --set dedup.index=true"
        )
    theirs = (m or {}).get("dedup_config") or {}
    d = cfg.dedup
    for k in ix.SHINGLING:
        if theirs.get(k) != getattr(d, k):
            raise ConfigError(
                f"{where}: its index was made with dedup.{k} = {theirs.get(k)!r}, this "
                f"run has {getattr(d, k)!r}; signatures compare only with the same shingling"
            )
    return f"sha256:{out.get('sha256', '')}"


def writes_index(cfg: Config) -> bool:
    """Whether this run's dedup writes index/ (the stage's `when` for it)."""
    return cfg.dedup.writes_index


def key(cfg: Config) -> tuple[str, dict[str, str]]:
    """Every dedup.against run checked; their index fingerprints are this stage's inputs."""
    return "", {f"against:{e}": index_fingerprint(cfg, e) for e in cfg.dedup.against}


def read_columns(pf: Parts, columns: list[str], rows: np.ndarray | None) -> Iterator[pl.DataFrame]:
    """`columns` of the input's `rows` (None: every row, a batch at a time), for exact_groups."""
    if rows is not None:
        yield pl.DataFrame(pf.take(rows, columns))
        return
    for b in pf.iter_batches(READ_ROWS, columns, exact=False):
        yield pl.DataFrame(b)


def placement(cfg: Config) -> Placement:
    """Where find bands, verifies and clusters: run.executor's choice."""
    if cfg.run.executor == "ray":  # the buckets by a hash shuffle, the pairs left on Ray,
        from pipeline.dedup.ray_pairs import candidates, graph
        from pipeline.dedup.ray_sets import hold  # the sets read from the object store

        return Placement(
            cfg.run, partial(candidates, run=cfg.run), graph, partial(hold, run=cfg.run)
        )
    return Placement(cfg.run)


def step(cfg: Config, io: StageIO) -> tuple[dict[str, Any], dict[str, Any]]:
    d = cfg.dedup
    src = io.input(io.source)
    pf = io.parts(io.source)
    # the id and its tie-break are read again by exact_groups (scan.py)
    columns = [c for c in scanned_columns(d) if c in pf.schema_arrow.names]
    index = ix.load([cfg.resolve(e) for e in d.against], d) if d.against else None
    # Shingle sets, band keys and the scattered outputs live here (store.py, write.py): on
    # a local disk, removed whatever happens.
    with io.scratch("dedup-work") as work:
        store = Store(work / "store", d.num_perm, d.seed, d.bands, d.rows, d.checks_change)
        with io.progress() as bar:
            task = bar.add_task("dedup: shingles + MinHash", total=pf.num_rows)
            # the per-item work (shingles, MinHash, band keys) on the configured executor
            ctx = scan_context(d)
            on_ray = cfg.run.executor == "ray"  # the sets kept by the workers (ray_sets.py)
            held = held_schemas(d) if on_ray else None
            per_batch = batches(cfg, src, scan_batch, ctx, d.batch_size, columns, held=held)
            results: Iterable[tuple[dict[str, Any], int]] = ((o, n) for o, _, n in per_batch)
            if on_ray:
                from pipeline.dedup.ray_sets import on_node

                results = on_node(results, store, cfg.run)
            # one expression: each step holds the only reference to its input, and drops it
            res = find(
                exact_groups(
                    collect(
                        results,
                        d,
                        store,
                        advance=lambda k: bar.advance(task, k),
                    ),
                    d,
                    partial(read_columns, pf),
                    store,
                ),
                store,
                d,
                index=index,
                where=placement(cfg),
            )
        store.drop(*store.names()[1:])  # the band keys: only the shingle sets are read on
        # Edges and clusters first (from Ray a block at a time, named by the store's ids):
        # written, they are dropped before the rows are put in order.
        with ExitStack() as stack:
            edges = Writer(io.sink, {"edges.parquet": EDGE_SCHEMA}, cfg.run.part_rows, stack)
            for t in res.edge_tables():
                edges.add({"edges.parquet": t})
            edges.close()
        for name, frame, schema in (
            ("clusters.parquet", res.clusters, CLUSTER_SCHEMA),
            ("oversized_buckets.parquet", res.oversized, OVERSIZED_SCHEMA),
        ):
            io.write(name, frame.to_arrow().cast(schema))
        res.clusters = res.clusters.clear()
        if not d.writes_index:  # only the index's signatures read the sets again
            store.drop_sets()
        write_rows(io, src, res, store, d, work / "parts", REMOVED_EXTRA, d.writes_index)
    extra = {
        "bands": {"bands": d.bands, "rows": d.rows, "threshold": d.threshold},
        "dedup_config": d.model_dump(),  # what tune needs to read the edges
    }
    return res.counts, extra


def print_summary(m: dict[str, Any] | None) -> None:
    """Counts by kind, the banding S-curve at the threshold, and oversized buckets."""
    if not m:
        return
    c = m["counts"]
    band = m.get("bands", {})
    t = Table(title="dedup", title_justify="left")
    t.add_column("what")
    t.add_column("count", justify="right")
    for label, key in (
        ("items in", "items_in"),
        ("kept", "kept"),
        ("removed: same id", "removed_same_id"),
        ("removed: same content", "removed_same_content"),
        ("removed: near duplicate", "removed_near"),
        ("removed: same id as an indexed item", "removed_same_id_indexed"),
        ("removed: same content as an indexed item", "removed_same_content_indexed"),
        ("removed: near an indexed item", "removed_near_indexed"),
        ("clusters (size >= 2)", "clusters"),
        ("components holding them", "components"),
        ("kept pairs >= threshold (found)", "kept_pairs_above_threshold"),
        ("candidate pairs (verified)", "candidate_pairs"),
        ("edges >= edge_floor", "edges"),
        ("edges >= threshold", "near_edges"),
        ("items with no shingles", "no_shingles"),
        ("buckets over bucket_cap (scanned)", "oversized_buckets"),
        ("  pairs compared in them", "oversized_pairs_compared"),
        ("  skipped (over max_bucket)", "oversized_skipped"),
    ):
        if key in c or not key.endswith("_indexed"):
            t.add_row(label, str(c.get(key, 0)))
    console.print(t)
    if band:
        b, r, th = band["bands"], band["rows"], band["threshold"]
        curve = ", ".join(
            f"J={j:.2f}: {p_candidate(j, b, r):.3f}" for j in sorted({0.5, 0.7, th, 0.9})
        )
        console.print(f"dedup: {b} bands x {r} rows; P(candidate | J) {curve}")
    if c.get("oversized_skipped"):
        console.print(
            f"[yellow]dedup: {c['oversized_skipped']} bucket(s) over max_bucket were skipped: "
            f"up to {c['oversized_skipped_pairs']} pairs unverified (recall may be lost; "
            "raise dedup.max_bucket)"
        )
    if "index_items" in c:
        console.print(
            f"dedup: matched against {c['index_items']} indexed items of earlier runs: "
            f"{c['index_candidate_pairs']} candidate pairs, {c['index_keepers']} indexed "
            f"items are keepers, {c['index_oversized_skipped']} index buckets skipped"
        )
    console.print(
        f"dedup: {c['items_in']} items -> {c['kept']} kept, {c['removed']} removed "
        f"at threshold {band.get('threshold', '?')}; kept pairs at or above it among those "
        f"found: {c.get('kept_pairs_above_threshold', 0)}"
    )

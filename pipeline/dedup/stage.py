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

Rows are processed in (id, source, source_ref) order and every output is sorted by a stable
key, so shuffling the input changes no output byte.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from rich.table import Table

from pipeline.config import Config
from pipeline.console import console
from pipeline.dedup.find import DedupResult, find_duplicates, needed_columns, scan_floor
from pipeline.dedup.lsh import p_candidate

if TYPE_CHECKING:
    from pipeline.runner import StageIO

__all__ = ["DedupResult", "find_duplicates", "needed_columns", "scan_floor"]  # the pure part

INPUT = "filter/kept.parquet"

EDGE_SCHEMA = pa.schema(
    [("a", pa.string()), ("b", pa.string()), ("est_j", pa.float64()), ("exact_j", pa.float64())]
)
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
REMOVED_EXTRA = [("keeper_id", pa.string()), ("j", pa.float64()), ("kind", pa.string())]


# ------------------------------------------------------------------------ stage I/O


def step(cfg: Config, io: StageIO) -> tuple[dict[str, Any], dict[str, Any]]:
    d = cfg.dedup
    src = io.input(INPUT)
    names = pq.read_schema(src).names
    with io.progress() as bar:
        task = bar.add_task("dedup: shingles + MinHash", total=pq.read_metadata(src).num_rows)
        res = find_duplicates(  # no reference kept here: find_duplicates frees the text early
            pl.read_parquet(src, columns=[c for c in needed_columns(d) if c in names]),
            d,
            advance=lambda k: bar.advance(task, k),
        )
    write_outputs(io.table(INPUT), res, io)
    extra = {
        "bands": {"bands": d.bands, "rows": d.rows, "threshold": d.threshold},
        "dedup_config": d.model_dump(),  # what tune needs to read the edges
    }
    return res.counts, extra


def write_outputs(table: pa.Table, res: DedupResult, io: StageIO, chunk: int = 100_000) -> None:
    """kept / removed gathered from the input in output order, a chunk at a time."""
    removed_schema = table.schema
    for name, typ in REMOVED_EXTRA:
        removed_schema = removed_schema.append(pa.field(name, typ))
    with io.sink("kept.parquet", table.schema) as w:
        for s in range(0, len(res.kept_rows), chunk):
            w.write_table(table.take(pa.array(res.kept_rows[s : s + chunk], pa.int64())))
    with io.sink("removed.parquet", removed_schema) as w:
        for s in range(0, res.removed.height, chunk):
            part = res.removed.slice(s, chunk)
            t = table.take(pa.array(part["_row"].to_numpy(), pa.int64()))
            for name, typ in REMOVED_EXTRA:
                t = t.append_column(pa.field(name, typ), part[name].to_arrow().cast(typ))
            w.write_table(t)
    for name, frame, schema in (
        ("edges.parquet", res.edges, EDGE_SCHEMA),
        ("clusters.parquet", res.clusters, CLUSTER_SCHEMA),
        ("oversized_buckets.parquet", res.oversized, OVERSIZED_SCHEMA),
    ):
        io.write(name, frame.to_arrow().cast(schema))


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
    console.print(
        f"dedup: {c['items_in']} items -> {c['kept']} kept, {c['removed']} removed "
        f"at threshold {band.get('threshold', '?')}; kept pairs at or above it among those "
        f"found: {c.get('kept_pairs_above_threshold', 0)}"
    )

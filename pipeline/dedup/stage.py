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

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numba as nb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from rich.table import Table

from pipeline.config import Config, DedupConfig
from pipeline.console import console, progress
from pipeline.dedup import clusters as C
from pipeline.dedup.lsh import candidates, p_candidate
from pipeline.dedup.minhash import permutations, signatures
from pipeline.dedup.shingles import MODES, shingle_sets
from pipeline.runs import (
    StageFailed,
    StageRun,
    code_version,
    input_fingerprint,
    parquet_sink,
    require_output,
    stage_fingerprint,
    write_parquet,
)
from pipeline.schema import ITEM_SCHEMA

STAGE = "dedup"
PREV_STAGE, INPUT_FILE = "filter", "kept.parquet"
TEXT_FIELDS = tuple(f.name for f in ITEM_SCHEMA if f.type == pa.string() and f.name != "id")

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


class DedupFailed(StageFailed):
    """The dedup stage cannot run: no input, or a config it cannot use."""


def input_path(cfg: Config) -> Path:
    """The one place that names this stage's input."""
    return cfg.run_dir / PREV_STAGE / INPUT_FILE


def check_config(d: DedupConfig) -> None:
    def bad(msg: str) -> None:
        raise DedupFailed(f"config: dedup.{msg}")

    if not 0.0 < d.threshold <= 1.0:
        bad(f"threshold = {d.threshold}: must be in (0, 1]")
    if not 0.0 < d.edge_floor <= 1.0:
        bad(f"edge_floor = {d.edge_floor}: must be in (0, 1]")
    if not d.fields or any(f not in TEXT_FIELDS for f in d.fields):
        bad(f"fields = {d.fields}: use text fields among {', '.join(TEXT_FIELDS)}")
    if d.shingle not in MODES:
        bad(f"shingle = {d.shingle!r}: use one of {', '.join(MODES)}")
    if d.ngram < 1:
        bad(f"ngram = {d.ngram}: must be >= 1")
    if d.bands < 1 or d.rows < 1 or d.bands * d.rows > d.num_perm:
        bad(f"bands x rows = {d.bands} x {d.rows}: must be >= 1 and fit in num_perm {d.num_perm}")
    if d.bucket_cap < 2:
        bad(f"bucket_cap = {d.bucket_cap}: must be >= 2")
    if d.max_bucket < d.bucket_cap:
        bad(f"max_bucket = {d.max_bucket}: must be >= bucket_cap ({d.bucket_cap})")
    if d.batch_size < 1:
        bad(f"batch_size = {d.batch_size}: must be >= 1")
    for k in d.keeper:
        if k.lstrip("-") not in C.RANK_KEYS:
            bad(f"keeper: {k!r} is not a rank key; use {', '.join(C.RANK_KEYS)} ('-' = desc)")


# ------------------------------------------------------------------------ pure part

SCAN_MARGIN = 0.1  # a big bucket's pairs are verified from estimated J >= threshold - this


def scan_floor(d: DedupConfig) -> float:
    """Estimated J at which a pair in an oversized bucket becomes a candidate: 4 standard
    deviations of the 256-slot estimate below the threshold, so recall is kept."""
    return max(0.0, d.threshold - SCAN_MARGIN)


@dataclass
class DedupResult:
    kept_rows: np.ndarray  # input row numbers of kept items, in output order
    removed: pl.DataFrame  # _row, keeper_id, j, kind (output order)
    clusters: pl.DataFrame  # CLUSTER_SCHEMA
    edges: pl.DataFrame  # EDGE_SCHEMA
    oversized: pl.DataFrame  # OVERSIZED_SCHEMA
    counts: dict[str, Any]


def needed_columns(d: DedupConfig) -> list[str]:
    """The input columns dedup reads: identity, shingled fields, and what the keeper rank uses."""
    rank = [c for k in d.keeper for c in C.RANK_COLUMNS[k.lstrip("-")]]
    return list(dict.fromkeys(["id", "source", "source_ref", *d.fields, *rank]))


def _exact_groups(df: pl.DataFrame, d: DedupConfig) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(w, text): one row per input row in (id, source, source_ref) order, with its `_group`
    (smallest position of its exact group), rank columns and `_blank`; and the shingled text.

    Only small key and rank columns are copied or sorted; the text stays where it is.
    """
    fields = list(d.fields)
    n = df.height
    order = df.select(C.TIE_BREAK).with_row_index("_row").sort(C.TIE_BREAK, maintain_order=True)
    row_of_pos = order["_row"].to_numpy().astype(np.int64)
    pos_of_row = np.empty(n, dtype=np.int64)
    pos_of_row[row_of_pos] = np.arange(n)
    text = df.select(pl.col(f).fill_null("") for f in fields)
    blank = pl.all_horizontal(
        (pl.col(f) == "") if d.shingle == "chars" else (pl.col(f).str.strip_chars() == "")
        for f in fields
    )
    rank, _ = C.rank_exprs(list(d.keeper))
    firsts = pl.concat([df.select("id"), text], how="horizontal").with_columns(
        _pos=pl.Series(pos_of_row)
    )
    firsts = firsts.select(
        blank.alias("_blank"),
        pl.col("_pos").min().over("id").alias("_id_first"),
        pl.when(blank)
        .then(pl.col("_pos"))
        .otherwise(pl.col("_pos").min().over(fields))
        .alias("_content_first"),
    )
    w = (
        df.select(*C.TIE_BREAK, *rank)
        .with_columns(firsts.to_series(0), _row=pl.Series(np.arange(n, dtype=np.int64)))[row_of_pos]
        .with_columns(_pos=pl.Series(np.arange(n, dtype=np.int64)))
    )
    pos = np.arange(n, dtype=np.int64)
    group = C.components(
        n,
        np.concatenate([pos, pos]),
        np.concatenate([firsts[c].to_numpy()[row_of_pos] for c in firsts.columns[1:]]).astype(
            np.int64
        ),
    )
    return w.with_columns(_group=pl.Series(group)), text


def _shingle(
    text: pl.DataFrame, rep_rows: np.ndarray, d: DedupConfig, advance: Callable[[int], None] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR shingle sets (offsets, values) and signatures of the rows rep_rows, batch by batch."""
    fields = list(d.fields)
    a_perm, b_perm = permutations(d.num_perm, d.seed)
    sig = np.empty((len(rep_rows), d.num_perm), dtype=np.uint32)
    offs_parts, val_parts, shift = [np.zeros(1, np.int64)], [], 0
    for s in range(0, len(rep_rows), d.batch_size):
        rows = pl.Series(rep_rows[s : s + d.batch_size])
        offs, vals = shingle_sets(
            [text[f].gather(rows).to_arrow() for f in fields], fields, d.ngram, d.shingle
        )
        sig[s : s + len(rows)] = signatures(offs, vals, a_perm, b_perm)
        offs_parts.append(offs[1:] + shift)
        val_parts.append(vals)
        shift += len(vals)
        if advance:
            advance(len(rows))
    values = np.concatenate(val_parts) if val_parts else np.empty(0, np.uint32)
    return np.concatenate(offs_parts), values, sig


def find_duplicates(
    df: pl.DataFrame, d: DedupConfig, advance: Callable[[int], None] | None = None
) -> DedupResult:
    """Exact then near duplicates of the rows of df (item columns; row order is ignored).

    Pass df without keeping a reference to it, and its text is freed once shingled.
    """
    n = df.height
    w, text = _exact_groups(df, d)
    del df
    _, desc = C.rank_exprs(list(d.keeper))
    group = w["_group"].to_numpy()
    # Representative of an exact group: its best-ranked row (so a cluster's keeper is one).
    reps = (
        C.sort_best(w, "_group", desc)
        .unique("_group", keep="first", maintain_order=True)
        .sort("_pos")
    )
    nrep = reps.height
    rep_index = np.full(n, -1, dtype=np.int64)
    rep_index[reps["_group"].to_numpy()] = np.arange(nrep)
    w = w.with_columns(
        _rep=pl.Series(rep_index[group]),
        _rep_id=reps["id"].gather(rep_index[group]),
    )

    offsets, values, sig = _shingle(text, reps["_row"].to_numpy(), d, advance)
    del text
    nshingles = np.diff(offsets)
    eligible = np.flatnonzero((nshingles > 0) & ~reps["_blank"].to_numpy())

    threads = nb.get_num_threads()
    cand = candidates(
        sig,
        eligible,
        d.bands,
        d.rows,
        d.bucket_cap,
        threads=threads,
        scan_floor=scan_floor(d),
        max_bucket=d.max_bucket,
    )
    exact_j = C.exact_jaccard(offsets, values, cand.a, cand.b)
    est_j = C.est_jaccard(sig, cand.a, cand.b)
    del sig
    floor = min(d.edge_floor, d.threshold)
    keep_edge = exact_j >= floor
    near = exact_j >= d.threshold
    rep_ids = reps["id"]
    edges = pl.DataFrame(
        {
            "a": rep_ids.gather(cand.a[keep_edge]),
            "b": rep_ids.gather(cand.b[keep_edge]),
            "est_j": est_j[keep_edge],
            "exact_j": exact_j[keep_edge],
        },
        schema={"a": pl.String, "b": pl.String, "est_j": pl.Float64, "exact_j": pl.Float64},
    )
    na, nb_, nj = cand.a[near], cand.b[near], exact_j[near]
    rank_cols = [f"_rank{k}" for k in range(len(desc))]
    order = (
        reps.select(rank_cols)
        .with_row_index("_r")
        .sort(rank_cols, descending=desc, nulls_last=True, maintain_order=True)["_r"]
        .to_numpy()
        .astype(np.int64)
    )
    keeper_rep, j_rep = C.stars(order, na, nb_, nj)
    comp_rep = C.components(nrep, na, nb_)
    kept_pairs_above = int(((keeper_rep[na] == na) & (keeper_rep[nb_] == nb_)).sum())

    # Per row: its star (the keeper's representative) and its component, through its rep.
    row_rep = rep_index[group]
    w = w.with_columns(
        _cluster=pl.Series(keeper_rep[row_rep], dtype=pl.Int64),
        _component=pl.Series(comp_rep[row_rep], dtype=pl.Int64),
        _j=pl.Series(j_rep[row_rep], dtype=pl.Float64),
    )
    w = w.with_columns(_size=pl.len().over("_cluster"), _csize=pl.len().over("_component"))
    # Rows in a component of two or more: every star member, and keepers whose component
    # holds other stars (export keeps a component in one split).
    multi = C.sort_best(w.filter(pl.col("_csize") > 1), "_cluster", desc)
    multi = multi.with_columns(
        _is_keeper=pl.col("_pos") == pl.col("_pos").first().over("_cluster"),
        _keeper_pos=pl.col("_pos").first().over("_cluster"),
        keeper_id=pl.col("id").first().over("_cluster"),
        _comp_pos=pl.col("_pos").min().over("_component"),
    )
    multi = multi.with_columns(
        j_to_keeper=pl.when(pl.col("_rep") == pl.col("_cluster")).then(1.0).otherwise("_j"),
        kind=pl.when(pl.col("_is_keeper"))
        .then(pl.lit("keeper"))
        .when(pl.col("_rep") != pl.col("_cluster"))
        .then(pl.lit("near"))
        .when(pl.col("id") == pl.col("keeper_id"))
        .then(pl.lit("same_id"))
        .otherwise(pl.lit("same_content")),
    )
    cluster_num = multi.select(pl.col("_keeper_pos").unique().sort()).with_row_index("cluster_id")
    comp_num = multi.select(pl.col("_comp_pos").unique().sort()).with_row_index("component_id")
    multi = (
        multi.join(cluster_num, on="_keeper_pos", how="left")
        .join(comp_num, on="_comp_pos", how="left")
        .sort(["cluster_id", "_is_keeper", "_pos"], descending=[False, True, False])
    )
    clusters = multi.select(
        "id",
        pl.col("cluster_id").cast(pl.Int64),
        pl.col("component_id").cast(pl.Int64),
        pl.col("_size").cast(pl.Int64).alias("size"),
        pl.col("_is_keeper").alias("is_keeper"),
        "keeper_id",
        "j_to_keeper",
        "kind",
        pl.col("_rep_id").alias("exact_of"),
    )
    removed = (
        multi.filter(~pl.col("_is_keeper"))
        .sort("_pos")
        .select("_row", "keeper_id", pl.col("j_to_keeper").alias("j"), "kind")
    )
    kept_rows = (
        w.join(removed.select("_row"), on="_row", how="anti").sort("_pos")["_row"].to_numpy()
    )

    samples = [[rep_ids[int(i)] for i in row if i >= 0] for row in cand.big_sample]
    oversized = pl.DataFrame(
        {
            "band": cand.big_band,
            "bucket": cand.big_key,
            "size": cand.big_size,
            "scanned": cand.big_scanned,
            "compared": cand.big_compared,
            "found": cand.big_found,
            "sample_ids": samples,
        },
        schema={
            "band": pl.Int32,
            "bucket": pl.UInt64,
            "size": pl.Int64,
            "scanned": pl.Boolean,
            "compared": pl.Int64,
            "found": pl.Int64,
            "sample_ids": pl.List(pl.String),
        },
    ).sort(["band", "bucket"])

    by_kind = dict(removed.group_by("kind").len().iter_rows())
    counts = {
        "items_in": n,
        "kept": int(len(kept_rows)),
        "removed": removed.height,
        "removed_same_id": int(by_kind.get("same_id", 0)),
        "removed_same_content": int(by_kind.get("same_content", 0)),
        "removed_near": int(by_kind.get("near", 0)),
        "exact_groups": nrep,
        "no_shingles": int(nrep - len(eligible)),
        "clusters": int(multi.filter(pl.col("_size") > 1)["cluster_id"].n_unique()),
        "components": int(comp_num.height),
        "kept_pairs_above_threshold": kept_pairs_above,
        "candidate_pairs": int(len(cand.a)),
        "band_pairs": int(cand.raw_pairs),
        "edges": edges.height,
        "near_edges": int(near.sum()),
        "oversized_buckets": oversized.height,
        "oversized_items": int(oversized["size"].sum()) if oversized.height else 0,
        "oversized_pairs_compared": int(cand.big_compared.sum()),
        "oversized_skipped": int((~cand.big_scanned).sum()),
        "oversized_skipped_pairs": cand.skipped_pairs,
        "p_candidate_at_threshold": round(p_candidate(d.threshold, d.bands, d.rows), 6),
    }
    return DedupResult(kept_rows, removed, clusters, edges, oversized, counts)


# ------------------------------------------------------------------------ stage I/O


def prepare(cfg: Config) -> StageRun:
    check_config(cfg.dedup)
    src = input_path(cfg)
    require_output(src, PREV_STAGE, STAGE, DedupFailed)
    return StageRun(
        run_dir=cfg.run_dir,
        stage=STAGE,
        fingerprint=stage_fingerprint(STAGE, cfg.fingerprint("dedup"), code_version(STAGE)),
        config_fingerprint=cfg.fingerprint(),
        inputs={f"{PREV_STAGE}/{INPUT_FILE}": input_fingerprint(src)},
    )


def run(cfg: Config, sr: StageRun) -> dict[str, Any]:
    d = cfg.dedup
    sr.begin()
    src = input_path(cfg)
    names = pq.read_schema(src).names
    with progress() as bar:
        task = bar.add_task("dedup: shingles + MinHash", total=pq.read_metadata(src).num_rows)
        res = find_duplicates(  # no reference kept here: find_duplicates frees the text early
            pl.read_parquet(src, columns=[c for c in needed_columns(d) if c in names]),
            d,
            advance=lambda k: bar.advance(task, k),
        )
    write_outputs(pq.read_table(src), res, sr)
    counts = res.counts
    sr.finish(
        counts,
        {
            "conservation": {
                "kind": "ids",
                "input": f"../{PREV_STAGE}/{INPUT_FILE}",
                "outputs": ["kept.parquet", "removed.parquet"],
            },
            "bands": {"bands": d.bands, "rows": d.rows, "threshold": d.threshold},
            "dedup_config": dataclasses.asdict(d),  # what tune needs to read the edges
        },
    )
    return counts


def write_outputs(table: pa.Table, res: DedupResult, sr: StageRun, chunk: int = 100_000) -> None:
    """kept / removed gathered from the input in output order, a chunk at a time."""
    removed_schema = table.schema
    for name, typ in REMOVED_EXTRA:
        removed_schema = removed_schema.append(pa.field(name, typ))
    with parquet_sink(sr.dir / "kept.parquet", table.schema, sr.meta) as w:
        for s in range(0, len(res.kept_rows), chunk):
            w.write_table(table.take(pa.array(res.kept_rows[s : s + chunk], pa.int64())))
    with parquet_sink(sr.dir / "removed.parquet", removed_schema, sr.meta) as w:
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
        write_parquet(frame.to_arrow().cast(schema), sr.dir / name, sr.meta)
    sr.record_output("kept.parquet", "items")
    sr.record_output("removed.parquet", "terminal")
    for name in ("edges.parquet", "clusters.parquet", "oversized_buckets.parquet"):
        sr.record_output(name, "aux")


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

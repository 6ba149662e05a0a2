"""Exact then near duplicates of a table of items: the dedup stage's pure part.

See stage.py for the method; this module holds no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np
import polars as pl

from pipeline.config import DedupConfig
from pipeline.dedup import clusters as C
from pipeline.dedup import lsh
from pipeline.dedup.index import Index, best, match, same_text, shingle_and_sign
from pipeline.dedup.lsh import candidates, p_candidate


def scan_floor(d: DedupConfig) -> float:
    """Estimated J at which a pair in an oversized bucket becomes a candidate (lsh.py)."""
    return lsh.scan_floor(d.threshold)


@dataclass
class DedupResult:
    kept_rows: np.ndarray  # input row numbers of kept items, in output order
    removed: pl.DataFrame  # _row, keeper_id, j, kind (output order)
    clusters: pl.DataFrame  # CLUSTER_SCHEMA
    edges: pl.DataFrame  # EDGE_SCHEMA
    oversized: pl.DataFrame  # OVERSIZED_SCHEMA
    counts: dict[str, Any]
    kept_sig: np.ndarray  # signatures of the kept rows, in output order (for the index)
    kept_shingles: np.ndarray  # their shingle set sizes


@dataclass
class Claims:
    """Per representative of an exact group: the index row that claims it (-1: none), the J
    (1.0 for the same id) and whether its shingled text is the indexed item's."""

    row: np.ndarray
    j: np.ndarray
    same: np.ndarray
    counts: dict[str, int]


def _claims(
    index: Index,
    w: pl.DataFrame,
    reps: pl.DataFrame,
    text: pl.DataFrame,
    shingled: tuple[np.ndarray, np.ndarray, np.ndarray],
    eligible: np.ndarray,
    d: DedupConfig,
) -> Claims:
    """Which indexed item claims each representative: one whose exact group holds an indexed
    id, else the closest verified near duplicate (highest J, then the first index row)."""
    offsets, values, sig = shingled
    m = match(index, sig, offsets, values, eligible, d)
    row, j = best(m, reps.height)
    by_id = (
        w.select("_rep", "id")
        .join(pl.DataFrame({"id": index.ids, "_r": np.arange(len(index))}), on="id")
        .group_by("_rep")
        .agg(pl.col("_r").min())
    )
    if by_id.height:
        at = by_id["_rep"].to_numpy()
        row[at], j[at] = by_id["_r"].to_numpy(), 1.0
    hit = np.flatnonzero(row >= 0)
    same = np.zeros(reps.height, dtype=bool)
    same[hit] = same_text(index, row[hit], text[reps["_row"].to_numpy()[hit]])
    counts = {f"index_{k}": v for k, v in m.counts.items()}
    counts |= {"index_items": len(index), "index_keepers": len(np.unique(row[hit]))}
    return Claims(row, j, same, counts)


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


def find_duplicates(
    df: pl.DataFrame,
    d: DedupConfig,
    advance: Callable[[int], None] | None = None,
    index: Index | None = None,
) -> DedupResult:
    """Exact then near duplicates of the rows of df (item columns; row order is ignored).

    With an `index` (earlier runs' kept items), a row whose exact group holds an indexed id,
    or whose representative is a verified near duplicate of an indexed item, is removed with
    that item as keeper (kinds *_indexed); indexed items rank before every row, so they are
    never removed. Pass df without keeping a reference to it, and its text is freed once
    shingled (and matched against the index).
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

    offsets, values, sig = shingle_and_sign(text, reps["_row"].to_numpy(), d, advance)
    nshingles = np.diff(offsets)
    eligible = np.flatnonzero((nshingles > 0) & ~reps["_blank"].to_numpy())
    claims = None
    if index is not None:
        claims = _claims(index, w, reps, text, (offsets, values, sig), eligible, d)
    del text

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
    inodes = np.empty(0, np.int64)  # index rows that claim a representative: nodes nrep+k
    if claims is not None:  # ranked first, each joined only to the representatives it claims
        at = np.flatnonzero(claims.row >= 0)
        inodes, local = np.unique(claims.row[at], return_inverse=True)
        na, nb_ = np.concatenate([na, at]), np.concatenate([nb_, nrep + local])
        nj = np.concatenate([nj, claims.j[at]])
        order = np.concatenate([nrep + np.arange(len(inodes)), order])
    keeper_rep, j_rep = C.stars(order, na, nb_, nj)
    comp_rep = C.components(nrep + len(inodes), na, nb_)
    kept_pairs_above = int(((keeper_rep[na] == na) & (keeper_rep[nb_] == nb_)).sum())

    # Per row: its star (the keeper's representative) and its component, through its rep.
    row_rep = rep_index[group]
    cl = keeper_rep[row_rep]
    by_index = cl >= nrep
    if index is not None and len(inodes):
        ikeep = index.ids.gather(inodes[np.where(by_index, cl - nrep, 0)])
        assert claims is not None
        isame = claims.same[row_rep]
    else:
        ikeep, isame = pl.Series([""] * n, dtype=pl.String), np.zeros(n, dtype=bool)
    w = w.with_columns(
        _cluster=pl.Series(cl, dtype=pl.Int64),
        _component=pl.Series(comp_rep[row_rep], dtype=pl.Int64),
        _j=pl.Series(j_rep[row_rep], dtype=pl.Float64),
        _by_index=pl.Series(by_index),
        _ikeep=ikeep,
        _isame=pl.Series(isame),
    )
    w = w.with_columns(_size=pl.len().over("_cluster"), _csize=pl.len().over("_component"))
    # Rows in a component of two or more: every star member, and keepers whose component
    # holds other stars (export keeps a component in one split); and rows an indexed item
    # claimed (their keeper is in an earlier run).
    multi = w.filter((pl.col("_csize") > 1) | pl.col("_by_index"))
    multi = C.sort_best(multi, "_cluster", desc)
    first = pl.col("_pos") == pl.col("_pos").first().over("_cluster")
    multi = multi.with_columns(
        _is_keeper=first & ~pl.col("_by_index"),
        _keeper_pos=pl.col("_pos").first().over("_cluster"),
        keeper_id=pl.when("_by_index")
        .then(pl.col("_ikeep"))
        .otherwise(pl.col("id").first().over("_cluster")),
        _comp_pos=pl.col("_pos").min().over("_component"),
    )
    multi = multi.with_columns(
        j_to_keeper=pl.when(pl.col("_rep") == pl.col("_cluster")).then(1.0).otherwise("_j"),
        kind=pl.when(pl.col("_is_keeper"))
        .then(pl.lit("keeper"))
        .when(pl.col("_by_index") & (pl.col("id") == pl.col("keeper_id")))
        .then(pl.lit("same_id_indexed"))
        .when(pl.col("_by_index") & pl.col("_isame"))
        .then(pl.lit("same_content_indexed"))
        .when(pl.col("_by_index"))
        .then(pl.lit("near_indexed"))
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
    kept = w.join(removed.select("_row"), on="_row", how="anti").sort("_pos")
    kept_rows = kept["_row"].to_numpy()
    kept_rep = kept["_rep"].to_numpy()

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
    if claims is not None:
        for k in ("same_id", "same_content", "near"):
            counts[f"removed_{k}_indexed"] = int(by_kind.get(f"{k}_indexed", 0))
        counts |= claims.counts
    return DedupResult(
        kept_rows,
        removed,
        clusters,
        edges,
        oversized,
        counts,
        sig[kept_rep],
        nshingles[kept_rep].astype(np.int32),
    )

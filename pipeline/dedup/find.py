"""Exact then near duplicates of a table of items: the dedup stage's pure part.

See stage.py for the method. The work is split so that it runs in bounded memory: scan.py
reads the items batch by batch (keeping rank values and content hashes) and writes
shingle sets and band keys to the working files (store.py); `find` then groups, bands one
band at a time and verifies candidates a chunk at a time, reading from those files only the
rows it needs. `find_duplicates` is the same over an in-memory frame (tests, benches).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numba as nb
import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.arrays import runs
from pipeline.config import Config, DedupConfig, RunConfig
from pipeline.dedup import clusters as C
from pipeline.dedup import lsh
from pipeline.dedup.index import Index, Query, best, match_query
from pipeline.dedup.lsh import p_candidate
from pipeline.dedup.pairs import EDGE_SCHEMA, Graph, verify
from pipeline.dedup.scan import (
    collect,
    content_hash,
    exact_groups,
    frame_reader,
    needed_columns,
    rank_columns,
    rank_order,
    rows_schema,
    scan,
)
from pipeline.dedup.store import SetReader, Sets, Store
from pipeline.memory import release

__all__ = ["DedupResult", "find", "find_duplicates", "needed_columns", "scan_floor"]


def _band_here(band: Callable[..., lsh.Candidates], *_: Any) -> tuple[lsh.Candidates, None]:
    return band(), None


def _read_here(sets: Sets, rows: np.ndarray | None) -> SetReader:
    return sets


@dataclass(frozen=True)
class Placement:
    """Where find's banding, verification and clustering run; the stage picks it from
    run.executor (dedup/stage.py placement), so this module reads no config of it."""

    run: RunConfig | None = None  # verification's chunks go through its executor (None: here)
    # (band, keys_of, idx, d) -> (candidates, the pairs left elsewhere or None)
    candidates: Callable[..., tuple[lsh.Candidates, Any]] = _band_here
    # (elsewhere, sets, rows, d, order, extra, ids_of) -> Graph: those pairs, where they lie
    graph: Callable[..., Graph] | None = None
    # (sets, store rows or None for all) -> what verification's tasks read those rows from
    sets: Callable[[Sets, np.ndarray | None], SetReader] = _read_here


def scan_floor(d: DedupConfig) -> float:
    """Estimated J at which a pair in an oversized bucket becomes a candidate (lsh.py)."""
    return lsh.scan_floor(d.threshold)


KINDS = [  # clusters.parquet's kind, by code (_frames)
    "keeper",
    "same_id_indexed",
    "same_content_indexed",
    "near_indexed",
    "near",
    "same_id",
    "same_content",
]


@dataclass
class DedupResult:
    kept_rows: np.ndarray  # input row numbers of kept items, in output order
    removed: pl.DataFrame  # _row, keeper_id, j, kind (output order)
    clusters: pl.DataFrame  # CLUSTER_SCHEMA
    edges: pl.DataFrame | Iterator[pa.Table]  # EDGE_SCHEMA (find: a stream, read once)
    oversized: pl.DataFrame  # OVERSIZED_SCHEMA
    counts: dict[str, Any]
    # find_duplicates only (the stage reads them from its working files): the kept rows'
    # signatures, in output order, and their shingle set sizes
    kept_sig: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.uint32))
    kept_shingles: np.ndarray = field(default_factory=lambda: np.empty(0, np.int32))

    def edge_tables(self) -> Iterator[pa.Table]:
        """The edges as tables: from Ray a block at a time (once), else the whole frame."""
        return iter([self.edges.to_arrow()]) if isinstance(self.edges, pl.DataFrame) else self.edges


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
    row_rep: np.ndarray,
    reps: pl.DataFrame,
    query: Query,
    d: DedupConfig,
    store: Store,
) -> Claims:
    """Which indexed item claims each representative: one whose exact group holds an indexed
    id, else the closest verified near duplicate (highest J, then the first index row).
    `row_rep`: each row's representative, by position."""
    m = match_query(index, query, d)
    row, j = best(m, reps.height)
    by_id = (
        pl.DataFrame({"_rep": row_rep})
        .with_columns(id=store.ids(np.arange(len(row_rep))))
        .join(pl.DataFrame({"id": index.ids, "_r": np.arange(len(index))}), on="id")
        .group_by("_rep")
        .agg(pl.col("_r").min())
    )
    if by_id.height:
        at = by_id["_rep"].to_numpy()
        row[at], j[at] = by_id["_r"].to_numpy(), 1.0
    hit = np.flatnonzero(row >= 0)
    same = np.zeros(reps.height, dtype=bool)
    if len(hit):  # same text as the indexed item: compared by content hash, as exact groups
        u, inv = np.unique(row[hit], return_inverse=True)
        text = pl.from_arrow(index.take(u, index.fields))
        assert isinstance(text, pl.DataFrame)
        theirs = content_hash(text, index.fields)[inv.reshape(-1)]
        mine = reps[hit].select("_h0", "_h1")
        same[hit] = ((mine["_h0"] == theirs["_h0"]) & (mine["_h1"] == theirs["_h1"])).to_numpy()
    counts = {f"index_{k}": v for k, v in m.counts.items()}
    counts |= {"index_items": len(index), "index_keepers": len(np.unique(row[hit]))}
    return Claims(row, j, same, counts)


def find(
    w: pl.DataFrame,
    store: Store,
    d: DedupConfig,
    index: Index | None = None,
    where: Placement = Placement(),
) -> DedupResult:
    """Exact then near duplicates of the rows scan() wrote to `store`, grouped by
    exact_groups (`w`); the input's row order is ignored.

    With an `index` (earlier runs' kept items), a row whose exact group holds an indexed id,
    or whose representative is a verified near duplicate of an indexed item, is removed with
    that item as keeper (kinds *_indexed); indexed items rank before every row, so they are
    never removed. `where` says where banding, verification and clustering run: on Ray
    (ray_pairs' candidates and graph), past d.driver_edges candidate pairs the pairs never
    come here: verification, components and stars run where they lie; the result is the same.
    """
    release()
    n = w.height
    rank_cols = rank_columns(d)[0]
    group = w["_group"].to_numpy()
    # Representative of an exact group: its best-ranked row (so a cluster's keeper is one).
    # Most groups are one row, their own representative: only the others are ranked.
    multi = np.flatnonzero(np.bincount(group, minlength=n)[group] > 1)
    by_group = multi[rank_order(w[multi], d, first=group[multi])]
    starts = np.ones(len(by_group), dtype=bool)
    starts[1:] = group[by_group[1:]] != group[by_group[:-1]]
    is_rep = np.ones(n, dtype=bool)
    is_rep[multi] = False
    is_rep[by_group[starts]] = True
    rep_at = np.flatnonzero(is_rep)  # the representatives' positions
    del multi, by_group, starts, is_rep
    nrep = len(rep_at)
    rep_index = np.full(n, -1, dtype=np.int64)
    rep_index[group[rep_at]] = np.arange(nrep)
    row_rep = rep_index[group]  # per position: its representative
    del group, rep_index
    blank = w["_blank"].to_numpy()[rep_at]
    reps = w.select("_row", *rank_cols, *(("_h0", "_h1") if index is not None else ()))[rep_at]
    del rep_at
    # What the outputs need of the rows (_frames), by position, on disk: their input rows and
    # rank values (the other columns freed first). In memory only each row's representative.
    w = w.select("_row", *rank_cols[:-1])
    release()
    store.put_frame("rows", w)
    del w
    release()
    rep_row = reps["_row"].to_numpy().astype(np.int64)
    nshingles = np.diff(store.offsets)[rep_row]
    eligible = np.flatnonzero((nshingles > 0) & ~blank)
    del nshingles, blank
    rep_pos = reps["_pos"].to_numpy()

    def ids_of(nodes: np.ndarray) -> pl.Series:  # the ids of representatives, from the store
        return store.ids(rep_pos[nodes])

    query = Query(
        eligible,
        store.band_keys(rep_row[eligible]),
        lambda items: store.sig(rep_row[items]),
        lambda items: store.shingles(rep_row[items]),
        (lambda items: store.changes(rep_row[items])) if store.has_change else None,
    )
    claims = _claims(index, row_rep, reps, query, d, store) if index is not None else None

    band = partial(
        lsh.banded,
        query.keys,
        query.sigs,
        eligible,
        d.bands,
        d.rows,
        d.bucket_cap,
        d.num_perm,
        threads=nb.get_num_threads(),
        scan_floor=scan_floor(d),
        max_bucket=d.max_bucket,
    )
    order = rank_order(reps, d).astype(np.int64)
    del reps  # (its rows and positions stay, as arrays)
    cand, elsewhere = where.candidates(band, query.keys, eligible, d)
    no_shingles = nrep - len(eligible)
    del band, query, eligible
    inodes = np.empty(0, np.int64)  # index rows that claim a representative: nodes nrep+k
    extra = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))
    if claims is not None:  # ranked first, each joined only to the representatives it claims
        at = np.flatnonzero(claims.row >= 0)
        inodes, local = np.unique(claims.row[at], return_inverse=True)
        extra = (at.astype(np.int64), nrep + local.reshape(-1).astype(np.int64), claims.j[at])
        order = np.concatenate([nrep + np.arange(len(inodes)), order])
    if elsewhere is not None and where.graph is not None:  # past d.driver_edges pairs
        g = where.graph(elsewhere, where.sets(store.sets(), None), rep_row, d, order, extra, ids_of)
    else:
        g = _graph(store, rep_row, cand, d, order, extra, ids_of, where)
    keeper_rep, j_rep, comp_rep = g.keeper, g.j, g.comp
    del order, extra
    release()
    removed, clusters, n_clusters, comp_count, kept_rows = _frames(
        row_rep, (rep_row, rep_pos), claims, index, inodes, (keeper_rep, j_rep, comp_rep), d, store
    )
    shown = [row[row >= 0] for row in cand.big_sample]
    names = ids_of(np.concatenate(shown)).to_list() if shown else []
    ends = np.cumsum([len(row) for row in shown], dtype=np.int64)
    samples = [names[e - len(row) : e] for row, e in zip(shown, ends, strict=True)]
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
        "no_shingles": int(no_shingles),
        "clusters": n_clusters,
        "components": comp_count,
        **g.counts,
        "band_pairs": int(cand.raw_pairs),
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
    return DedupResult(kept_rows, removed, clusters, g.edges, oversized, counts)


def _graph(
    store: Store,
    rows: np.ndarray,
    cand: lsh.Candidates,
    d: DedupConfig,
    order: np.ndarray,
    extra: tuple[np.ndarray, np.ndarray, np.ndarray],
    ids_of: Callable[[np.ndarray], pl.Series],
    where: Placement,
) -> Graph:
    """ray_pairs.graph on the driver: the candidates verified (on the run's executor),
    stars and components of those at or above the threshold and of `extra`."""
    sets = where.sets(store.sets(), np.unique(np.concatenate([rows[cand.a], rows[cand.b]])))
    exact_j, est_j, change_j = verify(sets, rows, cand.a, cand.b, where.run)
    del sets
    keep_edge = exact_j >= min(d.edge_floor, d.threshold)
    ends = ids_of(np.concatenate([cand.a[keep_edge], cand.b[keep_edge]]))
    m = int(keep_edge.sum())
    edges = pa.table(
        {
            "a": ends.slice(0, m).to_arrow(),
            "b": ends.slice(m).to_arrow(),
            "est_j": est_j[keep_edge],
            "exact_j": exact_j[keep_edge],
            "change_j": change_j[keep_edge],
        }
    )
    at = exact_j >= d.threshold
    near = at & (change_j >= d.change_threshold)
    na, nb_ = np.concatenate([cand.a[near], extra[0]]), np.concatenate([cand.b[near], extra[1]])
    nj = np.concatenate([exact_j[near], extra[2]])
    keeper, jk = C.stars(order, na, nb_, nj)
    counts = {
        "candidate_pairs": len(cand.a),
        "edges": edges.num_rows,
        "near_edges": int(near.sum()),
        "near_other_change": int((at & ~near).sum()),
        "kept_pairs_above_threshold": int(((keeper[na] == na) & (keeper[nb_] == nb_)).sum()),
    }
    return Graph(keeper, jk, C.components(len(order), na, nb_), counts, iter([edges]))


def _frames(
    row_rep: np.ndarray,
    reps: tuple[np.ndarray, np.ndarray],
    claims: Claims | None,
    index: Index | None,
    inodes: np.ndarray,
    stars: tuple[np.ndarray, np.ndarray, np.ndarray],
    d: DedupConfig,
    store: Store,
) -> tuple[pl.DataFrame, pl.DataFrame, int, int, np.ndarray]:
    """(removed, clusters, clusters of two rows or more, components, kept rows) from the
    stars of the representatives, spread to every row through its representative
    (`row_rep`, by position); the ids, input rows and rank values of the rows in a cluster
    and the ids of their representatives read from `store`. Arrays of the rows in a
    cluster, not a frame: windows and joins over a frame of them held several copies of
    it."""
    keeper_rep, j_rep, comp_rep = stars
    rep_row, rep_pos = reps  # each representative's input row and position
    nrep = len(rep_row)
    # Rows in a component of two or more: every star member, and keepers whose component
    # holds other stars (export keeps a component in one split); and rows an indexed item
    # claimed (their keeper is in an earlier run). Only they are named in the outputs.
    # Counted per representative (its rows), not per row: arrays of the representatives.
    # (index rows, nodes nrep on, are keepers only: their own entries are left out)
    rows_of = np.bincount(row_rep, minlength=nrep)
    in_comp = np.bincount(comp_rep[:nrep], weights=rows_of, minlength=nrep)
    named = (in_comp[comp_rep[:nrep]] > 1) | (keeper_rep[:nrep] >= nrep)
    del in_comp
    at = np.flatnonzero(named[row_rep])
    del named
    size_of = np.bincount(keeper_rep[:nrep], weights=rows_of)  # per star (float: no copy)
    del rows_of
    at_rep = row_rep[at]
    mcl, mcomp = keeper_rep[at_rep], comp_rep[at_rep]
    size = size_of[mcl].astype(np.int64)
    del size_of
    m = store.take("rows", at).with_columns(_pos=pl.Series(at, dtype=pl.Int64))
    o = rank_order(m, d, first=mcl)  # by cluster, each best-ranked first
    mrow, mrep = m["_row"].to_numpy()[o], at_rep[o]
    pos, mcl, mcomp, size = at[o], mcl[o], mcomp[o], size[o]
    del m, at, at_rep, o
    # the rows' ids and their representatives', in one read of the store's batches
    named_ids = store.ids(np.concatenate([pos, rep_pos[mrep]]))
    ids, rep_ids = named_ids.slice(0, len(pos)), named_ids.slice(len(pos))
    del named_ids
    release()  # (the Arrow batches they were read from)
    by_index = mcl >= nrep
    starts, run = runs(mcl)
    first = starts[run]  # each row's cluster's first row
    del starts, run
    is_keeper = (first == np.arange(len(pos))) & ~by_index
    keeper_id = ids.gather(first)
    isame = np.zeros(len(pos), dtype=bool)
    if index is not None and claims is not None and len(inodes):
        ikeep = index.ids.gather(inodes[np.where(by_index, mcl - nrep, 0)])
        keeper_id = ikeep.zip_with(pl.Series(by_index), keeper_id)
        isame = claims.same[mrep]
    same_id = (ids == keeper_id).to_numpy()
    code = np.select(
        [is_keeper, by_index & same_id, by_index & isame, by_index, mrep != mcl, same_id],
        [0, 1, 2, 3, 4, 5],
        6,
    )
    kind = pl.Series("kind", KINDS).gather(code)
    j = np.where(mrep == mcl, 1.0, j_rep[mrep])
    # clusters numbered by their first row's position, components by their smallest one
    cluster_id = np.unique(pos[first], return_inverse=True)[1].reshape(-1).astype(np.int64)
    del first
    comps, within = np.unique(mcomp, return_inverse=True)
    within = within.reshape(-1)
    smallest = np.full(len(comps), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(smallest, within, pos)
    component_id = np.unique(smallest[within], return_inverse=True)[1].reshape(-1)
    component_id = component_id.astype(np.int64)
    out = np.lexsort((pos, ~is_keeper, cluster_id))  # keeper first, then by position
    clusters = pl.DataFrame(
        {
            "id": ids.gather(out),
            "cluster_id": cluster_id[out],
            "component_id": component_id[out],
            "size": size[out],
            "is_keeper": is_keeper[out],
            "keeper_id": keeper_id.gather(out),
            "j_to_keeper": j[out],
            "kind": kind.gather(out),
            "exact_of": rep_ids.gather(out),
        }
    )
    del ids, rep_ids
    gone = np.flatnonzero(~is_keeper)
    gone = gone[np.argsort(pos[gone], kind="stable")]  # in output order
    removed = pl.DataFrame(
        {
            "_row": mrow[gone],
            "keeper_id": keeper_id.gather(gone),
            "j": j[gone],
            "kind": kind.gather(gone),
        }
    )
    del keeper_id, kind
    n_clusters = len(np.unique(cluster_id[size > 1]))
    # A row that is not its exact group's representative is removed (same id, same content),
    # so the kept rows are the representatives not removed, already in position order (the
    # output order); a kept row's own signature is the one the index needs.
    is_gone = np.zeros(len(row_rep), dtype=bool)
    is_gone[mrow[gone]] = True
    kept_rows = rep_row[~is_gone[rep_row]]
    assert len(kept_rows) + removed.height == len(row_rep)  # each row kept or removed
    return removed, clusters, n_clusters, len(comps), kept_rows


def warm(cfg: Config) -> None:
    """Compiles banding, verification and clustering while scan.warm compiles the shingle
    kernels: find over sets made up in their place (the kernels see the types scan_batch
    makes, not its hashes): items 0 and 1 near duplicates (one band in common, sets 3 of 4
    alike), 2 and 3 exact ones, 4 and 5 neither."""
    d = cfg.dedup
    sets = [[1, 2, 3, 4], [1, 2, 3, 5], [6, 7], [6, 7], [8, 9, 10], [11]]
    offsets = np.cumsum([0] + [len(x) for x in sets], dtype=np.int64)
    values = np.array([v for x in sets for v in x], dtype=np.uint32)
    shingles = pa.LargeListArray.from_arrays(offsets, values)
    keys = np.arange(len(sets) * d.bands, dtype=np.uint64).reshape(len(sets), d.bands)
    keys[1, 0] = keys[0, 0]
    table = {
        "shingles": shingles,
        "band_keys": pa.FixedSizeListArray.from_arrays(keys.ravel(), d.bands),
    }
    if d.checks_change:
        table["change"] = shingles
    h = np.array([0, 1, 2, 2, 4, 5], dtype=np.uint64)
    schema = rows_schema(d)
    rows = pl.DataFrame(
        {c: [0] * len(sets) for c in schema if c.startswith("_rank")}
        | {"_blank": [False] * len(sets), "_h0": h, "_h1": h},
        schema=schema,
    )
    ids = [f"{k:024x}" for k in range(len(sets))]
    given = pl.DataFrame({"id": ids, "source": ["warm"] * len(sets), "source_ref": ids})
    with tempfile.TemporaryDirectory(prefix="dedup-warm-") as tmp:
        store = Store(Path(tmp), d.num_perm, d.seed, d.bands, d.rows, d.checks_change)
        keyed = collect([({"rows": rows, "sets": pa.table(table)}, len(sets))], d, store)
        res = find(exact_groups(keyed, d, frame_reader(given), store), store, d)
        store.sig(res.kept_rows)
        for _ in res.edge_tables():
            pass


def find_duplicates(
    df: pl.DataFrame,
    d: DedupConfig,
    advance: Callable[[int], None] | None = None,
    index: Index | None = None,
    work: Path | None = None,
) -> DedupResult:
    """find over the rows of df (item columns; row order is ignored), with its working files
    in a temp folder (under `work` if given); the result also holds the kept rows'
    signatures and shingle counts."""
    with tempfile.TemporaryDirectory(prefix="dedup-", dir=work) as tmp:
        store = Store(Path(tmp), d.num_perm, d.seed, d.bands, d.rows, d.checks_change)
        batches = (df.slice(s, d.batch_size) for s in range(0, df.height, d.batch_size))
        keys = scan(batches, d, store, advance)  # (df is the caller's: nothing to free early)
        res = find(exact_groups(keys, d, frame_reader(df), store), store, d, index)
        res.kept_sig = store.sig(res.kept_rows)
        res.kept_shingles = store.counts()[res.kept_rows]
        res.edges = pl.DataFrame(pa.concat_tables(res.edge_tables()).cast(EDGE_SCHEMA))
    return res

"""Candidate pairs and verified edges that never gather on the driver (run.executor = "ray").

Why: the driver holds 16 bytes per candidate pair, and as much again for their J, which at
tens of millions of pairs is gigabytes on one machine. Past `dedup.driver_edges` pairs they
stay in Ray's object store from the band shuffle through verification to the clustering:

1. ray_bands makes the pairs of the buckets within the cap (a dataset of `p` = lo << 32 | hi,
   repeats across bands included); lsh.banded scans the big buckets on the driver (one
   bucket's signatures at a time) and each bucket's pairs are put in the object store as
   they are found (its `sink`).
2. No more pairs than driver_edges: they come to the driver, and find goes on as locally
   (small corpora pay for no more shuffles).
3. Else the pairs are hash-partitioned on `p`, so a pair found in several bands meets its
   repeats; each partition keeps its distinct pairs and verifies them as pairs.verify's
   chunks do (exact and estimated J, reading only their rows' shingle sets, from the blocks
   of the stage's working files that tasks on the driver's node put in the object store:
   ray_sets.py).
4. The edges at or above the threshold go to ray_graph.stars_components as a dataset;
   keepers, J to keeper and components come back per node (per item: the driver holds those).
5. edges.parquet: the edges at or above edge_floor, sorted on `p` by Ray (range partitions),
   come to the driver one block at a time; the driver puts the ids on and the stage writes
   them, so the file is the local one byte for byte.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.arrays import sorted_unique
from pipeline.dedup import lsh
from pipeline.dedup.pairs import VERIFY_CHUNK, Graph, jaccards
from pipeline.dedup.ray_bands import pair_arrays, partitions, ray_bucket_data
from pipeline.dedup.ray_graph import stars_components, total
from pipeline.dedup.store import SetReader
from pipeline.executors.ray import ensure_ray

if TYPE_CHECKING:
    from pipeline.config import DedupConfig, RunConfig

LOW = np.uint64(0xFFFFFFFF)
SINK_ROWS = 1 << 20  # big buckets' pairs put on Ray at once (8 MB)


@dataclass
class OnRay:
    """Candidate pairs left on Ray: a dataset of `p` (repeats included) and its row count."""

    pairs: Any
    raw: int
    run: RunConfig


def candidates(
    banded: Callable[..., lsh.Candidates],
    keys_of: Callable[[int], np.ndarray],
    idx: np.ndarray,
    d: DedupConfig,
    run: RunConfig,
) -> tuple[lsh.Candidates, OnRay | None]:
    """lsh.banded's Candidates with the buckets made on Ray (`banded`: lsh.banded with
    every argument but made= and sink=). Past d.driver_edges pairs (repeats counted) the
    pairs stay on Ray: Candidates.a and .b are then empty and OnRay holds them."""
    pairs, big, n = ray_bucket_data(keys_of, idx, d.bands, d.bucket_cap, run=run)
    refs: list[Any] = []
    held: list[np.ndarray] = []  # big buckets' pairs, put on Ray SINK_ROWS at a time
    lock = threading.Lock()

    def put() -> None:
        refs.append(ensure_ray(run).put(pa.table({"p": np.concatenate(held)})))
        held.clear()

    def sink(p: np.ndarray) -> None:  # called from banded's threads
        with lock:
            held.append(p)
            if sum(len(h) for h in held) >= SINK_ROWS:
                put()

    cand = banded(made=([], big), sink=sink)
    if sum(len(h) for h in held):
        put()
    cand.raw_pairs = n + int(cand.big_found.sum())
    every = [*(pairs or []), *refs]
    if cand.raw_pairs > d.driver_edges:
        import ray.data as rd

        return cand, OnRay(rd.from_arrow_refs(every) if every else None, cand.raw_pairs, run)
    parts = pair_arrays(every)
    uniq = sorted_unique(np.concatenate(parts) if parts else np.empty(0, np.uint64))
    cand.a, cand.b = (uniq >> np.uint64(32)).astype(np.int64), (uniq & LOW).astype(np.int64)
    return cand, None


def graph(
    on: OnRay,
    sets: SetReader,
    rows: np.ndarray,
    d: DedupConfig,
    order: np.ndarray,
    extra: tuple[np.ndarray, np.ndarray, np.ndarray],
    ids_of: Callable[[np.ndarray], pl.Series],
) -> Graph:
    """Verification, stars and components of on.pairs on Ray (steps 3-5 of the module
    docstring). `rows`: the store row of each item; `order`: the nodes best-ranked first;
    `extra`: edges (a, b, j) joined to the near edges (an index's claims, nodes past the
    items)."""
    ray = ensure_ray(on.run)
    import ray.data as rd

    refs = (ray.put(sets), ray.put(rows))
    verified = (
        on.pairs.repartition(partitions(ray, on.raw), keys=["p"])
        .map_batches(partial(_verify, refs=refs), batch_format="pyarrow", batch_size=None)
        .materialize()
    )
    floor = min(d.edge_floor, d.threshold)
    kept = verified.map_batches(partial(_at_least, floor=floor), batch_format="numpy")
    kept = kept.materialize()
    at = (d.threshold, d.change_threshold)
    near = kept.map_batches(partial(_near, at=at), batch_format="numpy").materialize()
    counts = {"candidate_pairs": verified.count(), "edges": kept.count()}
    counts["near_edges"] = near.count()
    other = kept.map_batches(partial(_other_change, at=at), batch_format="numpy")
    counts["near_other_change"] = total(other, "n") if counts["edges"] else 0
    m = counts["near_edges"] + len(extra[0])
    if len(extra[0]):
        a, b, j = extra
        joined = pa.table({"a": a, "b": b, "j": j, "k": np.arange(len(a), dtype=np.uint64)})
        near = near.union(rd.from_arrow(joined))
    keeper, jk, comp = stars_components(order, near, m, len(order), on.run)
    kept_pairs = 0
    if m:
        by_keepers = near.map_batches(partial(_kept, ref=ray.put(keeper)), batch_format="numpy")
        kept_pairs = total(by_keepers, "kept")
    counts["kept_pairs_above_threshold"] = kept_pairs
    return Graph(keeper, jk, comp, counts, _edge_tables(kept, counts["edges"], ids_of))


def _verify(t: pa.Table, refs: tuple[Any, Any]) -> pa.Table:
    """A partition's distinct pairs (every repeat of a pair is in it), verified."""
    import ray

    sets, rows = ray.get(refs[0]), ray.get(refs[1])
    p = sorted_unique(np.array(t["p"].to_numpy()))  # a copy: sorted in place
    a, b = (p >> np.uint64(32)).astype(np.int64), (p & LOW).astype(np.int64)
    exact, est, change = (np.empty(len(p), dtype=np.float64) for _ in range(3))
    for s in range(0, len(p), VERIFY_CHUNK):
        e = s + VERIFY_CHUNK
        exact[s:e], est[s:e], change[s:e] = jaccards(sets, rows, a[s:e], b[s:e])
    return pa.table({"p": p, "est": est, "exact": exact, "change": change})


def _at_least(batch: dict[str, np.ndarray], floor: float) -> dict[str, np.ndarray]:
    keep = batch["exact"] >= floor
    return {k: v[keep] for k, v in batch.items()}


def _near(batch: dict[str, np.ndarray], at: tuple[float, float]) -> dict[str, np.ndarray]:
    """The edges at or above the threshold that make the same change (change J at or above
    the change threshold) as ray_graph's (a, b, j, k: p, their order)."""
    keep = (batch["exact"] >= at[0]) & (batch["change"] >= at[1])
    p = batch["p"][keep]
    a, b = (p >> np.uint64(32)).astype(np.int64), (p & LOW).astype(np.int64)
    return {"a": a, "b": b, "j": batch["exact"][keep], "k": p}


def _other_change(batch: dict[str, np.ndarray], at: tuple[float, float]) -> dict[str, np.ndarray]:
    """How many edges are at or above the threshold but make another change."""
    n = int(((batch["exact"] >= at[0]) & (batch["change"] < at[1])).sum())
    return {"n": np.array([n])}


def _kept(batch: dict[str, np.ndarray], ref: Any) -> dict[str, np.ndarray]:
    """How many of the edges join two keepers."""
    import ray

    keeper = ray.get(ref)
    a, b = batch["a"], batch["b"]
    return {"kept": np.array([int(((keeper[a] == a) & (keeper[b] == b)).sum())])}


def _edge_tables(
    kept: Any, n: int, ids_of: Callable[[np.ndarray], pl.Series]
) -> Iterator[pa.Table]:
    """edges.parquet's rows in (a, b) order: sorted on Ray, a block at a time here."""
    if not n:  # (Ray cannot sort a dataset without rows)
        return
    for t in kept.sort("p").iter_batches(batch_format="numpy", batch_size=None):
        p = t["p"]
        ends = ids_of(np.concatenate([p >> np.uint64(32), p & LOW]).astype(np.int64))
        yield pa.table(
            {
                "a": ends.slice(0, len(p)).to_arrow(),
                "b": ends.slice(len(p)).to_arrow(),
                "est_j": t["est"],
                "exact_j": t["exact"],
                "change_j": t["change"],
            }
        )

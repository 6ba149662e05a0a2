"""Connected components and ranked-keeper stars of the near edges, on Ray Data.

Why: past `dedup.driver_edges` candidate pairs, clusters.components and clusters.stars would
hold every edge in the driver and walk them on one core. With run.executor = "ray" that
graph work runs on the cluster instead (ray_pairs.py); the result is identical, so outputs
stay byte-identical.

Method. The edges (a, b, j, k = the edge's original order) are a Ray dataset, made on Ray
(ray_pairs.py).
Components: large-star / small-star (Kiveris et al., "Connected Components in MapReduce and
Beyond", SoCC 2014), rounds of Ray Data groupby over an edge dataset, as the Ray MinHash
dedups of Data-Juicer and NeMo Curator do. Large-star joins each larger neighbour of a node u
to m(u), the smallest of u and its neighbours; small-star joins a node and its smaller
neighbours to the smallest of those. They alternate until the graph is a forest of stars each
centred on its smallest node, which large-star checks locally as it goes (no node has both a
smaller neighbour and another neighbour): each node's label is then its centre, the smallest
node of its component, as clusters.components gives. A group is a bucket of nodes
(node % buckets), not one node: one call does a bucket's nodes with vectorised numpy.
Stars: a star never crosses a component, so the edges, keyed by their component (the labels
broadcast through the object store) with their nodes' rank positions in `order`, are grouped
by component bucket (a component's walk is sequential: one task does it); each group runs
clusters.stars on its components relabelled locally, nodes in global rank order, edges in
their original order (of parallel edges, a keeper claims by the first). Nodes without edges
are their own component and keeper (j 1.0).
"""

from __future__ import annotations

import math
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.dedup import clusters as C
from pipeline.executors.ray import ensure_ray

if TYPE_CHECKING:
    from pipeline.config import RunConfig

GROUP_EDGES = 1 << 20  # edge rows (each edge twice) per bucket of a round, about

Batch = dict[str, np.ndarray]


def _runs(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start of each run of equal values of sorted x, run number of each element)."""
    first = np.ones(len(x), dtype=bool)
    first[1:] = x[1:] != x[:-1]
    return np.flatnonzero(first), np.cumsum(first) - 1


def _pairs(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct pairs (x, y), sorted by x then y."""
    o = np.lexsort((y, x))
    x, y = x[o], y[o]
    keep = np.ones(len(x), dtype=bool)
    keep[1:] = (x[1:] != x[:-1]) | (y[1:] != y[:-1])
    return x[keep], y[keep]


def _both_ways(batch: Batch, buckets: int) -> Batch:
    """Each edge (x, y) as (u, v) and (v, u), keyed by u's bucket; self-loops and large-star's
    count rows (x < 0) dropped."""
    x, y = batch["x"], batch["y"]
    keep = (x >= 0) & (x != y)
    u = np.concatenate([x[keep], y[keep]])
    return {"u": u, "v": np.concatenate([y[keep], x[keep]]), "g": u % buckets}


def _large_star(batch: Batch) -> Batch:
    """(v, m(u)) for each neighbour v > u of each node u of a bucket, and one row (-1, -1,
    bad) counting the nodes with a smaller neighbour and another one (0: the input is stars
    centred on their smallest node, and the output the same edges)."""
    u, v = _pairs(batch["u"], batch["v"])
    starts, run = _runs(u)
    m = np.minimum(u[starts], v[starts])  # v sorted within u: v[starts] is u's smallest
    bad = int(((v[starts] < u[starts]) & (np.diff(np.append(starts, len(u))) > 1)).sum())
    out = v > u
    x = np.append(v[out], -1)
    bad_col = np.zeros(len(x), dtype=np.int64)
    bad_col[-1] = bad
    return {"x": x, "y": np.append(m[run][out], -1), "bad": bad_col}


def _by_larger(batch: Batch, buckets: int) -> Batch:
    """Large-star's edges (x > y), keyed by x's bucket; the count rows dropped."""
    keep = batch["x"] >= 0
    x = batch["x"][keep]
    return {"x": x, "y": batch["y"][keep], "g": x % buckets}


def _small_star(batch: Batch) -> Batch:
    """For each node x of a bucket with smaller neighbours y: (x, m) and (y, m) for every y
    other than m, their smallest; every edge comes out as (larger, smaller)."""
    x, y = _pairs(batch["x"], batch["y"])
    starts, run = _runs(x)
    m = y[starts][run]
    other = y != m
    return {"x": np.concatenate([x[starts], y[other]]), "y": np.concatenate([y[starts], m[other]])}


def _by_component(batch: Batch, refs: tuple[Any, Any], buckets: int) -> Batch:
    """The edges with their component's bucket and their nodes' rank positions."""
    import ray

    comp, pos = ray.get(refs[0]), ray.get(refs[1])
    a, b = batch["a"], batch["b"]
    return {**batch, "g": comp[a] % buckets, "pa": pos[a], "pb": pos[b]}


def _stars(batch: Batch) -> Batch:
    """clusters.stars over a bucket's components: (node, keeper, j) of each node with edges."""
    o = np.argsort(batch["k"], kind="stable")  # the edges in their original order
    a, b = batch["a"][o], batch["b"][o]
    nodes, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    la, lb = inv[: len(a)], inv[len(a) :]
    pos = np.empty(len(nodes), dtype=np.int64)
    pos[la], pos[lb] = batch["pa"][o], batch["pb"][o]
    order = np.argsort(pos, kind="stable").astype(np.int64)
    keeper, jk = C.stars(order, la, lb, np.ascontiguousarray(batch["j"][o], dtype=np.float64))
    return {"node": nodes, "keeper": nodes[keeper], "j": jk}


def total(ds: Any, column: str) -> int:
    """The sum of an integer column: a sum per block, added here (Ray's Dataset.sum is a
    hash aggregate, seconds of start-up for one number)."""
    per_block = ds.select_columns([column]).map_batches(
        lambda t: {column: np.array([int(t[column].sum())])}, batch_format="numpy"
    )
    return sum(int(t[column].sum()) for t in per_block.iter_batches(batch_format="numpy"))


def _components(edges: Any, comp: np.ndarray, buckets: int) -> None:
    """comp[x] = the smallest node of x's component, by large-star / small-star rounds."""
    cur = edges.select_columns(["a", "b"]).rename_columns({"a": "x", "b": "y"})
    while True:
        large = (
            cur.map_batches(_both_ways, fn_kwargs={"buckets": buckets}, batch_format="numpy")
            .groupby("g", num_partitions=buckets)
            .map_groups(_large_star, batch_format="numpy")
            .materialize()
        )
        if not total(large, "bad"):  # stars centred on their smallest node: done
            break
        cur = (
            large.map_batches(_by_larger, fn_kwargs={"buckets": buckets}, batch_format="numpy")
            .groupby("g", num_partitions=buckets)
            .map_groups(_small_star, batch_format="numpy")
            .materialize()
        )
    for t in large.iter_batches(batch_format="numpy", batch_size=None):
        at = t["x"] >= 0
        comp[t["x"][at]] = t["y"][at]


def stars_components(
    order: np.ndarray, edges: Any, m: int, n: int, run: RunConfig, group_edges: int = GROUP_EDGES
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keeper, j_to_keeper, component) per node 0..n-1 of the `m` edges of a Ray dataset
    (a, b: int64 nodes, j, k: the edges' original order), which never come to the driver:
    the arrays of (*clusters.stars(order, a, b, j), clusters.components(n, a, b)); Ray is
    started from `run` if it is not running."""
    keeper = np.arange(n, dtype=np.int64)
    jk = np.ones(n, dtype=np.float64)
    comp = np.arange(n, dtype=np.int64)
    if m == 0:
        return keeper, jk, comp
    ray = ensure_ray(run)
    import ray.data as rd
    from ray.data.context import ShuffleStrategy

    buckets = max(2, math.ceil(2 * m / group_edges))
    # Sort-based shuffles: the hash shuffle starts its aggregator actors for every groupby
    # (seconds each), and these rounds are many and each one short.
    ctx = rd.DataContext.get_current()
    strategy, ctx.shuffle_strategy = ctx.shuffle_strategy, ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
    try:
        _components(edges, comp, buckets)
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n, dtype=np.int64)
        keyed = partial(_by_component, refs=(ray.put(comp), ray.put(pos)), buckets=buckets)
        stars = (
            edges.map_batches(keyed, batch_format="numpy")
            .groupby("g", num_partitions=buckets)
            .map_groups(_stars, batch_format="numpy")
        )
        for t in stars.iter_batches(batch_format="numpy", batch_size=None):
            keeper[t["node"]], jk[t["node"]] = t["keeper"], t["j"]
    finally:
        ctx.shuffle_strategy = strategy
    return keeper, jk, comp

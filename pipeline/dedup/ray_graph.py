"""Connected components and ranked-keeper stars of the near edges, on Ray.

Why: past `dedup.driver_edges` candidate pairs, clusters.components and clusters.stars would
hold every edge in the driver and walk them on one core. With run.executor = "ray" that
graph work runs on the cluster instead (ray_pairs.py); the result is identical, so outputs
stay byte-identical.

Method. The edges (a, b, j, k = the edge's original order) are a Ray dataset, made on Ray
(ray_pairs.py).
Components: large-star / small-star (Kiveris et al., "Connected Components in MapReduce and
Beyond", SoCC 2014), rounds of a groupby over the edges, as the Ray MinHash dedups of
Data-Juicer and NeMo Curator do; each groupby is plain Ray tasks (`_shuffle`: a task per
block cuts its rows by bucket, a task per bucket runs the step), not Ray Data's, whose every
execution cost seconds of planning here (144 s for a test graph of 13 rounds, now 8 s).
Large-star joins each larger neighbour of a node u to m(u), the smallest of u and its
neighbours; small-star joins a node and its smaller neighbours to the smallest of those.
They alternate until the graph is a forest of stars each centred on its smallest node, which
large-star checks locally as it goes (no node has both a smaller neighbour and another
neighbour): each node's label is then its centre, the smallest node of its component, as
clusters.components gives. A group is a bucket of nodes
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
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.arrays import runs
from pipeline.dedup import clusters as C
from pipeline.executors.ray import _count, _spent, ensure_ray, spread

if TYPE_CHECKING:
    from pipeline.config import RunConfig

GROUP_EDGES = 1 << 20  # edge rows (each edge twice) per bucket of a round, about

Batch = dict[str, np.ndarray]


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


def _edges_both_ways(batch: Batch, buckets: int) -> Batch:
    """_both_ways of the edge dataset's rows (a, b): the first round's input."""
    return _both_ways({"x": batch["a"], "y": batch["b"]}, buckets)


def _large_star(batch: Batch) -> Batch:
    """(v, m(u)) for each neighbour v > u of each node u of a bucket, and one row (-1, -1,
    bad) counting the nodes with a smaller neighbour and another one (0: the input is stars
    centred on their smallest node, and the output the same edges)."""
    u, v = _pairs(batch["u"], batch["v"])
    starts, run = runs(u)
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
    starts, run = runs(x)
    m = y[starts][run]
    other = y != m
    return {"x": np.concatenate([x[starts], y[other]]), "y": np.concatenate([y[starts], m[other]])}


def _by_component(batch: Batch, comp: np.ndarray, pos: np.ndarray, buckets: int) -> Batch:
    """The edges with their component's bucket and their nodes' rank positions."""
    a, b = batch["a"], batch["b"]
    return {**batch, "g": comp[a] % buckets, "pa": pos[a], "pb": pos[b]}


def _stars(batch: Batch) -> Batch:
    """clusters.stars over a bucket's components: (node, keeper, j) of each node with edges."""
    if not len(batch["k"]):
        return {"node": batch["a"], "keeper": batch["a"], "j": batch["j"]}
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


def _numpy(block: Any) -> Batch:
    """A block (an Arrow table of the edge dataset, or a Batch a round made) as a Batch."""
    if isinstance(block, dict):
        return block
    return {c: block[c].to_numpy() for c in block.column_names}


def _cut(block: Any, key: Callable[..., Batch], buckets: int, *args: Any) -> list[Any]:
    """A block's rows keyed by `key` (its column `g`: the bucket) and cut into one Batch per
    bucket; last, the task's CPU time and node."""
    t0 = time.process_time()
    keyed = key(_numpy(block), *args, buckets=buckets)
    g = keyed.pop("g")
    order = np.argsort(g, kind="stable")
    at = np.searchsorted(g[order], np.arange(buckets + 1))
    cut = [{c: v[order[at[i] : at[i + 1]]] for c, v in keyed.items()} for i in range(buckets)]
    return [*cut, _spent(t0)]


def _group(fn: Callable[[Batch], Batch], *pieces: Batch) -> tuple[Batch, dict[str, Any]]:
    """A bucket's pieces joined and fn run on them (as a Ray Data map_groups on one group
    would); the task's CPU time and node."""
    t0 = time.process_time()
    out = fn({c: np.concatenate([p[c] for p in pieces]) for c in pieces[0]})
    bad = int(out["bad"].sum()) if "bad" in out else 0  # large-star's count, read alone
    return out, {**_spent(t0), "bad": bad}


def _shuffle(
    ray: Any,
    blocks: list[Any],
    key: Callable[..., Batch],
    fn: Callable[[Batch], Batch],
    buckets: int,
    *args: Any,
) -> tuple[list[Any], int]:
    """fn over every bucket of the blocks' rows keyed by `key`, as plain Ray tasks (a task
    per block cuts, a task per bucket groups): the refs of fn's outputs, in bucket order,
    and the sum of their `bad` column (large-star's). Not Ray Data's groupby: each of its
    executions cost seconds of planning whatever its size, and components take rounds of
    two."""
    cut = spread(ray, _cut, num_returns=buckets + 1)
    group = spread(ray, _group, num_returns=2)
    pieces = [cut.remote(b, key, buckets, *args) for b in blocks]
    for p in pieces:  # the cutting tasks' CPU and node
        _count(ray.get(p[-1]))
    outs = [group.remote(fn, *[p[g] for p in pieces]) for g in range(buckets)]
    del pieces
    bad = 0
    for _, ref in outs:
        spent = ray.get(ref)
        _count(spent)
        bad += spent["bad"]
    return [out for out, _ in outs], bad


def _components(ray: Any, blocks: list[Any], comp: np.ndarray, buckets: int) -> None:
    """comp[x] = the smallest node of x's component, by large-star / small-star rounds."""
    cur, key = blocks, _edges_both_ways
    while True:
        large, bad = _shuffle(ray, cur, key, _large_star, buckets)
        key = _both_ways
        if not bad:  # stars centred on their smallest node: done
            break
        cur, _ = _shuffle(ray, large, _by_larger, _small_star, buckets)
    for t in ray.get(large):
        at = t["x"] >= 0
        comp[t["x"][at]] = t["y"][at]


def components(run: RunConfig, pieces: list[Any], n: int) -> np.ndarray:
    """The smallest node of each node 0..n-1's component under the edges (a, b) of `pieces`
    (whole tables left in the object store by by_range's tasks, executors.ray.Held): what
    clusters.components gives, by the rounds below (export's groups)."""
    comp = np.arange(n, dtype=np.int64)
    m = sum(p.rows for p in pieces)
    if m == 0:
        return comp
    ray = ensure_ray(run)
    assert all(p.start == 0 for p in pieces), "by_range's outputs are whole tables"
    _components(ray, [p.ref for p in pieces], comp, max(2, math.ceil(2 * m / GROUP_EDGES)))
    return comp


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
    buckets = max(2, math.ceil(2 * m / group_edges))
    blocks = edges.to_arrow_refs()  # the edges' blocks, left in the object store
    _components(ray, blocks, comp, buckets)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n, dtype=np.int64)
    refs = (ray.put(comp), ray.put(pos))
    for out in _shuffle(ray, blocks, _by_component, _stars, buckets, *refs)[0]:
        t = ray.get(out)
        keeper[t["node"]], jk[t["node"]] = t["keeper"], t["j"]
    return keeper, jk, comp

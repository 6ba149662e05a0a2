"""Components and ranked-keeper stars on Ray Data equal the driver's clusters.components/stars."""

from __future__ import annotations

import numpy as np

from pipeline.config import RunConfig
from pipeline.dedup import clusters as C


def _graph(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """(order, a, b, j, n): chains, stars, dense blobs and isolated nodes under shuffled
    labels, with parallel and reversed duplicate edges, self-loops and tied weights."""
    rng = np.random.default_rng(seed)
    n = 600
    label = rng.permutation(n)
    a: list[int] = []
    b: list[int] = []
    at = 0
    for size in (150, 70, 3, 2):  # chains: a long one needs several rounds
        a += range(at, at + size - 1)
        b += range(at + 1, at + size)
        at += size
    for size in (40, 9):  # stars around a middle node
        a += [at + size // 2] * (size - 1)
        b += [x for x in range(at, at + size) if x != at + size // 2]
        at += size
    for size in (60, 25):  # random blobs (maybe several components each)
        m = size * 2
        a += (at + rng.integers(0, size, m)).tolist()
        b += (at + rng.integers(0, size, m)).tolist()
        at += size
    assert at < n - 100  # the rest: isolated nodes
    k = rng.choice(len(a), 40)
    a += [b[x] for x in k[:20]] + [a[x] for x in k[20:]]  # reversed, then same-way parallels
    b += [a[x] for x in k[:20]] + [b[x] for x in k[20:]]
    a += [at + 5, 3]  # self-loops: an otherwise isolated node, a chain node
    b += [at + 5, 3]
    e = rng.permutation(len(a))
    aa, bb = label[np.array(a)[e]], label[np.array(b)[e]]
    j = rng.choice([0.8, 0.85, 0.9, 1.0], len(aa))  # ties between parallel edges' weights
    return rng.permutation(n).astype(np.int64), aa, bb, j, n


def ray_stars_components(order, a, b, j, n, run, chunk=1 << 20, group_edges=1 << 20):
    """ray_graph.stars_components of edges handed over as arrays (k: their index), in
    Arrow tables of `chunk` edges (the blocks of the Ray dataset)."""
    import pyarrow as pa
    import ray.data as rd

    from pipeline.dedup.ray_graph import stars_components

    tables = [
        pa.table(
            {
                "a": a[s : s + chunk].astype(np.int64),
                "b": b[s : s + chunk].astype(np.int64),
                "j": j[s : s + chunk].astype(np.float64),
                "k": np.arange(s, min(s + chunk, len(a)), dtype=np.int64),
            }
        )
        for s in range(0, len(a), chunk)
    ]
    edges = rd.from_arrow(tables) if tables else None
    return stars_components(order, edges, len(a), n, run, group_edges)


def test_ray_stars_and_components_equal_the_driver_ones(ray_local):
    # small blocks and many buckets (each round costs seconds of Ray: one graph, 2 CPUs)
    for seed, chunk, group_edges in ((1, 97, 64),):
        order, a, b, j, n = _graph(seed)
        comp = C.components(n, a, b)
        assert len(np.unique(comp)) > 100 and np.bincount(comp).max() >= 150
        keeper, jk, rcomp = ray_stars_components(order, a, b, j, n, RunConfig(), chunk, group_edges)
        want_keeper, want_j = C.stars(order, a, b, j)
        assert rcomp.tolist() == comp.tolist()
        assert keeper.tolist() == want_keeper.tolist()
        assert jk.tolist() == want_j.tolist()


def test_ray_graph_without_edges_or_with_self_loops_only(ray_local):
    order = np.array([2, 0, 3, 1], dtype=np.int64)
    none = np.empty(0, dtype=np.int64)
    for a in (none, np.array([1, 1, 3])):
        keeper, jk, comp = ray_stars_components(order, a, a, np.full(len(a), 0.9), 4, RunConfig())
        assert keeper.tolist() == comp.tolist() == [0, 1, 2, 3] and jk.tolist() == [1.0] * 4

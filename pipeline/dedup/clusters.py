"""Pair verification (exact Jaccard), ranked-keeper stars, connected components, keeper rank.

Clusters are stars, not components: walking items best-ranked first, an item nobody has
claimed becomes a keeper and claims every unclaimed item joined to it by a verified edge at
or above the threshold. So every removed item is within the threshold of its own keeper (a
component chains: A~B~C can remove C at J(A, C) = 0.36), and no two keepers share a verified
edge above the threshold (a keeper would have claimed the other). Components of the same
edges are kept beside the stars for export, which keeps a whole component in one split.

Components are labelled by their smallest member index, and indices are positions in the
(id, source, source_ref) order, so labels never depend on input order or edge order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numba as nb
import numpy as np
import polars as pl

from pipeline.jit import on_threads, use_kernel_cache

use_kernel_cache()  # before the first njit(cache=True) below

# Keys a keeper rank may use; "-key" sorts descending (largest first). Nulls always sort last.
RANK_KEYS = {
    "comment_len": lambda: pl.col("comment").str.len_chars(),
    "after_len": lambda: pl.col("after").str.len_chars(),
    "lines_changed": lambda: (
        pl.col("lines_removed").cast(pl.Int64) + pl.col("lines_added").cast(pl.Int64)
    ),
    "created_at": lambda: pl.col("created_at"),
    # folders in the path: of one edit made to several files at once, a copy nests deeper
    # (deno/lib/x.ts beside src/x.ts, vendor/y/x.go, docs/README.md)
    "path_depth": lambda: pl.col("path").str.count_matches("/"),
    "human": lambda: ~pl.col("author_is_bot"),
    "id": lambda: pl.col("id"),
}
RANK_COLUMNS = {
    "comment_len": ["comment"],
    "after_len": ["after"],
    "lines_changed": ["lines_removed", "lines_added"],
    "created_at": ["created_at"],
    "path_depth": ["path"],
    "human": ["author_is_bot"],
    "id": ["id"],
}
TIE_BREAK = ("id", "source", "source_ref")  # always appended: a total order over rows


@nb.njit(cache=True)
def _common(va, i, ie, vb, j, je, parts, per_part):
    """How many values the sorted unique runs va[i:ie] and vb[j:je] share; given per_part
    (not None), also counted per part (an element's part: its value mod parts) into it."""
    inter = 0
    while i < ie and j < je:
        x, y = va[i], vb[j]
        if x == y:
            inter += 1
            if per_part is not None:  # (pruned where it is None: nothing to keep)
                per_part[x % parts] += 1
            i += 1
            j += 1
        elif x < y:
            i += 1
        else:
            j += 1
    return inter


@nb.njit(cache=True)
def _jaccard(va, i, ie, vb, j, je, parts, empty):
    """|A & B| / |A | B| of the sorted unique runs va[i:ie] and vb[j:je], taken apart for each
    of `parts` parts (an element's part: its value mod parts; change sets have four, change.py)
    and the lowest returned; a part empty in A and B counts `empty`, one empty in one 0."""
    if parts == 1:  # shingle sets, every candidate pair: one merge, no counts to keep
        n = (ie - i) + (je - j)
        inter = _common(va, i, ie, vb, j, je, 1, None)
        return empty if n == 0 else inter / (n - inter)
    na, nb_, inter_p = (
        np.zeros(parts, np.int64),
        np.zeros(parts, np.int64),
        np.zeros(parts, np.int64),
    )
    for q in range(i, ie):
        na[va[q] % parts] += 1
    for q in range(j, je):
        nb_[vb[q] % parts] += 1
    _common(va, i, ie, vb, j, je, parts, inter_p)
    low = 1.0
    for p in range(parts):
        u = na[p] + nb_[p] - inter_p[p]
        low = min(low, empty if u == 0 else inter_p[p] / u)
    return low


def exact_jaccard(
    offsets: np.ndarray, values: np.ndarray, a: np.ndarray, b: np.ndarray, change: bool
) -> np.ndarray:
    """|A & B| / |A | B| over the sorted unique shingle sets of items a[k], b[k] (0 if one is
    empty or both are); with `change`, the sets are change sets and this is the lowest of
    their four parts' Jaccards (two edits that change nothing are the same change)."""
    out = np.zeros(len(a), dtype=np.float64)
    on_threads(_exact_rows, len(a), offsets, values, offsets, values, a, b, change, out)
    return out


def exact_jaccard_cross(
    oa: np.ndarray,
    va: np.ndarray,
    ob: np.ndarray,
    vb: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    change: bool,
) -> np.ndarray:
    """exact_jaccard of item a[k] of one CSR set (oa, va) and item b[k] of another (ob, vb)."""
    out = np.zeros(len(a), dtype=np.float64)
    on_threads(_exact_rows, len(a), oa, va, ob, vb, a, b, change, out)
    return out


@nb.njit(nogil=True, cache=True)
def _exact_rows(lo, hi, oa, va, ob, vb, a, b, change, out):
    parts, empty = (4, 1.0) if change else (1, 0.0)
    for k in range(lo, hi):
        x, y = a[k], b[k]
        out[k] = _jaccard(va, oa[x], oa[x + 1], vb, ob[y], ob[y + 1], parts, empty)


def est_jaccard(sig: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Share of equal MinHash slots: datasketch's MinHash.jaccard."""
    out = np.empty(len(a), dtype=np.float64)
    on_threads(_est_rows, len(a), sig, a, b, out)
    return out


@nb.njit(nogil=True, cache=True)
def _est_rows(lo, hi, sig, a, b, out):
    p = sig.shape[1]
    for k in range(lo, hi):
        eq = 0
        for s in range(p):
            if sig[a[k], s] == sig[b[k], s]:
                eq += 1
        out[k] = eq / p


@nb.njit(cache=True)
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@nb.njit(cache=True)
def components(n, a, b):
    """Label of each of n nodes under the edges (a[k], b[k]): the smallest node of its component."""
    parent = np.arange(n)
    for k in range(a.shape[0]):
        x, y = _find(parent, a[k]), _find(parent, b[k])
        if x < y:
            parent[y] = x
        elif y < x:
            parent[x] = y
    for i in range(n):
        parent[i] = _find(parent, i)
    return parent


def stars(
    order: np.ndarray, a: np.ndarray, b: np.ndarray, j: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(keeper, j_to_keeper) per node of a ranked-keeper star clustering.

    `order` lists every node (0..n-1) best-ranked first; (a[k], b[k], j[k]) are the verified
    edges at or above the threshold. A node claimed by nobody is its own keeper (j 1.0). Only
    the nodes with an edge are walked, in their rank order, over an adjacency of them alone:
    arrays of their number, not of every node's (at 10M items a few hundred MB less).
    """
    n = order.shape[0]
    keeper = np.arange(n, dtype=np.int64)
    jk = np.ones(n, dtype=np.float64)
    if not len(a):
        return keeper, jk
    nodes, ends = np.unique(np.concatenate([a, b]), return_inverse=True)
    ends = ends.reshape(-1).astype(np.int64)
    has = np.zeros(n, dtype=bool)
    has[nodes] = True
    walk = np.searchsorted(nodes, order[has[order]])  # the nodes with an edge, best first
    del has
    _stars(nodes, walk, ends[: len(a)], ends[len(a) :], np.asarray(j, np.float64), keeper, jk)
    return keeper, jk


@nb.njit(cache=True)
def _stars(nodes, walk, a, b, j, keeper, jk):
    """stars' walk over the nodes with an edge (local numbers: a node is nodes[i])."""
    k = nodes.shape[0]
    indptr = np.zeros(k + 1, dtype=np.int64)
    for e in range(a.shape[0]):
        indptr[a[e] + 1] += 1
        indptr[b[e] + 1] += 1
    for i in range(k):
        indptr[i + 1] += indptr[i]
    fill = indptr[:-1].copy()
    nbr = np.empty(2 * a.shape[0], dtype=np.int64)
    w = np.empty(2 * a.shape[0], dtype=np.float64)
    for e in range(a.shape[0]):
        nbr[fill[a[e]]] = b[e]
        w[fill[a[e]]] = j[e]
        fill[a[e]] += 1
        nbr[fill[b[e]]] = a[e]
        w[fill[b[e]]] = j[e]
        fill[b[e]] += 1
    claimed = np.zeros(k, dtype=np.bool_)
    for t in range(walk.shape[0]):
        x = walk[t]
        if claimed[x]:
            continue
        claimed[x] = True
        for e in range(indptr[x], indptr[x + 1]):
            y = nbr[e]
            if not claimed[y]:
                claimed[y] = True
                keeper[nodes[y]] = nodes[x]
                jk[nodes[y]] = w[e]


def stars_reference(
    order: Iterable[int], edges: Mapping[tuple[int, int], float]
) -> tuple[dict[int, int], dict[int, float]]:
    """The same clustering in plain Python over {(a, b): j}: the tests' oracle."""
    nbrs: dict[int, list[tuple[int, float]]] = {}
    for (x, y), jj in edges.items():
        nbrs.setdefault(x, []).append((y, jj))
        nbrs.setdefault(y, []).append((x, jj))
    keeper: dict[int, int] = {}
    jk: dict[int, float] = {}
    for x in order:
        if x in keeper:
            continue
        keeper[x], jk[x] = x, 1.0
        for y, jj in nbrs.get(x, []):
            if y not in keeper:
                keeper[y], jk[y] = x, jj
    return keeper, jk


def rank_exprs(keeper: list[str]) -> tuple[list[pl.Expr], list[bool]]:
    """Sort expressions and descending flags for a keeper rank like ["-comment_len", "id"]."""
    exprs: list[pl.Expr] = []
    desc: list[bool] = []
    for key in [*keeper, *TIE_BREAK]:
        name = key.lstrip("-")
        expr = RANK_KEYS[name]() if name in RANK_KEYS else pl.col(name)
        exprs.append(expr.alias(f"_rank{len(exprs)}"))
        desc.append(key.startswith("-"))
    return exprs, desc


def sort_best(df: pl.DataFrame, by: str, desc: list[bool]) -> pl.DataFrame:
    """df (with the `_rank*` columns of rank_exprs) sorted by group, best-ranked first."""
    cols = [by, *(f"_rank{k}" for k in range(len(desc)))]
    return df.sort(cols, descending=[False, *desc], nulls_last=True, maintain_order=True)


def best_first(df: pl.DataFrame, by: str, keeper: list[str]) -> pl.DataFrame:
    """df sorted by group `by`, then best-ranked first within each group."""
    exprs, desc = rank_exprs(keeper)
    out = sort_best(df.with_columns(exprs), by, desc)
    return out.drop(f"_rank{k}" for k in range(len(desc)))

"""Exact near-duplicate truth for the dedup benchmarks: every pair of shingle sets with exact
Jaccard >= t, by prefix filtering (not brute force), plus the brute force it is checked against.

Sets are CSR (offsets int64[N+1], sorted unique uint32 values per set), as
pipeline.dedup.shingles.shingle_sets makes them, so the truth is over the stage's own shingles.

Prefix filtering (AllPairs): rank every token by global frequency, rarest first. If
J(x, y) >= t then |x & y| >= t |x u y| >= t max(|x|, |y|), so x and y share a token among the
first |x| - ceil(t |x|) + 1 ranks of x and the first |y| - ceil(t |y|) + 1 ranks of y. An
inverted index of those prefixes gives, per set x, every earlier set y sharing a prefix token;
those with compatible sizes (t |x| <= |y| <= |x| / t) are verified with exact Jaccard on the
spot, so no candidate list is ever held. Nothing is estimated: the result is every pair >= t.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba as nb
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.dedup import clusters as C  # noqa: E402

EPS = 1e-9  # t * |x| is computed in floating point; an integer product must not round up


def codes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One uint64 per pair (a < b): a << 32 | b, for set operations on pair arrays."""
    return (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)


@nb.njit(cache=True)
def _jaccard(values, s0, e0, s1, e1):
    inter, i, j = 0, s0, s1
    while i < e0 and j < e1:
        if values[i] == values[j]:
            inter += 1
            i += 1
            j += 1
        elif values[i] < values[j]:
            i += 1
        else:
            j += 1
    return inter / ((e0 - s0) + (e1 - s1) - inter)


@nb.njit(parallel=True, cache=True)
def _sorted_ranks(offsets, ranks):
    for x in nb.prange(offsets.shape[0] - 1):
        ranks[offsets[x] : offsets[x + 1]].sort()


@nb.njit(cache=True)
def _probe(x, offsets, values, ranks, plen, inv_off, inv_set, t, seen, out_b, out_j):
    """Sets y < x sharing one of x's prefix tokens, of compatible size, with J >= t: into
    out_b / out_j; returns how many. seen[y] == x marks y as already looked at."""
    sx = offsets[x + 1] - offsets[x]
    w = 0
    for k in range(offsets[x], offsets[x] + plen[x]):
        tok = ranks[k]
        for m in range(inv_off[tok], inv_off[tok + 1]):
            y = inv_set[m]
            if y >= x:
                break  # lists are in set order
            if seen[y] == x:
                continue
            seen[y] = x
            sy = offsets[y + 1] - offsets[y]
            if sy < t * sx - 1e-9 or sx < t * sy - 1e-9:
                continue
            j = _jaccard(values, offsets[y], offsets[y + 1], offsets[x], offsets[x + 1])
            if j >= t:
                if w == out_b.shape[0]:
                    grown_b = np.empty(2 * w, out_b.dtype)
                    grown_j = np.empty(2 * w, out_j.dtype)
                    grown_b[:w], grown_j[:w] = out_b, out_j
                    out_b, out_j = grown_b, grown_j
                out_b[w] = y
                out_j[w] = j
                w += 1
    return w, out_b, out_j


@nb.njit(nogil=True, cache=True)
def _chunk(lo, hi, offsets, values, ranks, plen, inv_off, inv_set, t):
    """The pairs (y < x) found for the sets x in lo..hi-1, as (a, b, j)."""
    seen = np.full(offsets.shape[0] - 1, -1, np.int64)
    ca, cb, cj = np.empty(1024, np.int64), np.empty(1024, np.int64), np.empty(1024)
    buf_b, buf_j = np.empty(64, np.int64), np.empty(64)
    w = 0
    for x in range(lo, hi):
        k, buf_b, buf_j = _probe(
            x, offsets, values, ranks, plen, inv_off, inv_set, t, seen, buf_b, buf_j
        )
        if w + k > ca.shape[0]:
            size = 2 * (w + k)
            ga, gb, gj = np.empty(size, np.int64), np.empty(size, np.int64), np.empty(size)
            ga[:w], gb[:w], gj[:w] = ca[:w], cb[:w], cj[:w]
            ca, cb, cj = ga, gb, gj
        ca[w : w + k] = buf_b[:k]
        cb[w : w + k] = x
        cj[w : w + k] = buf_j[:k]
        w += k
    return ca[:w].copy(), cb[:w].copy(), cj[:w].copy()


def truth_pairs(
    offsets: np.ndarray, values: np.ndarray, t: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(a, b, j): every pair a < b of CSR sets with exact Jaccard j >= t, sorted by (a, b)."""
    n = len(offsets) - 1
    sizes = np.diff(offsets)
    uniq, inv, freq = np.unique(values, return_inverse=True, return_counts=True)
    rank_of = np.empty(len(uniq), np.int32)
    rank_of[np.lexsort((uniq, freq))] = np.arange(len(uniq), dtype=np.int32)  # rarest first
    ranks = rank_of[inv.reshape(-1)]
    del inv
    _sorted_ranks(offsets, ranks)
    plen = np.where(sizes > 0, sizes - np.ceil(t * sizes - EPS).astype(np.int64) + 1, 0)
    # inverted index of prefix tokens: token -> sets, in set order
    set_of = np.repeat(np.arange(n, dtype=np.int64), plen)
    pos = np.arange(len(set_of)) - np.repeat(np.cumsum(plen) - plen, plen)
    tok = ranks[np.repeat(offsets[:-1], plen) + pos]
    order = np.argsort(tok, kind="stable")  # stable: sets stay in order within a token
    inv_set = set_of[order]
    inv_off = np.zeros(len(uniq) + 1, np.int64)
    np.cumsum(np.bincount(tok, minlength=len(uniq)), out=inv_off[1:])
    bounds = np.linspace(0, n, min(n, 256) + 1).astype(np.int64).tolist()

    def one(c: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        lo, hi = bounds[c], bounds[c + 1]
        return _chunk(lo, hi, offsets, values, ranks, plen, inv_off, inv_set, t)

    with ThreadPoolExecutor(os.cpu_count() or 1) as ex:
        parts = list(ex.map(one, range(len(bounds) - 1)))
    a, b, j = (np.concatenate([p[k] for p in parts]) for k in range(3))
    order = np.lexsort((b, a))
    return a[order], b[order], j[order]


def brute_pairs(
    offsets: np.ndarray, values: np.ndarray, t: float, chunk: int = 2_000_000
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """truth_pairs by the stage's exact-Jaccard kernel over ALL n (n - 1) / 2 pairs (small n)."""
    n = len(offsets) - 1
    ia, ib = np.triu_indices(n, k=1)
    keep_a, keep_b, keep_j = [np.empty(0, np.int64)], [np.empty(0, np.int64)], [np.empty(0)]
    for s in range(0, len(ia), chunk):
        a, b = ia[s : s + chunk].astype(np.int64), ib[s : s + chunk].astype(np.int64)
        j = C.exact_jaccard(offsets, values, a, b, False)
        k = j >= t
        keep_a.append(a[k])
        keep_b.append(b[k])
        keep_j.append(j[k])
    return np.concatenate(keep_a), np.concatenate(keep_b), np.concatenate(keep_j)

"""Banding: candidate pairs from signatures, with oversized buckets reported, not expanded.

Each band of `rows` signature slots is hashed to 64 bits; items sharing a band hash in some
band are candidates. A bucket with more than `cap` items is templated text: expanding it would
cost O(k^2) pairs (37M pairs and 9 GB on a 1M-item config corpus, measured), so it is
returned as a finding instead. Bands run in parallel threads (the kernels release the GIL).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba as nb
import numpy as np


def p_candidate(j: float, bands: int, rows: int) -> float:
    """P(two items of Jaccard j share at least one band): the banding S-curve."""
    return 1.0 - (1.0 - j**rows) ** bands


@nb.njit(parallel=True, cache=True)
def band_keys(sig, idx, b0, b1, rows):
    """uint64[b1 - b0, len(idx)]: a 64-bit hash of the `rows` slots of bands b0..b1-1."""
    keys = np.empty((b1 - b0, idx.shape[0]), dtype=np.uint64)
    for k in nb.prange(idx.shape[0]):
        i = idx[k]
        for band in range(b0, b1):
            h = np.uint64(band + 1) * np.uint64(0x9E3779B97F4A7C15)
            for r in range(band * rows, (band + 1) * rows):
                h ^= np.uint64(sig[i, r])
                h *= np.uint64(0xFF51AFD7ED558CCD)
                h ^= h >> np.uint64(29)
            h ^= h >> np.uint64(33)
            h *= np.uint64(0xC4CEB9FE1A85EC53)
            h ^= h >> np.uint64(33)
            keys[band - b0, k] = h
    return keys


@nb.njit(nogil=True, cache=True)
def _band_pairs(key, order, idx, cap, nsample):
    """Pairs (lo << 32 | hi) of items sharing a key; buckets over `cap` as (key, size, sample).

    `order` sorts `key`; item k of the band is idx[k].
    """
    n = key.shape[0]
    npairs = 0
    nbig = 0
    s = 0
    while s < n:
        e = s + 1
        while e < n and key[order[e]] == key[order[s]]:
            e += 1
        k = e - s
        if k > cap:
            nbig += 1
        elif k > 1:
            npairs += k * (k - 1) // 2
        s = e
    pairs = np.empty(npairs, dtype=np.uint64)
    big_key = np.empty(nbig, dtype=np.uint64)
    big_size = np.empty(nbig, dtype=np.int64)
    big_sample = np.full((nbig, nsample), -1, dtype=np.int64)
    w = 0
    g = 0
    s = 0
    while s < n:
        e = s + 1
        while e < n and key[order[e]] == key[order[s]]:
            e += 1
        k = e - s
        if k > cap:
            big_key[g] = key[order[s]]
            big_size[g] = k
            members = np.sort(idx[order[s:e]])  # stable sample: the smallest indices
            for t in range(min(nsample, k)):
                big_sample[g, t] = members[t]
            g += 1
        elif k > 1:
            for x in range(s, e):
                for y in range(x + 1, e):
                    p, q = idx[order[x]], idx[order[y]]
                    if p > q:
                        p, q = q, p
                    pairs[w] = (np.uint64(p) << np.uint64(32)) | np.uint64(q)
                    w += 1
        s = e
    return pairs, big_key, big_size, big_sample


@dataclass
class Candidates:
    a: np.ndarray  # int64 item index, a < b, unique pairs sorted by (a, b)
    b: np.ndarray
    raw_pairs: int  # before removing pairs found in several bands
    big_band: np.ndarray  # oversized buckets: band, key, size, sample item indices
    big_key: np.ndarray
    big_size: np.ndarray
    big_sample: np.ndarray


def candidates(
    sig: np.ndarray,
    idx: np.ndarray,
    bands: int,
    rows: int,
    cap: int,
    nsample: int = 5,
    threads: int = 2,
) -> Candidates:
    """Candidate pairs among the items idx (rows of sig); band keys are made 8 bands at a time."""
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    parts = []
    with ThreadPoolExecutor(max(1, threads)) as ex:
        for b0 in range(0, bands, 8):  # 8 bands of keys at a time: 64 MB per 1M items
            keys = band_keys(sig, idx, b0, min(b0 + 8, bands), rows)

            def one(k: int, keys=keys):
                return _band_pairs(keys[k], np.argsort(keys[k]), idx, cap, nsample)

            parts += list(ex.map(one, range(keys.shape[0])))
    e = np.empty(0, np.uint64)
    empty = _band_pairs(e, np.empty(0, np.int64), idx[:0], cap, nsample)
    parts = parts or [empty]
    raw = np.concatenate([p[0] for p in parts])
    uniq = np.unique(raw)
    del raw
    return Candidates(
        a=(uniq >> np.uint64(32)).astype(np.int64),
        b=(uniq & np.uint64(0xFFFFFFFF)).astype(np.int64),
        raw_pairs=sum(len(p[0]) for p in parts),
        big_band=np.concatenate([np.full(len(p[1]), b, np.int32) for b, p in enumerate(parts)]),
        big_key=np.concatenate([p[1] for p in parts]),
        big_size=np.concatenate([p[2] for p in parts]),
        big_sample=np.concatenate([p[3] for p in parts]),
    )

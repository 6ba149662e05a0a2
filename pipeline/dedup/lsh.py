"""Banding: candidate pairs from signatures; oversized buckets scanned, not skipped.

Each band of `rows` signature slots is hashed to 64 bits; items sharing a band hash in some
band are candidates. A bucket with more than `cap` items is templated text: expanding it to
all its pairs would cost O(k^2) pairs to verify (37M pairs and 9 GB on a 1M-item config
corpus, measured). Skipping it loses exactly the edges a ranked-keeper star needs (recall 0.38
on a corpus of templated families), so such a bucket is scanned instead: every pair in it is
compared on its signatures, only in the first band the two items share (so a family sharing
all 32 bands is scanned once), and only pairs whose estimated Jaccard reaches `scan_floor` are
candidates. A bucket over `max_bucket` items is the one thing still skipped, and it is counted
with the pairs it may hide. Bands run in parallel threads (the kernels release the GIL),
one band's keys per thread (`banded` reads them as it goes, so they can stay on disk).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np

from pipeline.arrays import sorted_unique
from pipeline.dedup.shingle_kernels import heapsort
from pipeline.executors import in_order
from pipeline.jit import on_threads, use_kernel_cache

use_kernel_cache()  # before the first njit(cache=True) below

SCAN_MARGIN = 0.1  # a big bucket's pairs are verified from estimated J >= threshold - this
MOVES = 16  # see sorted_keys


def scan_floor(threshold: float) -> float:
    """Estimated J at which a pair in an oversized bucket becomes a candidate: 4 standard
    deviations of the 256-slot estimate below the threshold, so recall is kept."""
    return max(0.0, threshold - SCAN_MARGIN)


def min_equal_slots(floor: float, num_perm: int) -> int:
    """Equal signature slots a pair needs for an estimated J of at least `floor`."""
    return int(np.ceil(floor * num_perm - 1e-9))


def p_candidate(j: float, bands: int, rows: int) -> float:
    """P(two items of Jaccard j share at least one band): the banding S-curve."""
    return 1.0 - (1.0 - j**rows) ** bands


def band_keys(sig: np.ndarray, idx: np.ndarray, b0: int, b1: int, rows: int) -> np.ndarray:
    """uint64[b1 - b0, len(idx)]: a 64-bit hash of the `rows` slots of bands b0..b1-1."""
    keys = np.empty((b1 - b0, len(idx)), dtype=np.uint64)  # numpy's: huge pages when big
    on_threads(_band_keys, len(idx), sig, idx, b0, rows, keys)
    return keys


@nb.njit(nogil=True, cache=True)
def _band_keys(lo, hi, sig, idx, b0, rows, keys):
    for k in range(lo, hi):
        i = idx[k]
        for band in range(b0, b0 + keys.shape[0]):
            h = np.uint64(band + 1) * np.uint64(0x9E3779B97F4A7C15)
            for r in range(band * rows, (band + 1) * rows):
                h ^= np.uint64(sig[i, r])
                h *= np.uint64(0xFF51AFD7ED558CCD)
                h ^= h >> np.uint64(29)
            h ^= h >> np.uint64(33)
            h *= np.uint64(0xC4CEB9FE1A85EC53)
            h ^= h >> np.uint64(33)
            keys[band - b0, k] = h


@nb.njit(nogil=True)
def sorted_keys(key):
    """(np.sort(key), np.argsort(key, kind="stable")) of uint64 hashes, faster than
    np.argsort alone: as shingle_kernels._sort_unique, placed by their top bits (one
    per bucket, about), then an insertion pass; past MOVES moves per key a heap sort."""
    n = key.shape[0]
    bits = 1
    while (1 << bits) < n and bits < 20:
        bits += 1
    shift = np.uint64(64 - bits)
    cnt = np.zeros((1 << bits) + 1, dtype=np.int64)
    for k in range(n):
        cnt[(key[k] >> shift) + np.uint64(1)] += 1
    for q in range(1 << bits):
        cnt[q + 1] += cnt[q]
    sk = np.empty(n, dtype=np.uint64)
    order = np.empty(n, dtype=np.int64)
    for k in range(n):  # in order of k, so equal keys stay in order of k
        q = key[k] >> shift
        sk[cnt[q]] = key[k]
        order[cnt[q]] = k
        cnt[q] += 1
    budget = MOVES * n
    for j in range(1, n):
        v, x = sk[j], order[j]
        if sk[j - 1] <= v:  # in place already (most keys): no stores
            continue
        t = j - 1
        while t >= 0 and sk[t] > v:
            sk[t + 1], order[t + 1] = sk[t], order[t]
            t -= 1
        sk[t + 1], order[t + 1] = v, x
        budget -= j - 1 - t
        if budget < 0:  # by (key, position): equal keys in order, as a stable sort keeps them
            heapsort(sk, 0, n, order)
            return sk, order
    return sk, order


@nb.njit(cache=True)
def _run_end(sk, s):
    """The end of the run of equal keys starting at s (one bucket)."""
    e = s + 1
    while e < sk.shape[0] and sk[e] == sk[s]:
        e += 1
    return e


@nb.njit(nogil=True, cache=True)
def _band_pairs(key, idx, cap):
    """Pairs (lo << 32 | hi) of items sharing a key; buckets over `cap` as (key, members).

    Item k of the band is idx[k]. Members of a big bucket are sorted, buckets in key order.
    Two passes over the buckets (sized, then filled) so no array ever grows, and no array
    per item but the sorted keys and their order (a band of 10M items is held by a few
    threads at once).
    """
    sk, order = sorted_keys(key)
    n = sk.shape[0]
    npairs = nbig = nmembers = s = 0
    while s < n:
        e = _run_end(sk, s)
        k = e - s
        if k > cap:
            nbig += 1
            nmembers += k
        elif k > 1:
            npairs += k * (k - 1) // 2
        s = e
    pairs = np.empty(npairs, dtype=np.uint64)
    big_key = np.empty(nbig, dtype=np.uint64)
    big_offsets = np.zeros(nbig + 1, dtype=np.int64)
    big_members = np.empty(nmembers, dtype=np.int64)
    w = g = s = 0
    while s < n:
        e = _run_end(sk, s)
        k = e - s
        if k > cap:
            big_key[g] = sk[s]
            o = big_offsets[g]
            for t in range(k):
                big_members[o + t] = idx[order[s + t]]
            heapsort(big_members, o, o + k, big_members[:0])
            big_offsets[g + 1] = o + k
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
    return pairs, big_key, big_offsets, big_members


@nb.njit(nogil=True, cache=True)
def _shares_band(sa, p, sb, q, bands, rows):
    """Whether sa[p] and sb[q] agree on every slot of one of the bands 0..bands-1."""
    for band in range(bands):
        same = True
        for r in range(band * rows, (band + 1) * rows):
            if sa[p, r] != sb[q, r]:
                same = False
                break
        if same:
            return True
    return False


@nb.njit(nogil=True, cache=True)
def _close(sa, p, sb, q, budget):
    """Whether sa[p] and sb[q] differ in at most `budget` slots (stops counting past it)."""
    miss = 0
    for s in range(sa.shape[1]):
        if sa[p, s] != sb[q, s]:
            miss += 1
            if miss > budget:
                return False
    return True


@nb.njit(nogil=True, cache=True)
def _grow(out, w):
    if w < out.shape[0]:
        return out
    grown = np.empty(2 * out.shape[0], dtype=out.dtype)
    for t in range(w):
        grown[t] = out[t]
    return grown


@nb.njit(nogil=True, cache=True)
def scan_bucket(sig, members, band, rows, min_equal):
    """Pairs (lo << 32 | hi) of a big bucket's members with at least `min_equal` equal slots,
    skipping pairs that share an earlier band (that band's bucket found or scanned them).

    A pair stops being compared once it has too many unequal slots, so a bucket of unrelated
    items costs far less than one of near-identical ones. Returns (pairs, pairs compared).
    """
    k = members.shape[0]
    budget = sig.shape[1] - min_equal  # unequal slots a pair may have and still qualify
    out = np.empty(1024, dtype=np.uint64)
    w = 0
    compared = 0
    for x in range(k):
        p = members[x]
        for y in range(x + 1, k):
            q = members[y]
            if band > 0 and _shares_band(sig, p, sig, q, band, rows):
                continue
            compared += 1
            if _close(sig, p, sig, q, budget):
                out = _grow(out, w)
                lo, hi = (p, q) if p < q else (q, p)
                out[w] = (np.uint64(lo) << np.uint64(32)) | np.uint64(hi)
                w += 1
    return out[:w], compared


@nb.njit(nogil=True, cache=True)
def scan_cross(sq, qs, si, rs, band, rows, min_equal):
    """scan_bucket across two sets: pairs (qs[x], rs[y]) of query items (rows of sq) and
    indexed items (rows of si) sharing a big bucket, as (qs[x] << 32 | y), with at least
    `min_equal` equal slots; pairs sharing an earlier band are left to it.
    Returns (pairs, pairs compared)."""
    budget = sq.shape[1] - min_equal
    out = np.empty(1024, dtype=np.uint64)
    w = 0
    compared = 0
    for x in range(qs.shape[0]):
        p = qs[x]
        for y in range(rs.shape[0]):
            q = rs[y]
            if band > 0 and _shares_band(sq, p, si, q, band, rows):
                continue
            compared += 1
            if _close(sq, p, si, q, budget):
                out = _grow(out, w)
                out[w] = (np.uint64(p) << np.uint64(32)) | np.uint64(y)
                w += 1
    return out[:w], compared


@dataclass
class Candidates:
    a: np.ndarray  # int64 item index, a < b, unique pairs sorted by (a, b)
    b: np.ndarray
    raw_pairs: int  # before removing pairs found in several bands
    big_band: np.ndarray  # buckets over the cap: band, key, size, sample item indices,
    big_key: np.ndarray
    big_size: np.ndarray
    big_sample: np.ndarray
    big_scanned: np.ndarray  # bool: scanned pairwise (False: over max_bucket, skipped)
    big_compared: np.ndarray  # pairs compared on signatures in that bucket
    big_found: np.ndarray  # pairs found there (estimated J >= scan_floor)

    @property
    def skipped_pairs(self) -> int:
        """Pairs inside skipped buckets that no comparison looked at (an upper bound on the
        near-duplicate pairs the skip may hide)."""
        k = self.big_size[~self.big_scanned]
        return int((k * (k - 1) // 2).sum())


def candidates(
    sig: np.ndarray, idx: np.ndarray, bands: int, rows: int, cap: int, **options: Any
) -> Candidates:
    """Candidate pairs among the items idx (rows of sig), all in memory: see banded, whose
    options (nsample, threads, scan_floor, max_bucket) it takes.

    Buckets over `cap` are scanned pairwise on signatures (pairs with estimated J >=
    scan_floor are candidates); buckets over `max_bucket` are skipped and reported.
    """
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    keys = band_keys(sig, idx, 0, bands, rows)  # all bands in one pass over the signatures
    num_perm = sig.shape[1] if sig.ndim == 2 else 0
    return banded(lambda b: keys[b], lambda m: sig[m], idx, bands, rows, cap, num_perm, **options)


def banded(
    keys_of: Callable[[int], np.ndarray],
    sigs_of: Callable[[np.ndarray], np.ndarray],
    idx: np.ndarray,
    bands: int,
    rows: int,
    cap: int,
    num_perm: int,
    nsample: int = 5,
    threads: int = 2,
    scan_floor: float = 0.7,
    max_bucket: int = 20_000,
    made: tuple[list[np.ndarray], list[tuple[int, Any, np.ndarray]]] | None = None,
    sink: Callable[[np.ndarray], None] | None = None,
) -> Candidates:
    """Candidate pairs among the items idx, one band at a time: `keys_of(b)` gives band b's
    keys of idx (in that order), `sigs_of(members)` the full signatures of a big bucket's
    (sorted) members. Only a band's keys and one big bucket's signatures per thread are
    held, so neither must be in memory whole (store.py keeps them on disk). `made`: pairs and
    buckets over the cap made elsewhere (ray_bands.py): then keys_of is not called. `sink`:
    each big bucket's pairs go to it (from pool threads), not to `a`, `b` and raw_pairs."""
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    min_equal = min_equal_slots(scan_floor, num_perm)

    def bucket(b: tuple[int, np.uint64, np.ndarray]) -> np.ndarray | None:
        return sigs_of(b[2]) if len(b[2]) <= max_bucket else None

    def scan(b: tuple[int, np.uint64, np.ndarray], sig: np.ndarray | None) -> tuple:
        band, _, members = b
        if sig is None:  # over max_bucket: skipped
            return np.empty(0, np.uint64), 0, 0
        local = np.arange(len(members), dtype=np.int64)  # members are sorted: order kept
        found, compared = scan_bucket(sig, local, band, rows, min_equal)
        lo = members[(found >> np.uint64(32)).astype(np.int64)].astype(np.uint64)
        hi = members[(found & np.uint64(0xFFFFFFFF)).astype(np.int64)].astype(np.uint64)
        pairs = (lo << np.uint64(32)) | hi
        if sink is not None:
            sink(pairs)
        return (pairs if sink is None else np.empty(0, np.uint64)), compared, len(pairs)

    with ThreadPoolExecutor(max(1, threads)) as ex:
        if made is None:
            parts = list(
                in_order(ex, keys_of, lambda k: _band_pairs(k, idx, cap), range(bands), threads)
            )
            big = [  # (band, key, members) of every bucket over the cap, in band order
                (band, p[1][g], p[3][p[2][g] : p[2][g + 1]])
                for band, p in enumerate(parts)
                for g in range(len(p[1]))
            ]
            made = [p[0] for p in parts], big
        pair_parts, big = made
        scanned = list(in_order(ex, lambda b: (b, bucket(b)), lambda x: scan(*x), big, threads))
    pair_parts = pair_parts + [s[0] for s in scanned]
    raw = np.concatenate(pair_parts) if pair_parts else np.empty(0, np.uint64)
    uniq = sorted_unique(raw)
    sample = np.full((len(big), nsample), -1, dtype=np.int64)
    for g, (_, _, members) in enumerate(big):
        sample[g, : min(nsample, len(members))] = members[:nsample]
    return Candidates(
        a=(uniq >> np.uint64(32)).astype(np.int64),
        b=(uniq & np.uint64(0xFFFFFFFF)).astype(np.int64),
        raw_pairs=int(len(raw)),
        big_band=np.array([b for b, _, _ in big], dtype=np.int32),
        big_key=np.array([k for _, k, _ in big], dtype=np.uint64),
        big_size=np.array([len(m) for _, _, m in big], dtype=np.int64),
        big_sample=sample,
        big_scanned=np.array([len(m) <= max_bucket for _, _, m in big], dtype=bool),
        big_compared=np.array([c for _, c, _ in scanned], dtype=np.int64),
        big_found=np.array([f for _, _, f in scanned], dtype=np.int64),
    )

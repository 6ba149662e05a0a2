"""The compiled half of shingles.py (tokenise, hash, sort and optionally sign a batch) and
of change.py (what each edit removes and puts in).

One kernel does a batch, chunk by chunk on threads: each item's fields are tokenised from
the UTF-8 bytes, its shingles hashed (shingles.py's definition, bit for bit), sorted and made
unique, and, given permutations, its MinHash signature taken while the set is still in cache.
A chunk writes its items' sets one after another, so only what is written is ever touched of
a work buffer sized by an upper bound (4 bytes per byte of text).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from pipeline.jit import on_threads, use_kernel_cache

use_kernel_cache()  # before the first njit(cache=True) below

# Every function a cached kernel here calls is here too: numba's cache sees changes to the
# kernel's own file only.
EMPTY = np.uint32(0xFFFFFFFF)  # the signature slot of an item without shingles
MOVES = 16  # see _sort_unique
# A whitespace run's kind in a change set (change._ws), as one whitespace byte (so never a word
# or symbol), indexed by 4 * (breaks a line) + 2 * (holds a tab) + (holds other space)
WS_KIND = np.array([0, 32, 9, 11, 10, 12, 13, 28], dtype=np.uint8)


@nb.njit(cache=True)
def _mix_k(k):
    k = (k * np.uint64(0xCC9E2D51)) & np.uint64(0xFFFFFFFF)
    k = ((k << np.uint64(15)) | (k >> np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return (k * np.uint64(0x1B873593)) & np.uint64(0xFFFFFFFF)


@nb.njit(cache=True)
def _mix_h(h, k):
    h ^= k
    h = ((h << np.uint64(13)) | (h >> np.uint64(19))) & np.uint64(0xFFFFFFFF)
    return (h * np.uint64(5) + np.uint64(0xE6546B64)) & np.uint64(0xFFFFFFFF)


@nb.njit(cache=True)
def _fmix(h):
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & np.uint64(0xFFFFFFFF)
    return h ^ (h >> np.uint64(16))


@nb.njit(cache=True)
def _murmur_bytes(data, s, e):
    h = np.uint64(0)
    i = s
    while i + 4 <= e:
        k = (
            np.uint64(data[i])
            | (np.uint64(data[i + 1]) << np.uint64(8))
            | (np.uint64(data[i + 2]) << np.uint64(16))
            | (np.uint64(data[i + 3]) << np.uint64(24))
        )
        h = _mix_h(h, _mix_k(k))
        i += 4
    rem = e - i
    if rem > 0:
        k = np.uint64(0)
        for j in range(rem - 1, -1, -1):
            k ^= np.uint64(data[i + j]) << np.uint64(8 * j)
        h ^= _mix_k(k)
    return _fmix(h ^ np.uint64(e - s))


@nb.njit(cache=True)
def _shingles(h0, toks, k, out):
    """out[p] = murmur3_32 over the words (tag, toks[p], ..., toks[p+k-1]) for each p: h0 is
    the state after the tag, toks hold each token hash already through _mix_k (a token is in
    up to k shingles). Word by word across all the shingles, so the loop vectorises."""
    out[:] = np.uint32(h0)
    for j in range(k):
        for p in range(out.shape[0]):
            out[p] = np.uint32(_mix_h(np.uint64(out[p]), np.uint64(toks[p + j])))
    tail = np.uint64(4 * (k + 1))
    for p in range(out.shape[0]):
        out[p] = np.uint32(_fmix(np.uint64(out[p]) ^ tail))


@nb.njit(cache=True)
def _cp_len(b):
    if b < 0x80:
        return 1
    if b < 0xE0:
        return 2
    if b < 0xF0:
        return 3
    return 4


@nb.njit(cache=True)
def _cp(data, i, n):
    b = np.int64(data[i])
    if n == 1:
        return b
    cp = b & (0x3F >> (n - 1))
    for j in range(1, n):
        cp = (cp << 6) | (np.int64(data[i + j]) & 0x3F)
    return cp


@nb.njit
def _tokenise(data, s, e, chars, cls, one, out):
    """_mix_k of the token hashes of data[s:e] into out; returns how many.
    one[b] = hash of ASCII byte b."""
    nt = 0
    i = s
    word_start = -1
    while i < e:
        b = data[i]
        if b < 0x80:
            n = 1
            c = cls[b]
        else:
            n = _cp_len(b)
            c = cls[_cp(data, i, n)]
        if chars:
            h = np.uint64(one[b]) if n == 1 else _murmur_bytes(data, i, i + n)
            out[nt] = _mix_k(h)
            nt += 1
        elif c == 1:
            if word_start < 0:
                word_start = i
        else:
            if word_start >= 0:
                out[nt] = _mix_k(_murmur_bytes(data, word_start, i))
                nt += 1
                word_start = -1
            if c == 2:
                h = np.uint64(one[b]) if n == 1 else _murmur_bytes(data, i, i + n)
                out[nt] = _mix_k(h)
                nt += 1
        i += n
    if word_start >= 0:
        out[nt] = _mix_k(_murmur_bytes(data, word_start, e))
        nt += 1
    return nt


@nb.njit
def heapsort(a, lo, hi, b):
    """Sorts a[lo:hi] in place, by (a, b) where b is given (b[lo:hi] moved alongside; b
    empty: a alone). The fallback of the sorts here and in lsh.py: linear memory, never
    quadratic, and it compiles in a fraction of the time numba's own sorts take."""
    pair = b.shape[0] > 0
    n = hi - lo
    for start in range(n // 2 - 1, -1, -1):
        _sift(a, b, pair, lo, start, n)
    for end in range(n - 1, 0, -1):
        a[lo], a[lo + end] = a[lo + end], a[lo]
        if pair:
            b[lo], b[lo + end] = b[lo + end], b[lo]
        _sift(a, b, pair, lo, 0, end)


@nb.njit
def _sift(a, b, pair, lo, root, n):
    while True:
        child = 2 * root + 1
        if child >= n:
            return
        c, r = lo + child, lo + root
        if child + 1 < n and _less(a, b, pair, c, c + 1):
            child += 1
            c += 1
        if not _less(a, b, pair, r, c):
            return
        a[r], a[c] = a[c], a[r]
        if pair:
            b[r], b[c] = b[c], b[r]
        root = child


@nb.njit
def _less(a, b, pair, i, j):
    return a[i] < a[j] or (pair and a[i] == a[j] and b[i] < b[j])


@nb.njit
def _sort(raw, m, out, w, cnt):
    """out[w:w+m] = raw[:m] (uint32 hashes) sorted. cnt: int64 scratch of at least
    min(2m, 2^16) + 1 values.

    Hashes are uniform in their top bits, so placing them by those (about one per bucket)
    leaves them nearly sorted and an insertion pass finishes in linear time: 4x faster than
    numba's sort. Repeats cost that pass nothing; only many distinct values on the same top
    bits could make it quadratic, so past MOVES moves per value a heap sort finishes."""
    if m < 2:
        if m == 1:
            out[w] = raw[0]
        return
    bits = 1
    while (1 << bits) < m and bits < 16:
        bits += 1
    shift = np.uint32(32 - bits)
    cnt[: (1 << bits) + 1] = 0
    for j in range(m):
        cnt[(raw[j] >> shift) + 1] += 1
    for q in range(1 << bits):
        cnt[q + 1] += cnt[q]
    for j in range(m):
        q = raw[j] >> shift
        out[w + cnt[q]] = raw[j]
        cnt[q] += 1
    budget = MOVES * m
    for j in range(w + 1, w + m):
        v = out[j]
        k = j - 1
        while k >= w and out[k] > v:
            out[k + 1] = out[k]
            k -= 1
        out[k + 1] = v
        budget -= j - 1 - k
        if budget < 0:
            heapsort(out, w, w + m, out[:0])
            return


@nb.njit
def _sort_unique(raw, m, out, w, cnt):
    """out[w:w+u] = the sorted distinct values of raw[:m] (_sort); returns u."""
    _sort(raw, m, out, w, cnt)
    if m < 2:
        return m
    u = 1
    for j in range(w + 1, w + m):
        if out[j] != out[w + u - 1]:
            out[w + u] = out[j]
            u += 1
    return u


@nb.njit(cache=True)
def _fmix32(h):
    h ^= h >> np.uint32(16)
    h = np.uint32(h * np.uint32(0x85EBCA6B))
    h ^= h >> np.uint32(13)
    h = np.uint32(h * np.uint32(0xC2B2AE35))
    h ^= h >> np.uint32(16)
    return h


@nb.njit(cache=True)
def _sign_row(values, s, e, a, b, row):
    """row[p] = min over values[s:e] of a[p] * fmix32(v) + b[p] (mod 2^32).

    Eight shingles per sweep over the permutations: the sweep is bound by loading and storing
    a, b and row, so folding eight hashes into each load is 3x faster than one at a time."""
    num_perm = a.shape[0]
    row[:] = EMPTY
    j = s
    while j + 8 <= e:
        h0, h1 = _fmix32(np.uint32(values[j])), _fmix32(np.uint32(values[j + 1]))
        h2, h3 = _fmix32(np.uint32(values[j + 2])), _fmix32(np.uint32(values[j + 3]))
        h4, h5 = _fmix32(np.uint32(values[j + 4])), _fmix32(np.uint32(values[j + 5]))
        h6, h7 = _fmix32(np.uint32(values[j + 6])), _fmix32(np.uint32(values[j + 7]))
        for p in range(num_perm):
            ap, bp = a[p], b[p]
            m0 = min(np.uint32(ap * h0 + bp), np.uint32(ap * h1 + bp))
            m1 = min(np.uint32(ap * h2 + bp), np.uint32(ap * h3 + bp))
            m2 = min(np.uint32(ap * h4 + bp), np.uint32(ap * h5 + bp))
            m3 = min(np.uint32(ap * h6 + bp), np.uint32(ap * h7 + bp))
            row[p] = min(row[p], min(min(m0, m1), min(m2, m3)))
        j += 8
    while j < e:
        h = _fmix32(np.uint32(values[j]))
        for p in range(num_perm):
            row[p] = min(row[p], np.uint32(a[p] * h + b[p]))
        j += 1


def signatures_kernel(offsets, values, a, b, sig):
    """sig[i] = the MinHash signature of CSR set i under permutations (a, b)."""
    on_threads(_signature_rows, offsets.shape[0] - 1, offsets, values, a, b, sig)


@nb.njit(nogil=True, cache=True)
def _signature_rows(lo, hi, offsets, values, a, b, sig):
    for i in range(lo, hi):
        row = np.empty(a.shape[0], dtype=np.uint32)
        _sign_row(values, offsets[i], offsets[i + 1], a, b, row)
        for p in range(a.shape[0]):  # a loop, not sig[i, :] = row: see shapes/scan.py
            sig[i, p] = row[p]


def shingle_kernel(data, offs, tags, n, chars, cls, one, chunks, start, out, counts, a, b, sig):
    """Chunk c (items chunks[c] .. chunks[c+1]-1) writes its items' sorted unique shingle
    sets one after another from out[start[c]]; counts[i] = item i's set size. With
    permutations (a, b non-empty), sig[i] = item i's MinHash signature. Chunks on threads."""
    args = (data, offs, tags, n, chars, cls, one, chunks, start, out, counts, a, b, sig)
    on_threads(_shingle_chunks, chunks.shape[0] - 1, *args)


@nb.njit(nogil=True, cache=True)
def _shingle_chunks(
    c0, c1, data, offs, tags, n, chars, cls, one, chunks, start, out, counts, a, b, sig
):
    nf = tags.shape[0]
    for c in range(c0, c1):
        longest = 1  # bytes of the longest field, and of the longest item, in the chunk
        most = 1
        for i in range(chunks[c], chunks[c + 1]):
            total = 0
            for f in range(nf):
                size = offs[f, i + 1] - offs[f, i]
                longest = max(longest, size)
                total += size
            most = max(most, total)
        toks = np.empty(longest, dtype=np.uint32)  # tokens <= bytes, shingles <= tokens
        raw = np.empty(most, dtype=np.uint32)
        cnt = np.empty(min(2 * most, 1 << 16) + 1, dtype=np.int64)
        row = np.empty(a.shape[0], dtype=np.uint32)
        w = start[c]
        for i in range(chunks[c], chunks[c + 1]):
            m = 0
            for f in range(nf):
                nt = _tokenise(data, offs[f, i], offs[f, i + 1], chars, cls, one, toks)
                if nt == 0:
                    continue
                k = n if nt >= n else nt
                h0 = _mix_h(np.uint64(0), _mix_k(np.uint64(tags[f])))
                _shingles(h0, toks, k, raw[m : m + nt - k + 1])
                m += nt - k + 1
            u = _sort_unique(raw, m, out, w, cnt)
            counts[i] = u
            if a.shape[0]:
                _sign_row(out, w, w + u, a, b, row)
                for p in range(a.shape[0]):
                    sig[i, p] = row[p]
            w += u


# ---------------------------------------------------------------- change sets (change.py)


@nb.njit(cache=True)
def _word(data, i, cls):  # whether the code point starting at byte i is \\w
    b = data[i]
    return cls[b] == 1 if b < 0x80 else cls[_cp(data, i, _cp_len(b))] == 1


@nb.njit(cache=True)
def _back(data, i):  # the start of the code point ending just before byte i
    i -= 1
    while i > 0 and (data[i] & 0xC0) == 0x80:
        i -= 1
    return i


@nb.njit
def _span(data, b0, b1, a0, a1, cls):
    """change.change_span on bytes: (p, s) bytes of common prefix and suffix kept."""
    lb, la, p, s = b1 - b0, a1 - a0, 0, 0
    while p < lb and p < la and data[b0 + p] == data[a0 + p]:
        p += 1
    while 0 < p < max(lb, la) and (data[b0 + p if p < lb else a0 + p] & 0xC0) == 0x80:
        p -= 1
    while s < lb - p and s < la - p and data[b1 - 1 - s] == data[a1 - 1 - s]:
        s += 1
    while s > 0 and (data[b1 - s] & 0xC0) == 0x80:
        s -= 1
    if p > 0 and _word(data, _back(data, b0 + p), cls):
        if (p < lb - s and _word(data, b0 + p, cls)) or (p < la - s and _word(data, a0 + p, cls)):
            while p > 0 and _word(data, _back(data, b0 + p), cls):
                p = _back(data, b0 + p) - b0
    if s > 0 and _word(data, b1 - s, cls):
        if (lb - s > p and _word(data, _back(data, b1 - s), cls)) or (
            la - s > p and _word(data, _back(data, a1 - s), cls)
        ):
            while s > 0 and _word(data, b1 - s, cls):
                s -= _cp_len(data[b1 - s])
    return p, s


@nb.njit(cache=True)
def _run(data, s, e, c, one, mode):  # a \\w run's hash; a \\s run's its kind's (WS_KIND)
    if c or mode == 3:  # or, in mode 3, the run as written
        return _murmur_bytes(data, s, e)
    kind = 0
    for i in range(s, e):
        b = data[i]
        kind |= 4 if b == 10 or b == 13 else 2 if b == 9 else 1
    return np.uint64(one[WS_KIND[kind]])


@nb.njit
def _toks(data, s, e, mode, cls, one, out):
    """Tokens of data[s:e]: \\w runs; mode >= 1 each other symbol too, mode 2 \\s runs by kind
    too, mode 3 \\s runs as written."""
    nt, i, run, rc = 0, s, -1, -1
    while i < e:
        b = data[i]
        n = 1 if b < 0x80 else _cp_len(b)
        c = cls[b] if b < 0x80 else cls[_cp(data, i, n)]
        if run >= 0 and c != rc:
            out[nt] = _mix_k(_run(data, run, i, rc, one, mode))
            nt, run = nt + 1, -1
        if c == 2 and mode >= 1:
            out[nt] = _mix_k(np.uint64(one[b]) if n == 1 else _murmur_bytes(data, i, i + n))
            nt += 1
        elif c != 2 and run < 0 and (c == 1 or mode >= 2):
            run, rc = i, c
        i += n
    if run >= 0:
        out[nt] = _mix_k(_run(data, run, e, rc, one, mode))
        nt += 1
    return nt


@nb.njit
def _grams(data, s, e, mode, h, n, cls, one, tmp, out):
    """out[:m] = the n-gram shingle hashes (tag state h) of data[s:e]'s tokens as _toks makes
    them in `mode` (a field of fewer tokens: one gram of them all, as shingle_kernel); m."""
    nt = _toks(data, s, e, mode, cls, one, tmp)
    if nt == 0:
        return 0
    k = n if nt >= n else nt
    _shingles(h, tmp, k, out[: nt - k + 1])
    return nt - k + 1


@nb.njit(cache=True)
def _left(x, nx, y, ny, side, raw, m):
    """raw[m:] = the elements of the multiset x - y (both sorted) on `side`: the k-th copy of
    value v is (murmur3_32(pack("<2I", v, k)) & ~3) | side (x holds _mix_k(v)); new m."""
    j, k = 0, 0
    for q in range(nx):
        k = k if q > 0 and x[q] == x[q - 1] else 0
        while j < ny and y[j] < x[q]:
            j += 1
        if j < ny and y[j] == x[q]:
            j += 1
            continue
        k += 1
        h = _mix_h(_mix_h(np.uint64(0), np.uint64(x[q])), _mix_k(np.uint64(k)))
        raw[m] = (np.uint32(_fmix(h ^ np.uint64(8))) & np.uint32(0xFFFFFFFC)) | np.uint32(side)
        m += 1
    return m


def change_kernel(data, offs, tags, n, cls, one, chunks, start, out, counts):
    """change.change_sets' kernel: item i's change set written like shingle_kernel's sets
    (offs[0]: before, offs[1]: after; tags: the span shingles' and the text's field tags)."""
    args = (data, offs, tags, n, cls, one, chunks, start, out, counts)
    on_threads(_change_chunks, chunks.shape[0] - 1, *args)


@nb.njit(nogil=True, cache=True)
def _change_chunks(c0, c1, data, offs, tags, n, cls, one, chunks, start, out, counts):
    hs = _mix_h(np.uint64(0), _mix_k(np.uint64(tags[0])))
    ht = _mix_h(np.uint64(0), _mix_k(np.uint64(tags[1])))
    for c in range(c0, c1):
        longest = 1
        for i in range(chunks[c], chunks[c + 1]):
            longest = max(longest, offs[0, i + 1] - offs[0, i], offs[1, i + 1] - offs[1, i])
        x, y = np.empty(longest, np.uint32), np.empty(longest, np.uint32)
        xs, ys = np.empty(longest, np.uint32), np.empty(longest, np.uint32)  # x, y sorted
        tmp = np.empty(longest, np.uint32)
        raw = np.empty(4 * longest, np.uint32)
        cnt = np.empty(min(8 * longest, 1 << 16) + 1, dtype=np.int64)
        w = start[c]
        for i in range(chunks[c], chunks[c + 1]):
            b0, b1, a0, a1 = offs[0, i], offs[0, i + 1], offs[1, i], offs[1, i + 1]
            m = 0
            for side, lo, hi in ((0, b0, b1), (1, a0, a1)):  # each side's text
                g = _grams(data, lo, hi, 3, ht, n, cls, one, tmp, raw[m:])
                for q in range(m, m + g):
                    raw[q] = (raw[q] & np.uint32(0xFFFFFFFC)) | np.uint32(2 + side)
                m += g
            p, s = _span(data, b0, b1, a0, a1, cls)
            b0, b1, a0, a1 = b0 + p, b1 - s, a0 + p, a1 - s
            for mode in (0, 1, 2, 3):  # words, symbols too, whitespace too, else shingles
                if mode < 3:
                    nx = _toks(data, b0, b1, mode, cls, one, x)
                    ny = _toks(data, a0, a1, mode, cls, one, y)
                else:  # the spans' token n-grams (mode 1: \\w runs and symbols)
                    nx = _grams(data, b0, b1, 1, hs, n, cls, one, tmp, x)
                    ny = _grams(data, a0, a1, 1, hs, n, cls, one, tmp, y)
                    for q in range(nx):
                        x[q] = np.uint32(_mix_k(np.uint64(x[q])))
                    for q in range(ny):
                        y[q] = np.uint32(_mix_k(np.uint64(y[q])))
                _sort(x, nx, xs, 0, cnt)
                _sort(y, ny, ys, 0, cnt)
                made = _left(xs, nx, ys, ny, 0, raw, m)
                made = _left(ys, ny, xs, nx, 1, raw, made)
                if made > m:
                    m = made
                    break
            u = _sort_unique(raw, m, out, w, cnt)
            counts[i] = u
            w += u

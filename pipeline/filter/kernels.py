"""Compiled kernels over Arrow string buffers for the filter's costliest measures, with no
Python per item. Each gives polars' (Rust regex's) answer exactly, or says it cannot:

- `ws_equal`: two texts equal once (Unicode) whitespace is removed (common.same_but_whitespace,
  `\\s+`).
- `word_bytes_equal`: the two texts' ASCII word characters (`[A-Za-z0-9_]`) read the same, in
  order. format_only's normalisations remove or add only whitespace, punctuation and comment
  markers, so two sides they make equal always pass: only those rows are normalised.
- `tokens`: the matches of schema.TOKEN_PATTERN (`\\w+|[^\\w\\s]`), for ASCII text; `odd`
  rows (a byte above ASCII: Unicode's \\w and \\s) are the caller's to count by the regex.
- `word_sets`: unrelated_sides' figures: each side's non-blank lines (NONBLANK_LINE_RE,
  Unicode whitespace included) and distinct words (WORD_RE, ASCII only), and the distinct
  words both share. Words are told apart by their bytes (hashed only to sort them).

The tests compare each with the regex it replaces, on every kind of text.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import pyarrow as pa

from pipeline.jit import in_cache, use_kernel_cache

use_kernel_cache()  # before the first njit(cache=True) below

# Byte classes: Rust's ASCII \s, \w, and WORD_RE's first character
_SPACE, _WORD, _START = 1, 2, 4
_CLS = np.zeros(256, np.uint8)
_CLS[[9, 10, 11, 12, 13, 32]] = _SPACE
for _c in b"0123456789":
    _CLS[_c] |= _WORD
for _c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_":
    _CLS[_c] |= _WORD | _START
# Unicode White_Space above ASCII (what Rust's \s matches besides \t \n \v \f \r and space)
_UNICODE_SPACES = np.array(
    [0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000],
    np.int64,
)
_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


def buffers(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(utf-8 bytes, int64 offsets with len + 1 entries) of a string array; nulls read as ""."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    if arr.null_count:
        arr = arr.fill_null("")
    _, off, data = arr.buffers()
    offsets = np.frombuffer(off, np.int64, len(arr) + 1, arr.offset * 8)
    raw = np.frombuffer(data if data is not None else b"", np.uint8)
    # read-only whoever made the buffers: one signature per kernel, the warm-up's
    raw.flags.writeable = offsets.flags.writeable = False
    return raw, offsets


@nb.njit(nogil=True, cache=True)
def _code_point(d, k):
    """The code point of the UTF-8 sequence starting at d[k] (valid UTF-8, as Arrow holds)."""
    b = np.int64(d[k])
    if b < 0x80:
        return b
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(d[k + 1]) & 0x3F)
    if b < 0xF0:
        return ((b & 0x0F) << 12) | ((np.int64(d[k + 1]) & 0x3F) << 6) | (np.int64(d[k + 2]) & 0x3F)
    return (
        ((b & 0x07) << 18)
        | ((np.int64(d[k + 1]) & 0x3F) << 12)
        | ((np.int64(d[k + 2]) & 0x3F) << 6)
        | (np.int64(d[k + 3]) & 0x3F)
    )


@nb.njit(nogil=True, cache=True)
def _seq_len(b):
    """Bytes of the UTF-8 sequence a lead byte starts."""
    return 1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4


@nb.njit(nogil=True, cache=True)
def _space_at(d, k):
    """Whether the character at d[k] is whitespace to Rust's \\s (Unicode White_Space)."""
    if d[k] < 0x80:
        return _CLS[d[k]] & _SPACE != 0
    cp = _code_point(d, k)
    for u in _UNICODE_SPACES:
        if cp == u:
            return True
    return False


@nb.njit(nogil=True, cache=True)
def _same2(ad, i, bd, j, w):
    """ad[i : i + w] == bd[j : j + w]"""
    for t in range(w):
        if ad[i + t] != bd[j + t]:
            return False
    return True


@nb.njit(nogil=True, cache=True)
def ws_equal(ad, ao, bd, bo):
    """Per row: a and b equal once every (Unicode) whitespace character is removed."""
    n = ao.size - 1
    eq = np.zeros(n, np.bool_)
    for r in range(n):
        i, ie, j, je = ao[r], ao[r + 1], bo[r], bo[r + 1]
        while True:
            while i < ie and (_CLS[ad[i]] & _SPACE or (ad[i] >= 0x80 and _space_at(ad, i))):
                i += _seq_len(ad[i])
            while j < je and (_CLS[bd[j]] & _SPACE or (bd[j] >= 0x80 and _space_at(bd, j))):
                j += _seq_len(bd[j])
            if i == ie or j == je:
                eq[r] = i == ie and j == je
                break
            c = ad[i]
            if c != bd[j]:
                break
            if c < 0x80:
                i += 1
                j += 1
                continue
            w = _seq_len(c)  # a character outside ASCII: all of its bytes
            if not _same2(ad, i, bd, j, w):
                break
            i += w
            j += w
    return eq


@nb.njit(nogil=True, cache=True)
def word_bytes_equal(ad, ao, bd, bo):
    """Per row: a's and b's bytes in [A-Za-z0-9_] are the same sequence."""
    n = ao.size - 1
    eq = np.zeros(n, np.bool_)
    for r in range(n):
        i, ie, j, je = ao[r], ao[r + 1], bo[r], bo[r + 1]
        while True:
            while i < ie and not _CLS[ad[i]] & _WORD:
                i += 1
            while j < je and not _CLS[bd[j]] & _WORD:
                j += 1
            if i == ie or j == je:
                eq[r] = i == ie and j == je
                break
            if ad[i] != bd[j]:
                break
            i += 1
            j += 1
    return eq


@nb.njit(nogil=True, cache=True)
def tokens(d, o):
    """(count, odd) per row: TOKEN_PATTERN's matches in ASCII text; `odd` rows (a byte above
    ASCII) are not counted."""
    n = o.size - 1
    count = np.zeros(n, np.int64)
    odd = np.zeros(n, np.bool_)
    for r in range(n):
        k, e, c = o[r], o[r + 1], 0
        while k < e:
            if d[k] >= 0x80:  # \\w and \\s outside ASCII: the regex's
                odd[r] = True
                break
            b = _CLS[d[k]]
            if b & _SPACE:
                k += 1
            elif b & _WORD:
                while k < e and _CLS[d[k]] & _WORD:
                    k += 1
                c += 1
            else:
                k += 1
                c += 1
        count[r] = c
    return count, odd


@nb.njit(nogil=True, cache=True)
def _nonblank_lines(d, s, e):
    """NONBLANK_LINE_RE's matches (`(?m)^[ \\t]*\\S`) in d[s:e]: the lines whose first
    character after spaces and tabs is not (Unicode) whitespace."""
    c = 0
    k = s
    while k <= e:  # k: a line's start
        while k < e and (d[k] == 32 or d[k] == 9):
            k += 1
        if k < e and d[k] != 10:
            c += not _space_at(d, k)
        while k < e and d[k] != 10:
            k += 1
        k += 1
    return c


@nb.njit(nogil=True, cache=True)
def _words(d, s, e, starts, lens, hashes):
    """WORD_RE's matches in d[s:e] (`[A-Za-z_][A-Za-z0-9_]*`, leftmost first) into the
    buffers, with an FNV-1a hash each; how many."""
    m = 0
    k = s
    while k < e:
        if _CLS[d[k]] & _START:
            j = k
            h = _FNV_OFFSET
            while j < e and _CLS[d[j]] & _WORD:
                h = (h ^ np.uint64(d[j])) * _FNV_PRIME
                j += 1
            starts[m], lens[m], hashes[m] = k, j - k, h
            m += 1
            k = j
        else:
            k += 1
    return m


@nb.njit(nogil=True, cache=True)
def _sift(keys, order, root, end):
    while 2 * root + 1 < end:
        child = 2 * root + 1
        if child + 1 < end and keys[order[child + 1]] > keys[order[child]]:
            child += 1
        if keys[order[root]] >= keys[order[child]]:
            return
        order[root], order[child] = order[child], order[root]
        root = child


@nb.njit(nogil=True, cache=True)
def _heapsort(keys, order, m):
    """order[:m] = 0 .. m - 1 sorted by keys (a heap sort: numba's own sorts take seconds
    longer to compile, on every first run)."""
    for k in range(m):
        order[k] = k
    for root in range(m // 2 - 1, -1, -1):
        _sift(keys, order, root, m)
    for end in range(m - 1, 0, -1):
        order[0], order[end] = order[end], order[0]
        _sift(keys, order, 0, end)


@nb.njit(nogil=True, cache=True)
def _distinct(d, starts, lens, hashes, m, order, out):
    """The distinct words of the first m (by bytes) into out, ordered by hash; how many.
    `order`: a work buffer as long."""
    _heapsort(hashes, order, m)
    k = 0
    run = 0  # where the distinct words of the current hash start in out
    for t in range(m):
        w = order[t]
        if k > 0 and hashes[out[k - 1]] == hashes[w]:
            for x in range(run, k):
                if lens[out[x]] == lens[w] and _same2(d, starts[out[x]], d, starts[w], lens[w]):
                    break
            else:
                out[k] = w
                k += 1
        else:
            run = k
            out[k] = w
            k += 1
    return k


@nb.njit(nogil=True, cache=True)
def _shared(ad, a_st, a_ln, a_h, oa, ka, bd, b_st, b_ln, b_h, ob, kb):
    """Distinct words in both lists (each ordered by hash, as _distinct leaves them)."""
    i = j = c = 0
    while i < ka and j < kb:
        ha, hb = a_h[oa[i]], b_h[ob[j]]
        if ha < hb:
            i += 1
        elif ha > hb:
            j += 1
        else:
            i2, j2 = i, j
            while i2 < ka and a_h[oa[i2]] == ha:
                i2 += 1
            while j2 < kb and b_h[ob[j2]] == hb:
                j2 += 1
            for x in range(i, i2):
                for y in range(j, j2):
                    wa, wb = oa[x], ob[y]
                    if a_ln[wa] == b_ln[wb] and _same2(ad, a_st[wa], bd, b_st[wb], a_ln[wa]):
                        c += 1
                        break
            i, j = i2, j2
    return c


@nb.njit(nogil=True, cache=True)
def word_sets(ad, ao, bd, bo, min_lines):
    """(lines_a, lines_b, words_a, words_b, shared) per row: the sides' non-blank lines, and
    where both have at least min_lines, their distinct words and those both share (else 0)."""
    n = ao.size - 1
    lines_a = np.zeros(n, np.int64)
    lines_b = np.zeros(n, np.int64)
    words_a = np.zeros(n, np.int64)
    words_b = np.zeros(n, np.int64)
    shared = np.zeros(n, np.int64)
    longest = 1
    for r in range(n):
        longest = max(longest, ao[r + 1] - ao[r], bo[r + 1] - bo[r])
    cap = longest // 2 + 1  # a word and a byte apart, at most
    a_st, a_ln = np.empty(cap, np.int64), np.empty(cap, np.int64)
    b_st, b_ln = np.empty(cap, np.int64), np.empty(cap, np.int64)
    a_h, b_h = np.empty(cap, np.uint64), np.empty(cap, np.uint64)
    oa, ob, work = np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64)
    for r in range(n):
        lines_a[r] = _nonblank_lines(ad, ao[r], ao[r + 1])
        lines_b[r] = _nonblank_lines(bd, bo[r], bo[r + 1])
        if lines_a[r] < min_lines or lines_b[r] < min_lines:
            continue
        ma = _words(ad, ao[r], ao[r + 1], a_st, a_ln, a_h)
        mb = _words(bd, bo[r], bo[r + 1], b_st, b_ln, b_h)
        ka = _distinct(ad, a_st, a_ln, a_h, ma, work, oa)
        kb = _distinct(bd, b_st, b_ln, b_h, mb, work, ob)
        words_a[r], words_b[r] = ka, kb
        shared[r] = _shared(ad, a_st, a_ln, a_h, oa, ka, bd, b_st, b_ln, b_h, ob, kb)
    return lines_a, lines_b, words_a, words_b, shared


def ready() -> bool:
    """Whether every kernel the filter calls is in the kernel cache (their helpers are
    compiled with them)."""
    return all(map(in_cache, (ws_equal, word_bytes_equal, tokens, word_sets)))


def warm(cfg: object) -> None:
    """Compiles every kernel here (Stage.warm): each over a few texts, as the rules call them."""
    d, o = buffers(pa.array(["a b\n", "x\u00a0y\n\tz", ""], pa.large_string()))
    ws_equal(d, o, d, o)
    word_bytes_equal(d, o, d, o)
    tokens(d, o)
    word_sets(d, o, d, o, 1)

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
  words both share. Words are told apart by their bytes (hashed only to find them in a
  table).

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
def _insert(d, st, ln, h, w, slots, stamps, stamp, mask):
    """Adds word w to the open-addressing table (slots valid where stamps == stamp): whether
    it was not in it yet (words with one hash told apart by their bytes)."""
    k = h[w] & mask
    while stamps[k] == stamp:
        x = slots[k]
        if h[x] == h[w] and ln[x] == ln[w] and _same2(d, st[x], d, st[w], ln[w]):
            return False
        k = (k + np.uint64(1)) & mask
    stamps[k], slots[k] = stamp, w
    return True


@nb.njit(nogil=True, cache=True)
def _holds(d, st, ln, h, slots, stamps, stamp, mask, wd, ws, wl, wh):
    """Whether the table holds the word of bytes wd[ws : ws + wl], hash wh."""
    k = wh & mask
    while stamps[k] == stamp:
        x = slots[k]
        if h[x] == wh and ln[x] == wl and _same2(d, st[x], wd, ws, wl):
            return True
        k = (k + np.uint64(1)) & mask
    return False


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
    # one table a side, grown as a row needs; a row's entries are those stamped with it
    size = 64
    a_slots, a_stamps = np.empty(size, np.int64), np.zeros(size, np.int64)
    b_slots, b_stamps = np.empty(size, np.int64), np.zeros(size, np.int64)
    for r in range(n):
        lines_a[r] = _nonblank_lines(ad, ao[r], ao[r + 1])
        lines_b[r] = _nonblank_lines(bd, bo[r], bo[r + 1])
        if lines_a[r] < min_lines or lines_b[r] < min_lines:
            continue
        ma = _words(ad, ao[r], ao[r + 1], a_st, a_ln, a_h)
        mb = _words(bd, bo[r], bo[r + 1], b_st, b_ln, b_h)
        while size < 2 * max(ma, mb):
            size *= 2
            a_slots, a_stamps = np.empty(size, np.int64), np.zeros(size, np.int64)
            b_slots, b_stamps = np.empty(size, np.int64), np.zeros(size, np.int64)
        mask, stamp = np.uint64(size - 1), r + 1
        ka = kb = both = 0
        for w in range(ma):
            ka += _insert(ad, a_st, a_ln, a_h, w, a_slots, a_stamps, stamp, mask)
        for w in range(mb):
            if _insert(bd, b_st, b_ln, b_h, w, b_slots, b_stamps, stamp, mask):
                kb += 1
                at = (a_st, a_ln, a_h, a_slots, a_stamps, stamp, mask)
                both += _holds(ad, *at, bd, b_st[w], b_ln[w], b_h[w])
        words_a[r], words_b[r], shared[r] = ka, kb, both
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

"""normalise_line compiled: whitespace collapsed, then HEX_RX and NUM_RX as byte scans.

The scans are exact for ASCII text (printable, and tab, VT, FF, CR), where Python's regex and
these agree on what is whitespace, a word character and a word boundary; a line holding any
other byte is flagged `odd` and the caller runs the Python reference on it
(normalise.collapse_ws, normalise.normalise_line). The tests check every unflagged line
against the reference.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from pipeline.shapes.normalise import HEX, NUM

_TOK_N = np.frombuffer(NUM.encode(), np.uint8).copy()  # 7 UTF-8 bytes each
_TOK_H = np.frombuffer(HEX.encode(), np.uint8).copy()
_SUFFIXES = ("rc", "alpha", "beta", "dev", "pre", "post")  # NUM_RX's pre-release words
_SUF = np.zeros((len(_SUFFIXES), 5), np.uint8)
_SUF_LEN = np.array([len(w) for w in _SUFFIXES], np.int64)
for _k, _w in enumerate(_SUFFIXES):
    _SUF[_k, : len(_w)] = np.frombuffer(_w.encode(), np.uint8)


# Byte classes, ASCII: \s (\t \n \v \f \r, space), digit, \w, hex digit; ODD: not ASCII text
_SPACE, _DIGIT, _WORD, _HEXD, _ODD = 1, 2, 4, 8, 16
_CLS = np.zeros(256, np.uint8)
_CLS[:32] = _ODD
_CLS[127:] = _ODD
_CLS[[9, 10, 11, 12, 13, 32]] = _SPACE
_CLS[ord("0") : ord("9") + 1] = _DIGIT | _WORD | _HEXD
for _c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_":
    _CLS[_c] = _WORD | (_HEXD if _c in b"abcdefABCDEF" else 0)


@nb.njit(inline="always")
def _space(c):
    return _CLS[c] & _SPACE != 0


@nb.njit(inline="always")
def _digit(c):
    return _CLS[c] & _DIGIT != 0


@nb.njit(inline="always")
def _word(c):
    return _CLS[c] & _WORD != 0


@nb.njit(inline="always")
def _hexc(c):
    return _CLS[c] & _HEXD != 0


@nb.njit(inline="always")
def _digits(h, q, m):
    while q < m and _digit(h[q]):
        q += 1
    return q


@nb.njit(nogil=True, cache=True)
def _num_end(h, p, m, suf, suf_len):
    """End of NUM_RX's match at p in h[:m], or -1: `(?:\\bv)?[0-9]+(?:\\.[0-9]+)*` then the
    optional suffix (every part after the first digits is optional and greedy, so the first
    path the regex tries is the longest: no backtracking to spell out)."""
    q = p
    if h[p] == 118 and (p == 0 or not _word(h[p - 1])) and p + 1 < m and _digit(h[p + 1]):
        q = p + 1  # v4.5.0
    if not _digit(h[q]):
        return -1
    q = _digits(h, q, m)
    while q + 1 < m and h[q] == 46 and _digit(h[q + 1]):
        q = _digits(h, q + 1, m)
    if q + 1 < m and (h[q] == 97 or h[q] == 98) and _digit(h[q + 1]):
        return _digits(h, q + 1, m)  # a1, b2
    if q + 2 < m and h[q] == 114 and h[q + 1] == 99 and _digit(h[q + 2]):
        return _digits(h, q + 2, m)  # rc1
    if q < m and (h[q] == 45 or h[q] == 46):  # -beta.2, .post1
        for w in range(suf.shape[0]):
            n = suf_len[w]
            if q + 1 + n <= m and np.all(h[q + 1 : q + 1 + n] == suf[w, :n]):
                r = q + 1 + n
                if r + 1 < m and h[r] == 46 and _digit(h[r + 1]):
                    return _digits(h, r + 1, m)
                if r < m and _digit(h[r]):
                    return _digits(h, r, m)
                return r
    return q


@nb.njit(nogil=True, cache=True)
def _normalise(c, m, h, out, o, tok_n, tok_h, suf, suf_len):
    """normalise_line of the collapsed ASCII line c[:m], written at out[o:]; its new end.
    HEX_RX: a maximal hex run of 7+ holding a digit, with a non-word character (or the line's
    edge) on both sides; then NUM_RX over that, scanned leftmost-first like the regex."""
    k = 0
    p = 0
    while p < m:
        if _hexc(c[p]) and (p == 0 or not _word(c[p - 1])):
            q, dig = p, False
            while q < m and _hexc(c[q]):
                dig = dig or _digit(c[q])
                q += 1
            if dig and q - p >= 7 and (q == m or not _word(c[q])):
                h[k : k + 7] = tok_h
                k += 7
                p = q
                continue
            while p < q:  # the run's tail is no match start: it is inside a word
                h[k] = c[p]
                k += 1
                p += 1
            continue
        h[k] = c[p]
        k += 1
        p += 1
    p = 0
    while p < k:
        q = _num_end(h, p, k, suf, suf_len) if _digit(h[p]) or h[p] == 118 else -1
        if q < 0:
            out[o] = h[p]
            o += 1
            p += 1
        else:
            out[o : o + 7] = tok_n
            o += 7
            p = q
    return o


@nb.njit(nogil=True, cache=True)
def _normalise_lines(data, starts, ends, tok_n, tok_h, suf, suf_len):
    n = starts.size
    coff = np.zeros(n + 1, np.int64)
    noff = np.zeros(n + 1, np.int64)
    odd = np.zeros(n, np.bool_)
    longest = 1
    for i in range(n):
        longest = max(longest, ends[i] - starts[i])
    cdata = np.empty(max(data.size, 1), np.uint8)  # collapsing never lengthens a line
    ndata = np.empty(max(2 * data.size, 16), np.uint8)
    h = np.empty(longest, np.uint8)
    for i in range(n):
        c0 = o = coff[i]
        pending = False  # a whitespace run seen after a token: one space, if a token follows
        digits = False
        for p in range(starts[i], ends[i]):
            b = data[p]
            if _CLS[b] & _ODD:
                odd[i] = True  # not ASCII text: the caller runs the Python reference
            if _space(b):
                pending = o > c0
                continue
            if pending:
                cdata[o] = 32
                o += 1
                pending = False
            cdata[o] = b
            o += 1
            digits = digits or _digit(b)
        coff[i + 1] = o
        if ndata.size < noff[i] + 7 * (o - c0):  # NUM at most 7 bytes per input byte
            grown = np.empty(2 * ndata.size + 7 * (o - c0), np.uint8)
            grown[: noff[i]] = ndata[: noff[i]]
            ndata = grown
        if not digits:  # HEX and NUM both need a digit: the collapsed line is the result
            for t in range(o - c0):
                ndata[noff[i] + t] = cdata[c0 + t]
            noff[i + 1] = noff[i] + o - c0
            continue
        line = cdata[c0:o]
        noff[i + 1] = _normalise(line, o - c0, h, ndata, noff[i], tok_n, tok_h, suf, suf_len)
    return cdata[: coff[n]], coff, ndata[: noff[n]], noff, odd


def normalise_lines(
    data: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(collapsed bytes, offsets, normalised bytes, offsets, odd) per line; `odd` lines hold a
    character outside ASCII text, where the Python reference must decide."""
    return _normalise_lines(data, starts, ends, _TOK_N, _TOK_H, _SUF, _SUF_LEN)

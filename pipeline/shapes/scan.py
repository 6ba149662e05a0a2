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

from pipeline.jit import use_kernel_cache
from pipeline.shapes.normalise import CMP_OPS, HEX, IDENT_WORDS, NUM, SAFE_WORDS

_TOK_N = np.frombuffer(NUM.encode(), np.uint8).copy()  # 7 UTF-8 bytes each
_TOK_H = np.frombuffer(HEX.encode(), np.uint8).copy()


def _words(words: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(bytes padded to one width, lengths) of a word list, in its order."""
    out = np.zeros((len(words), max(len(w) for w in words)), np.uint8)
    for k, w in enumerate(words):
        out[k, : len(w)] = np.frombuffer(w.encode(), np.uint8)
    return out, np.array([len(w) for w in words], np.int64)


# NUM_RX's vocabulary, passed to the kernels (not read as globals: numba's cache would keep
# an old list after normalise.py changed it)
_VOCAB = (
    _TOK_N,
    _TOK_H,
    *_words(CMP_OPS),
    *_words(SAFE_WORDS),
    *_words(IDENT_WORDS),
    *_words(("build", "incompatible")),
)

use_kernel_cache()  # before the first njit(cache=True) below


# Byte classes, ASCII: \s (\t \n \v \f \r, space), digit, \w, hex digit; ODD: not ASCII text
_SPACE, _DIGIT, _WORD, _HEXD, _ODD = 1, 2, 4, 8, 16
_CLS = np.zeros(256, np.uint8)
_CLS[:32] = _ODD
_CLS[127:] = _ODD
_CLS[[9, 10, 11, 12, 13, 32]] = _SPACE
_CLS[ord("0") : ord("9") + 1] = _DIGIT | _WORD | _HEXD
for _c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_":
    _CLS[_c] = _WORD | (_HEXD if _c in b"abcdefABCDEF" else 0)


@nb.njit(cache=True)
def _space(c):
    return _CLS[c] & _SPACE != 0


@nb.njit(cache=True)
def _digit(c):
    return _CLS[c] & _DIGIT != 0


@nb.njit(cache=True)
def _word(c):
    return _CLS[c] & _WORD != 0


@nb.njit(cache=True)
def _hexc(c):
    return _CLS[c] & _HEXD != 0


@nb.njit(cache=True)
def _digits(h, q, m):
    while q < m and _digit(h[q]):
        q += 1
    return q


@nb.njit(cache=True)
def _at(h, q, m, w, n):
    """Whether h[q:m] starts with w[:n]."""
    if q + n > m:
        return False
    for t in range(n):
        if h[q + t] != w[t]:
            return False
    return True


@nb.njit(cache=True)
def _edge(h, r, m):
    """Whether no word character follows r (\\b after a word character, \\B after another)."""
    return r == m or not _word(h[r])


@nb.njit(nogil=True, cache=True)
def _tail(h, q, m, tok_h):
    """End of `(?:[.-]?[0-9]+|[.-]HEX)+` at q, or -1 (greedy: nothing after it can fail)."""
    r = -1
    while q < m:
        c = h[q]
        sep = c == 46 or c == 45  # . -
        if sep and q + 1 < m and _digit(h[q + 1]):
            q = _digits(h, q + 1, m)
        elif _digit(c):
            q = _digits(h, q, m)
        elif sep and _at(h, q + 1, m, tok_h, 7):
            q += 8
        else:
            break
        r = q
    return r


@nb.njit(nogil=True, cache=True)
def _word_end(h, s, m, words, lens, tail_only, tok_h):
    """End of `(?:w1|w2|...)(?:TAIL|\\b)` at s (`TAIL` alone if tail_only), or -1: the
    words in order, as the alternation backtracks through them."""
    for w in range(words.shape[0]):
        n = lens[w]
        if _at(h, s, m, words[w], n):
            e = _tail(h, s + n, m, tok_h)
            if e >= 0:
                return e
            if not tail_only and _edge(h, s + n, m):
                return s + n
    return -1


@nb.njit(nogil=True, cache=True)
def _suffix(h, q, m, full, voc):
    """End of one suffix of NUM_RX at q, or -1; `full`: after a version of three parts. The
    alternatives in NUM_RX's order; an optional separator is greedy, and a word never starts
    with one, so taking it when it is there is the only path that can match."""
    tok_h, _, _, safe, safe_len, ident, ident_len, plus, plus_len = voc[1:]
    c = h[q]
    if (c == 97 or c == 98) and q + 1 < m and _digit(h[q + 1]):  # a1 b3
        return _digits(h, q + 1, m)
    s = q + 1 if c == 46 or (full and c == 45) else q  # 2.0M8, -M1
    if s < m and h[s] == 77 and s + 1 < m and _digit(h[s + 1]):
        return _digits(h, s + 1, m)
    s = q + 1 if c == 46 or c == 45 else q
    e = _word_end(h, s, m, safe, safe_len, False, tok_h)  # -SNAPSHOT .Final -rc.1
    if e >= 0:
        return e
    e = _word_end(h, q + 1 if c == 46 else q, m, ident, ident_len, False, tok_h)  # beta2 .dev0
    if e >= 0:
        return e
    if c == 45:  # -beta.2; -alpha after a version of three parts
        e = _word_end(h, q + 1, m, ident, ident_len, not full, tok_h)
        if e >= 0:
            return e
    if c == 43 and _at(h, q + 1, m, plus[0], plus_len[0]):  # +build.5
        e = _tail(h, q + 1 + plus_len[0], m, tok_h)
        if e >= 0:
            return e
    if c == 43 and _at(h, q + 1, m, plus[1], plus_len[1]):  # +incompatible
        if _edge(h, q + 1 + plus_len[1], m):
            return q + 1 + plus_len[1]
    if full and c == 45:  # 1.0.0-0, -<date>-<hash>
        e = -1
        if q + 1 < m and _digit(h[q + 1]):
            e = _digits(h, q + 1, m)
        elif _at(h, q + 1, m, tok_h, 7):
            e = q + 8
        if e >= 0:
            t = _tail(h, e, m, tok_h)
            return t if t >= 0 else e
    return -1


@nb.njit(nogil=True, cache=True)
def _num_end(h, p, m, voc):
    """End of NUM_RX's match at p in h[:m], or -1. Its branches, in order: an operator or
    `v` or a word boundary, then a version of three or more parts with any suffix; a
    comparison or `~` (not a lone `>`) before a version of two parts; a lone `^`, `v` or a
    word boundary before any version; digits inside a word. Every part after the first
    digits is greedy and optional, or a choice decided by the next characters, so the first
    path the regex tries is the one found here: no backtracking to spell out."""
    cmp2 = voc[2]
    c = h[p]
    loose = p == 0 or not _word(h[p - 1])  # \\B before an operator, \\b before v or a digit
    op = 0  # 1: a comparison or ~, 2: a lone ^, 3: a lone >
    q = p
    for k in range(cmp2.shape[0]):
        if p + 1 < m and c == cmp2[k, 0] and h[p + 1] == cmp2[k, 1]:
            op, q = 1, p + 2  # its `=` is no start of a version: nothing else can match
            break
    if op == 0 and loose and (c == 60 or c == 61 or c == 126):  # < = ~
        op, q = 1, p + 1
    elif op == 0 and loose and c == 62:  # >
        op, q = 3, p + 1
    elif op == 0 and loose and c == 94:  # ^
        op, q = 2, p + 1
    if op:
        if q + 1 < m and h[q] == 118 and _digit(h[q + 1]):
            q += 1  # ^v1.2
    elif c == 118:
        if not (loose and p + 1 < m and _digit(h[p + 1])):
            return -1
        q = p + 1  # v4.5.0
    elif _digit(c) and not loose:  # digits inside a word: float32, python3.6
        q = _digits(h, p, m)
        while q + 1 < m and h[q] == 46 and _digit(h[q + 1]):
            q = _digits(h, q + 1, m)
        return q
    if q >= m or not _digit(h[q]):
        return -1
    q = _digits(h, q, m)
    parts = 0
    while q + 1 < m and h[q] == 46:
        d = h[q + 1]
        if _digit(d):
            q = _digits(h, q + 1, m)
        elif (d == 120 or d == 88 or d == 42) and _edge(h, q + 2, m):  # 1.10.x, 2.*
            q += 2
        else:
            break
        parts += 1
    if (op == 1 and parts == 0) or (op == 3 and parts < 2):
        return -1  # x>=3, ~25 GB and class="pct">91.5% keep their operator
    while q < m:
        e = _suffix(h, q, m, parts >= 2, voc)
        if e < 0:
            break
        q = e
    return q


@nb.njit(nogil=True, cache=True)
def _normalise(c, m, h, out, o, voc):
    """normalise_line of the collapsed ASCII line c[:m], written at out[o:]; its new end.
    HEX_RX: a maximal hex run of 7+ holding a digit, with a non-word character (or the line's
    edge) on both sides; then NUM_RX over that, scanned leftmost-first like the regex."""
    tok_n, tok_h = voc[0], voc[1]
    k = 0
    p = 0
    while p < m:
        if _hexc(c[p]) and (p == 0 or not _word(c[p - 1])):
            q, dig = p, False
            while q < m and _hexc(c[q]):
                dig = dig or _digit(c[q])
                q += 1
            if dig and q - p >= 7 and (q == m or not _word(c[q])):
                for t in range(7):  # loops, not slice copies: numba compiles a slice copy's
                    h[k + t] = tok_h[t]  # shape check with its message, seconds per kernel
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
        b = h[p]
        start = _digit(b) or b == 118 or b in (126, 94, 60, 62, 61, 33)  # v ~ ^ < > = !
        q = _num_end(h, p, k, voc) if start else -1
        if q < 0:
            out[o] = h[p]
            o += 1
            p += 1
        else:
            for t in range(7):
                out[o + t] = tok_n[t]
            o += 7
            p = q
    return o


@nb.njit(nogil=True, cache=True)
def _normalise_lines(data, starts, ends, voc):
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
            for t in range(noff[i]):
                grown[t] = ndata[t]
            ndata = grown
        if not digits:  # HEX and NUM both need a digit: the collapsed line is the result
            for t in range(o - c0):
                ndata[noff[i] + t] = cdata[c0 + t]
            noff[i + 1] = noff[i] + o - c0
            continue
        line = cdata[c0:o]
        noff[i + 1] = _normalise(line, o - c0, h, ndata, noff[i], voc)
    return cdata[: coff[n]], coff, ndata[: noff[n]], noff, odd


def normalise_lines(
    data: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(collapsed bytes, offsets, normalised bytes, offsets, odd) per line; `odd` lines hold a
    character outside ASCII text, where the Python reference must decide."""
    return _normalise_lines(data, starts, ends, _VOCAB)

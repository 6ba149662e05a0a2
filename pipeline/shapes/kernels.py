"""Compiled kernels over Arrow string buffers: the per-item work of shapes, no Python per item.

Each has a readable reference in normalise.py, the tests' oracle (the line normaliser is
scan.py):

- `split_lines`: `_lines` (a side's lines; "" is no line, or one blank line);
- `diff_digit`: `changed_lines` (difflib's SequenceMatcher, autojunk off: the same longest
  block recursion and tie-breaks) and the digit-only test of `edit_shape_refs`;
- `join_lines`: the `-removed` / `+added` shape lines, or a side's normalised lines as
  `normalise_text` joins them.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import pyarrow as pa

from pipeline.jit import use_kernel_cache

use_kernel_cache()  # before the first njit(cache=True) below

# ------------------------------------------------------------------------ Arrow buffers


def buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(utf-8 bytes, int64 offsets with len + 1 entries) of a string array without nulls."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != pa.large_string():
        arr = arr.cast(pa.large_string())
    _, off, data = arr.buffers()
    offsets = np.frombuffer(off, np.int64, len(arr) + 1, arr.offset * 8)
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return raw, offsets


def from_buffers(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """A large_string array over (bytes, offsets) as the kernels return them."""
    buf = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.large_string(), len(offsets) - 1, buf)


# ------------------------------------------------------------------------ lines


@nb.njit(nogil=True, cache=True)
def split_lines(data, offsets, blank):
    """(starts, ends, per-text line offsets): text k's lines split at "\\n"; "" has no line,
    or one empty line where blank[k] (the item counts a blank line)."""
    n = offsets.size - 1
    count = 0
    for k in range(n):
        s, e = offsets[k], offsets[k + 1]
        count += (1 if blank[k] else 0) if s == e else 1
        for p in range(s, e):
            count += data[p] == 10
    starts = np.empty(count, np.int64)
    ends = np.empty(count, np.int64)
    line_off = np.empty(n + 1, np.int64)
    t = 0
    for k in range(n):
        line_off[k] = t
        s, e = offsets[k], offsets[k + 1]
        if s == e and not blank[k]:
            continue
        start = s
        for p in range(s, e):
            if data[p] == 10:
                starts[t], ends[t] = start, p
                t += 1
                start = p + 1
        starts[t], ends[t] = start, e
        t += 1
    line_off[n] = t
    return starts, ends, line_off


# ------------------------------------------------------------------------ line diff


@nb.njit(cache=True)
def _same(xd, xs, xe, yd, ys, ye):
    if xe - xs != ye - ys:
        return False
    for t in range(xe - xs):
        if xd[xs + t] != yd[ys + t]:
            return False
    return True


@nb.njit(nogil=True, cache=True)
def _same_lines(d, off, a0, a1, b0, b1):
    """Whether lines a0:a1 and b0:b1 of (d, off) are equal, line by line."""
    if a1 - a0 != b1 - b0:
        return False
    for t in range(a1 - a0):
        if not _same(d, off[a0 + t], off[a0 + t + 1], d, off[b0 + t], off[b0 + t + 1]):
            return False
    return True


@nb.njit(nogil=True, cache=True)
def _longest(a, b, alo, ahi, blo, bhi, head, prev, lens, when, base):
    """difflib's find_longest_match over a[alo:ahi], b[blo:bhi] with no junk: the longest
    block, ending first in a, then first in b. b's occurrences are walked from the last one
    down, so a run's length at j - 1 is still the previous row's; `when` stamps each entry
    with its row (base + i), so no reset is needed between calls."""
    besti, bestj, bestk, bend = alo, blo, 0, -1
    for i in range(alo, ahi):
        j = head[a[i]]
        while j >= blo:
            if j < bhi:
                k = 1
                if i > alo and j > blo and when[j - 1] == base + i - 1:
                    k = lens[j - 1] + 1
                lens[j] = k
                when[j] = base + i
                if k > bestk or (k == bestk and bend == i):
                    besti, bestj, bestk, bend = i - k + 1, j - k + 1, k, i
            j = prev[j]
    return besti, bestj, bestk


@nb.njit(nogil=True, cache=True)
def _local_ids(data, starts, ends, a0, a1, b0, b1, ids, table):
    """ids of lines a0:a1 and b0:b1 (one item's before and after): equal lines share a small
    id (open addressing on FNV-1a, the bytes compared: a hash collision never merges two)."""
    size = 2
    while size < 2 * (a1 - a0 + b1 - b0):
        size <<= 1
    table[:size] = -1
    k = 0
    for lo, hi in ((a0, a1), (b0, b1)):
        for i in range(lo, hi):
            s, e = starts[i], ends[i]
            h = np.int64(-3750763034362895579)  # FNV-1a; int64 arithmetic wraps
            for p in range(s, e):
                h = (h ^ np.int64(data[p])) * np.int64(1099511628211)
            slot = (h ^ (h >> 29)) & (size - 1)
            while True:
                f = table[slot]
                if f < 0:
                    table[slot] = i
                    ids[i] = k
                    k += 1
                    break
                if _same(data, starts[f], ends[f], data, s, e):
                    ids[i] = ids[f]
                    break
                slot = (slot + 1) & (size - 1)


@nb.njit(nogil=True, cache=True)
def diff_digit(data, starts, ends, cdata, coff, ndata, noff, line_off, empty):
    """(changed per line, digit_only per item) for n items whose before is text k and after
    text n + k of line_off: lines outside difflib's matching blocks are changed; digit-only
    is "the collapsed lines differ but the normalised lines are equal", over the lines of
    the non-empty texts only (`empty`: the text is "", its one blank line aside)."""
    n = (line_off.size - 1) // 2
    changed = np.ones(starts.size, np.bool_)
    digit = np.zeros(n, np.bool_)
    ids = np.empty(starts.size, np.int64)
    both, longest = 1, 1
    for k in range(n):
        lb = line_off[n + k + 1] - line_off[n + k]
        both = max(both, line_off[k + 1] - line_off[k] + lb)
        longest = max(longest, lb)
    table = np.empty(4 * both, np.int64)
    head = np.full(both, -1, np.int64)
    prev = np.empty(longest, np.int64)
    lens = np.zeros(longest, np.int64)
    when = np.full(longest, -1, np.int64)
    stack = np.empty((64, 4), np.int64)
    stamp = 0
    for k in range(n):
        a0, a1 = line_off[k], line_off[k + 1]
        b0, b1 = line_off[n + k], line_off[n + k + 1]
        xa, xb = (a1 if empty[k] else a0), (b1 if empty[n + k] else b0)
        if not _same_lines(cdata, coff, xa, a1, xb, b1):
            digit[k] = _same_lines(ndata, noff, xa, a1, xb, b1)
        la, lb = a1 - a0, b1 - b0
        if la == 0 or lb == 0:
            continue
        _local_ids(data, starts, ends, a0, a1, b0, b1, ids, table)
        a, b = ids[a0:a1], ids[b0:b1]
        for j in range(lb):
            prev[j] = head[b[j]]
            head[b[j]] = j
        stack[0, 0], stack[0, 1], stack[0, 2], stack[0, 3] = 0, la, 0, lb
        top = 1
        while top > 0:  # get_matching_blocks' queue; the matched set is order-free
            top -= 1
            alo, ahi, blo, bhi = stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3]
            i, j, size = _longest(a, b, alo, ahi, blo, bhi, head, prev, lens, when, stamp - alo)
            stamp += ahi - alo + 1
            if size == 0:
                continue
            for t in range(size):
                changed[a0 + i + t] = False
                changed[b0 + j + t] = False
            if top + 2 > stack.shape[0]:
                grown = np.empty((stack.shape[0] * 2, 4), np.int64)
                for t in range(top):
                    grown[t, 0], grown[t, 1] = stack[t, 0], stack[t, 1]
                    grown[t, 2], grown[t, 3] = stack[t, 2], stack[t, 3]
                stack = grown
            if alo < i and blo < j:
                stack[top, 0], stack[top, 1], stack[top, 2], stack[top, 3] = alo, i, blo, j
                top += 1
            if i + size < ahi and j + size < bhi:
                stack[top, 0], stack[top, 1] = i + size, ahi
                stack[top, 2], stack[top, 3] = j + size, bhi
                top += 1
        for j in range(lb):
            head[b[j]] = -1
    return changed, digit


@nb.njit(nogil=True, cache=True)
def join_lines(ndata, noff, changed, line_off, edit):
    """(bytes, offsets) per item of normalised lines (ndata/noff) joined: for the shape,
    "-" + each changed before line, then "+" + each changed after line, by "\n"; for the
    edit key (`edit`), each side's non-empty lines by " ", the sides by "\x1f"."""
    n = (line_off.size - 1) // 2
    offsets = np.zeros(n + 1, np.int64)
    out = np.empty(0, np.uint8)
    for write in (False, True):
        if write:
            out = np.empty(offsets[n], np.uint8)
        for k in range(n):
            p = offsets[k]
            first = True
            for side in range(2):
                if edit and side == 1:
                    if write:
                        out[p] = 31
                    p += 1
                    first = True
                for t in range(line_off[side * n + k], line_off[side * n + k + 1]):
                    s, e = noff[t], noff[t + 1]
                    if (edit and s == e) or (not edit and not changed[t]):
                        continue
                    lead = (0 if first else 1) + (0 if edit else 1)
                    if write:
                        if not first:
                            out[p] = 32 if edit else 10
                        if not edit:
                            out[p + lead - 1] = 45 if side == 0 else 43  # - / +
                        for t in range(e - s):
                            out[p + lead + t] = ndata[s + t]
                    p += lead + e - s
                    first = False
            if not write:
                offsets[k + 1] = p
    return out, offsets

"""What an edit changes, as a set: two edits are duplicates only if they change the same.

Two edits of one line share most of their text, so their shingle Jaccard is high whatever
they do: the fix `floar32 -> float32` and the edit that made the typo (`bfloat16 ->
floar32`), two version bumps to different targets, a re-wrap and its undoing. Dedup also asks
that their changes match (dedup.change_threshold), with this definition:

    span    = before and after without their common prefix and suffix (code points), the cut
              widened to whole \\w runs (`floar32` -> `float32`, not `r` -> `t`)
    tokens  = the spans' words (`\\w+`); if both spans have the same words, their code-aware
              tokens (`\\w+|[^\\w\\s]`); if the same tokens too (a re-indent, a re-wrap),
              those and whitespace runs. Words first: the symbols around a word an edit puts
              in (`"pandas",` and `"sentencepiece",`) would make two different edits alike
    set     = each token the edit removes ("-": in the before span and not matched in the
              after span, as multisets) and puts in ("+"), the k-th copy of a token its own
              element: hash = murmur3_32(pack("<3I", tag(side), t(token), k))
    else    = (the same tokens and whitespace, reordered) the spans' shingles as shingles.py
              makes them, fields "-" and "+"

Two empty sets (neither edit changes anything) are the same change. `change_elements` is the
readable definition; `change_sets` makes a batch's in one compiled pass (shingle_kernels).
"""

from __future__ import annotations

import re
import struct
from collections import Counter

import numpy as np
import pyarrow as pa

from pipeline.dedup.shingle_kernels import change_kernel
from pipeline.dedup.shingles import (
    TOKEN_RE,
    _field_bytes,
    _layout,
    ascii_hashes,
    char_classes,
    csr_of_chunks,
    field_shingles,
    field_tag,
    murmur3_32,
    shingle_hash,
)

SIDES = ("-", "+")  # the tags of what an edit removes and what it puts in
WORD_RE = re.compile(r"\w+")
WS_TOKEN_RE = re.compile(r"\w+|\s+|[^\w\s]")


def _word(c: str) -> bool:
    return re.fullmatch(r"\w", c) is not None


def _ws(token: str) -> str:
    """A whitespace token as its kind: one that breaks a line, or one that does not (the same
    re-wrap or re-indent at another depth is the same change)."""
    if not token.isspace():
        return token
    return "\n" if "\n" in token else " "


def change_span(before: str, after: str) -> tuple[str, str]:
    """What an edit removes and what it puts in: `before` and `after` without their common
    prefix and suffix, the cut widened to whole `\\w` runs."""
    lb, la, p, s = len(before), len(after), 0, 0
    while p < lb and p < la and before[p] == after[p]:
        p += 1
    while s < lb - p and s < la - p and before[lb - 1 - s] == after[la - 1 - s]:
        s += 1
    inside = (p < lb - s and _word(before[p])) or (p < la - s and _word(after[p]))
    if p and _word(before[p - 1]) and inside:
        while p and _word(before[p - 1]):
            p -= 1
    inside = (lb - s > p and _word(before[lb - s - 1])) or (la - s > p and _word(after[la - s - 1]))
    if s and _word(before[lb - s]) and inside:
        while s and _word(before[lb - s]):
            s -= 1
    return before[p : lb - s], after[p : la - s]


def change_elements(before: str, after: str, n: int) -> set[int]:
    """The change set of one edit (module docstring), as hashes: the reference."""
    spans = change_span(before, after)
    for regex in (WORD_RE, TOKEN_RE, WS_TOKEN_RE):
        rem, ins = (Counter(map(_ws, regex.findall(x))) for x in spans)
        out = {
            murmur3_32(struct.pack("<3I", field_tag(side), murmur3_32(t.encode()), k))
            for side, diff in zip(SIDES, (rem - ins, ins - rem), strict=True)
            for t, c in diff.items()
            for k in range(1, c + 1)
        }
        if out:
            return out
    return {
        shingle_hash(f, s)
        for f, x in zip(SIDES, spans, strict=True)
        for s in field_shingles(f, x, n)
    }


def change_sets(
    before: pa.Array | pa.ChunkedArray, after: pa.Array | pa.ChunkedArray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each edit's change set (change_elements, batch-made) as CSR (offsets int64[N+1],
    values uint32: sorted, unique); null text is empty."""
    data, offs = _field_bytes([before, after])
    data = data if len(data) else np.zeros(1, np.uint8)
    nitems = offs.shape[1] - 1
    chunks, start = _layout(offs, 1)  # at most a hash per byte of the two sides
    out = np.empty(max(int(start[-1]), 1), dtype=np.uint32)
    counts = np.zeros(nitems, dtype=np.int64)
    tags = np.array([field_tag(s) for s in SIDES], dtype=np.uint32)
    offs = np.ascontiguousarray(offs)
    change_kernel(data, offs, tags, n, char_classes(), ascii_hashes(), chunks, start, out, counts)
    return csr_of_chunks(chunks, start, out, counts)

"""What an edit changes, as a set: two edits are duplicates only if they make the same change
from the same text, side by side.

Two edits of one line share most of their text, so their shingle Jaccard is high whatever
they do: the fix `floar32 -> float32` and the edit that made the typo (`bfloat16 ->
floar32`), two version bumps to different targets, a re-wrap and its undoing. Two edits that
delete the same large block share most of their text whatever they put in its place, and the
same line added after a `}` and after nothing shares all its words. So dedup also asks
(dedup.change_threshold) that, for what the edits remove and for what they put in apart, both
their changes and their text match, with this definition:

    span    = before and after without their common prefix and suffix (code points), the cut
              widened to whole \\w runs (`floar32` -> `float32`, not `r` -> `t`)
    values  = the spans' words (`\\w+`); if both spans have the same words, their code-aware
              tokens (`\\w+|[^\\w\\s]`); if the same tokens too (a re-indent, a re-wrap),
              those and whitespace runs by kind (whether a run breaks a line, holds a tab,
              holds other space: tabs -> spaces is not spaces -> tabs, but the same re-wrap at
              another depth is one change); if the same again (the tokens reordered), the
              spans' token n-grams (shingles.py's, field "change"). Words first: the symbols
              around a word an edit puts in (`"pandas",` and `"sentencepiece",`) would make
              two different edits alike
    change  = each value the edit removes (side 0: in the before span and not matched in the
              after span, as multisets) and puts in (side 1), the k-th copy its own element:
              (murmur3_32(pack("<2I", t(value), k)) & ~3) | side
    text    = each side's whole text (before: side 0, after: side 1) as n-grams of its tokens
              and whitespace runs as written (field "text"; `  };` is not `};`: a short
              edit's text is mostly its indentation): (shingle hash & ~3) | 2 | side

The element's two low bits say which of the four it belongs to, so a pair is compared four
times apart (`change_jaccard`: the lowest of the four Jaccards; one empty in both edits is
equal, empty in one is not). What an edit removes and what it puts in are net of each other,
so an edit and its reverse (A -> B, B -> A) share no change on either side: they run
opposite ways. Two edits that change nothing and have no text are the same.
`change_elements` is the readable definition; `change_sets` makes a batch's in one compiled
pass (shingle_kernels).
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from pipeline.dedup.shingle_kernels import WS_KIND, change_kernel
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
from pipeline.nfc import nfc_text

SPAN_FIELD = "change"  # the field tag of the spans' shingles, one for both sides
TEXT_FIELD = "text"  # the field tag of the sides' own shingles
TEXT_BIT = 2  # an element's bit 1: 0 a change element, 1 a text element; bit 0: its side
WORD_RE = re.compile(r"\w+")
WS_TOKEN_RE = re.compile(r"\w+|\s+|[^\w\s]")


def _word(c: str) -> bool:
    return re.fullmatch(r"\w", c) is not None


def _ws(token: str) -> str:
    """A whitespace token as its kind (WS_KIND): whether it breaks a line, holds a tab, holds
    other space; not its length (the same re-wrap or re-indent at another depth is the same
    change)."""
    if not token.isspace():
        return token
    line = any(c in "\n\r" for c in token)
    other = any(c not in "\n\r\t" for c in token)
    return chr(WS_KIND[4 * line + 2 * ("\t" in token) + other])


def element(value: int, k: int, side: int) -> int:
    """The change element of the k-th copy of `value` on `side` (0 removed, 1 put in)."""
    return (murmur3_32(struct.pack("<2I", value, k)) & ~3 & 0xFFFFFFFF) | side


def text_elements(text: str, side: int, n: int) -> set[int]:
    """The text elements of one side: n-grams of its tokens and whitespace runs."""
    toks = WS_TOKEN_RE.findall(text)
    k = min(n, len(toks))
    grams = [toks[i : i + k] for i in range(len(toks) - k + 1)] if toks else []
    return {(shingle_hash(TEXT_FIELD, g) & ~3 & 0xFFFFFFFF) | TEXT_BIT | side for g in grams}


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
    """The change set of one edit (module docstring), as hashes: the reference. The text is
    taken in NFC, as change_sets' kernel reads it (pipeline/nfc.py)."""
    before, after = nfc_text(before), nfc_text(after)
    return _changed(before, after, n) | text_elements(before, 0, n) | text_elements(after, 1, n)


def _changed(before: str, after: str, n: int) -> set[int]:
    spans = change_span(before, after)

    def hashed(regex: re.Pattern[str]) -> Callable[[str], list[int]]:
        return lambda x: [murmur3_32(_ws(t).encode()) for t in regex.findall(x)]

    def shingled(x: str) -> list[int]:
        return [shingle_hash(SPAN_FIELD, s) for s in field_shingles(SPAN_FIELD, x, n)]

    for values in (hashed(WORD_RE), hashed(TOKEN_RE), hashed(WS_TOKEN_RE), shingled):
        rem, ins = (Counter(values(x)) for x in spans)
        out = {
            element(v, k, side)
            for side, diff in enumerate((rem - ins, ins - rem))
            for v, c in diff.items()
            for k in range(1, c + 1)
        }
        if out:
            return out
    return set()


def change_jaccard(x: set[int], y: set[int]) -> float:
    """Whether two change sets make the same change from the same text, the reference of the
    compiled clusters.exact_jaccard(change=True): the lowest of the four Jaccards (change and
    text, each side; an element's two low bits say which), one empty in both edits counting
    1.0 and in one 0.0."""
    low = 1.0
    for part in range(4):
        a, b = ({v for v in s if v & 3 == part} for s in (x, y))
        if a or b:
            low = min(low, len(a & b) / len(a | b))
    return low


def change_sets(
    before: pa.Array | pa.ChunkedArray, after: pa.Array | pa.ChunkedArray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each edit's change set (change_elements, batch-made) as CSR (offsets int64[N+1],
    values uint32: sorted, unique); null text is empty."""
    data, offs = _field_bytes([before, after])
    data = data if len(data) else np.zeros(1, np.uint8)
    nitems = offs.shape[1] - 1
    chunks, start = _layout(offs, 1)  # a hash per byte of the two sides at most, twice:
    start = 2 * start  # the change, and the text
    out = np.empty(max(int(start[-1]), 1), dtype=np.uint32)
    counts = np.zeros(nitems, dtype=np.int64)
    tags = np.array([field_tag(SPAN_FIELD), field_tag(TEXT_FIELD)], dtype=np.uint32)
    offs = np.ascontiguousarray(offs)
    change_kernel(data, offs, tags, n, char_classes(), ascii_hashes(), chunks, start, out, counts)
    return csr_of_chunks(chunks, start, out, counts)

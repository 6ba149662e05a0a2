"""Shingles of an item as 32-bit hashes, built for a whole batch at once.

The shingle hash, precisely (`shingle_hash` is the reference; the batch kernel matches it):

    token   = a match of `\\w+|[^\\w\\s]` (Python `re` semantics, Unicode), or in "chars" mode
              one code point of the raw text (whitespace included)
    t(tok)  = murmur3_32(tok.encode("utf-8"), seed=0)          (MurmurHash3 x86_32)
    tag(f)  = murmur3_32(f.encode("utf-8"), seed=0)            f = field name, e.g. "before"
    shingle = n consecutive tokens of one field; a field with 1..n-1 tokens gives one shingle
              of all its tokens; an empty field gives none
    hash    = murmur3_32(struct.pack("<%dI" % (k + 1), tag(f), t(tok_1), ..., t(tok_k)), seed=0)

An item's shingle set is the union over its fields (the tag keeps `x` in `before` apart from
`x` in `after`). The text is taken in Unicode NFC (pipeline/nfc.py), so an edit and its NFD
twin share every shingle. No lower-casing or digit normalisation: that belongs to the shapes
stage.
The batch kernel (shingle_kernels.py) tokenises the Arrow UTF-8 buffers directly (a code-point
class table built from Python's own `re`, so `\\w`/`\\s` agree with `re` for every code point)
and hashes each token's bytes in place: no Python object per token, item or shingle.
"""

from __future__ import annotations

import re
import struct
from functools import lru_cache

import numba as nb
import numpy as np
import pyarrow as pa

from pipeline.dedup.shingle_kernels import shingle_kernel
from pipeline.nfc import nfc_array, nfc_text
from pipeline.schema import TOKEN_PATTERN

TOKEN_RE = re.compile(TOKEN_PATTERN)
MODES = ("tokens", "chars")
_M32 = 0xFFFFFFFF


# ---------------------------------------------------------------- reference (pure Python)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def fmix32(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32, the reference the numba kernels are tested against."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _M32
    n = len(data)
    tail_at = n - n % 4
    for i in range(0, tail_at, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (_rotl((k * c1) & _M32, 15) * c2) & _M32
        h = (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & _M32
    k = 0
    tail = data[tail_at:]
    for j in reversed(range(len(tail))):
        k ^= tail[j] << (8 * j)
    if tail:
        h ^= (_rotl((k * c1) & _M32, 15) * c2) & _M32
    return fmix32(h ^ n)


def field_tag(field: str) -> int:
    return murmur3_32(field.encode("utf-8"))


def tokens(text: str, mode: str = "tokens") -> list[str]:
    """The tokens of one field's text in NFC: code-aware words and single symbols, or code
    points."""
    text = nfc_text(text)
    return list(text) if mode == "chars" else TOKEN_RE.findall(text)


def shingle_hash(field: str, toks: tuple[str, ...] | list[str]) -> int:
    """The 32-bit hash of one shingle (a tuple of tokens of `field`): see the module docstring.

    This is the `hashfunc` to give `datasketch.MinHash` to reproduce our signatures.
    """
    words = [field_tag(field), *(murmur3_32(t.encode("utf-8")) for t in toks)]
    return murmur3_32(struct.pack(f"<{len(words)}I", *words))


def field_shingles(field: str, text: str, n: int, mode: str = "tokens") -> list[tuple[str, ...]]:
    toks = tokens(text, mode)
    if not toks:
        return []
    if len(toks) < n:
        return [tuple(toks)]
    return [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]


def item_shingles(
    item: dict[str, str], fields: list[str], n: int, mode: str = "tokens"
) -> set[tuple[str, tuple[str, ...]]]:
    """The shingle set of one item as (field, tokens) pairs: the slow, readable definition."""
    return {(f, s) for f in fields for s in field_shingles(f, item.get(f) or "", n, mode)}


# ---------------------------------------------------------------- batch (shingle_kernels.py)


@lru_cache(maxsize=1)
def char_classes() -> np.ndarray:
    """Class of every code point under Python's `re`: 0 = \\s, 1 = \\w, 2 = anything else.

    `re` itself classifies them, run by run over one string of all code points, made from
    their UTF-32 codes: 4x faster than joining a million chr() objects (about 25 ms)."""
    every = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    cls = np.full(0x110000, 2, dtype=np.uint8)
    for m in re.finditer(r"\w+", every):
        cls[m.start() : m.end()] = 1
    for m in re.finditer(r"\s+", every):
        cls[m.start() : m.end()] = 0
    return cls


@lru_cache(maxsize=1)
def ascii_hashes() -> np.ndarray:
    """murmur3_32 of each one-byte token (most symbols): a lookup instead of a hash."""
    return np.array([murmur3_32(bytes([b])) for b in range(128)], dtype=np.uint32)


def _chunks(c: pa.Array | pa.ChunkedArray):
    """(offsets, bytes) of each chunk of a string column in NFC (pipeline/nfc.py), without
    copying ASCII text."""
    for a in c.chunks if isinstance(c, pa.ChunkedArray) else [c]:
        if a.type not in (pa.string(), pa.large_string()):
            a = a.cast(pa.large_string())
        a = nfc_array(a)
        if a.null_count:
            import pyarrow.compute as pc  # here: importing it costs 25 ms, most text has no nulls

            a = pc.fill_null(a, "")
        _, off_buf, data_buf = a.buffers()
        width = np.int32 if a.type == pa.string() else np.int64
        o = np.frombuffer(off_buf, dtype=width)[a.offset : a.offset + len(a) + 1]
        yield o.astype(np.int64), np.frombuffer(data_buf or b"", dtype=np.uint8)[o[0] : o[-1]]


def _field_bytes(columns: list[pa.Array | pa.ChunkedArray]) -> tuple[np.ndarray, np.ndarray]:
    """All fields' UTF-8 bytes in one buffer, and offsets[f, i] into it (item i, field f)."""
    datas, offs, shift = [], [], 0
    for c in columns:
        parts = []
        for o, d in _chunks(c):
            parts.append(o[:-1] - o[0] + shift)
            datas.append(d)
            shift += len(d)
        parts.append(np.array([shift], dtype=np.int64))
        offs.append(np.concatenate(parts))
    data = np.concatenate(datas) if datas else np.empty(0, np.uint8)
    return data, np.stack(offs) if offs else np.zeros((0, 1), np.int64)


NO_PERMUTATIONS = np.empty(0, dtype=np.uint32)


def shingle_sets(
    columns: list[pa.Array | pa.ChunkedArray], fields: list[str], n: int, mode: str = "tokens"
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique shingle hashes per item, as CSR: (offsets int64[N+1], values uint32).

    `columns[k]` holds field `fields[k]` for every item (null = empty).
    """
    offsets, values, _ = signed_sets(columns, fields, n, mode, NO_PERMUTATIONS, NO_PERMUTATIONS)
    return offsets, values


def signed_sets(
    columns: list[pa.Array | pa.ChunkedArray],
    fields: list[str],
    n: int,
    mode: str,
    a: np.ndarray,
    b: np.ndarray,
    sig: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """shingle_sets, and the items' MinHash signatures under permutations (a, b) (as
    minhash.signatures gives them; uint32[N, 0] for no permutations), made in one pass.
    `sig`: where to write the signatures (uint32[N, len(a)], C order), or None for new."""
    if mode not in MODES:
        raise ValueError(f"shingle mode {mode!r}: use one of {', '.join(MODES)}")
    if n < 1:
        raise ValueError(f"shingle size must be >= 1, got {n}")
    data, offs = _field_bytes(columns)
    data = data if len(data) else np.zeros(1, np.uint8)
    nitems = offs.shape[1] - 1
    if sig is None:
        sig = np.empty((nitems, len(a)), dtype=np.uint32)
    elif sig.shape != (nitems, len(a)) or sig.dtype != np.uint32 or not sig.flags.c_contiguous:
        raise ValueError(f"sig must be C-ordered uint32[{nitems}, {len(a)}]")
    chunks, start = _layout(offs, n)
    out = np.empty(max(int(start[-1]), 1), dtype=np.uint32)  # only what is written is touched
    counts = np.zeros(nitems, dtype=np.int64)
    tags = np.array([field_tag(f) for f in fields], dtype=np.uint32)
    a, b = np.ascontiguousarray(a, np.uint32), np.ascontiguousarray(b, np.uint32)
    cls, one, chars = char_classes(), ascii_hashes(), mode == "chars"
    shingle_kernel(data, offs, tags, n, chars, cls, one, chunks, start, out, counts, a, b, sig)
    return (*csr_of_chunks(chunks, start, out, counts), sig)


def csr_of_chunks(
    chunks: np.ndarray, start: np.ndarray, out: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The CSR (offsets, values) of sets a kernel wrote chunk by chunk from out[start[c]]
    (counts[i]: item i's set size; _layout's chunks and starts)."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    if len(chunks) == 2:  # one chunk: its sets are in place
        return offsets, out[: offsets[-1]]
    values = np.empty(int(offsets[-1]), dtype=np.uint32)
    for c in range(len(chunks) - 1):
        lo, hi = offsets[chunks[c]], offsets[chunks[c + 1]]
        values[lo:hi] = out[start[c] : start[c] + hi - lo]
    return offsets, values


def _layout(offs: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(chunks, start): chunk c is items chunks[c]..chunks[c+1]-1, its sets written from
    start[c] of the work buffer, sized by an upper bound: a field of k bytes has at most k
    tokens, so at most max(k - n + 1, 1) shingles. One chunk per thread would leave threads
    idle behind a slow one; a single thread has one chunk, its sets then in place."""
    nitems = offs.shape[1] - 1
    threads = nb.get_num_threads()
    nchunks = min(max(nitems, 1), 1 if threads == 1 else 8 * threads)
    chunks = np.linspace(0, nitems, nchunks + 1).astype(np.int64)
    size = np.diff(offs, axis=1)
    bound = np.where(size > 0, np.maximum(size - n + 1, 1), 0).sum(axis=0)
    start = np.zeros(nitems + 1, dtype=np.int64)
    np.cumsum(bound, out=start[1:])
    return chunks, start[chunks]

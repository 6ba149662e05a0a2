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
`x` in `after`). No lower-casing or digit normalisation: that belongs to the shapes stage.
The batch kernel tokenises the Arrow UTF-8 buffers directly (a code-point class table built
from Python's own `re`, so `\\w`/`\\s` agree with `re` for every code point) and hashes each
token's bytes in place: no Python object per token, item or shingle.
"""

from __future__ import annotations

import re
import struct
from functools import lru_cache

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

TOKEN_RE = re.compile(r"\w+|[^\w\s]")
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
    """The tokens of one field's text: code-aware words and single symbols, or code points."""
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


# ---------------------------------------------------------------- batch kernels (numba)


@lru_cache(maxsize=1)
def char_classes() -> np.ndarray:
    """Class of every code point under Python's `re`: 0 = \\s, 1 = \\w, 2 = anything else."""
    s = "".join(map(chr, range(0x110000)))
    cls = np.full(0x110000, 2, dtype=np.uint8)
    for m in re.finditer(r"\w+", s):
        cls[m.start() : m.end()] = 1
    for m in re.finditer(r"\s+", s):
        cls[m.start() : m.end()] = 0
    return cls


@lru_cache(maxsize=1)
def ascii_hashes() -> np.ndarray:
    """murmur3_32 of each one-byte token (most symbols): a lookup instead of a hash."""
    return np.array([murmur3_32(bytes([b])) for b in range(128)], dtype=np.uint32)


@nb.njit(inline="always")
def _mix_k(k):
    k = (k * np.uint64(0xCC9E2D51)) & np.uint64(0xFFFFFFFF)
    k = ((k << np.uint64(15)) | (k >> np.uint64(17))) & np.uint64(0xFFFFFFFF)
    return (k * np.uint64(0x1B873593)) & np.uint64(0xFFFFFFFF)


@nb.njit(inline="always")
def _mix_h(h, k):
    h ^= k
    h = ((h << np.uint64(13)) | (h >> np.uint64(19))) & np.uint64(0xFFFFFFFF)
    return (h * np.uint64(5) + np.uint64(0xE6546B64)) & np.uint64(0xFFFFFFFF)


@nb.njit(inline="always")
def _fmix(h):
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & np.uint64(0xFFFFFFFF)
    return h ^ (h >> np.uint64(16))


@nb.njit(inline="always")
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


@nb.njit(inline="always")
def _shingle(tag, toks, s, k):
    """murmur3_32 over the little-endian words (tag, toks[s], ..., toks[s+k-1])."""
    h = _mix_h(np.uint64(0), _mix_k(tag))
    for j in range(s, s + k):
        h = _mix_h(h, _mix_k(np.uint64(toks[j])))
    return _fmix(h ^ np.uint64(4 * (k + 1)))


@nb.njit(inline="always")
def _cp_len(b):
    if b < 0x80:
        return 1
    if b < 0xE0:
        return 2
    if b < 0xF0:
        return 3
    return 4


@nb.njit(inline="always")
def _cp(data, i, n):
    b = np.int64(data[i])
    if n == 1:
        return b
    cp = b & (0x3F >> (n - 1))
    for j in range(1, n):
        cp = (cp << 6) | (np.int64(data[i + j]) & 0x3F)
    return cp


@nb.njit(cache=True)
def _tokenise(data, s, e, chars, cls, one, out):
    """Token hashes of data[s:e] into out; returns how many. one[b] = hash of ASCII byte b."""
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
            out[nt] = one[b] if n == 1 else _murmur_bytes(data, i, i + n)
            nt += 1
        elif c == 1:
            if word_start < 0:
                word_start = i
        else:
            if word_start >= 0:
                out[nt] = _murmur_bytes(data, word_start, i)
                nt += 1
                word_start = -1
            if c == 2:
                out[nt] = one[b] if n == 1 else _murmur_bytes(data, i, i + n)
                nt += 1
        i += n
    if word_start >= 0:
        out[nt] = _murmur_bytes(data, word_start, e)
        nt += 1
    return nt


@nb.njit(parallel=True, cache=True)
def _shingle_kernel(data, offs, tags, n, chars, cls, one, region, out, counts):
    """For item i: shingles of every field into out[region[i]:region[i+1]], sorted, unique."""
    nitems = counts.shape[0]
    nf = tags.shape[0]
    for i in nb.prange(nitems):
        r0 = region[i]
        w = r0
        longest = 0
        for f in range(nf):
            longest = max(longest, offs[f, i + 1] - offs[f, i])
        toks = np.empty(longest, dtype=np.uint32)
        for f in range(nf):
            nt = _tokenise(data, offs[f, i], offs[f, i + 1], chars, cls, one, toks)
            if nt == 0:
                continue
            k = n if nt >= n else nt
            tag = np.uint64(tags[f])
            for p in range(nt - k + 1):
                out[w] = _shingle(tag, toks, p, k)
                w += 1
        m = w - r0
        if m > 1:
            seg = out[r0:w]
            seg.sort()
            u = 1
            for j in range(1, m):
                if seg[j] != seg[u - 1]:
                    seg[u] = seg[j]
                    u += 1
            m = u
        counts[i] = m


@nb.njit(parallel=True, cache=True)
def _bounds(data, offs, n, chars):
    """Upper bound of shingles per item: a field of k non-space bytes has <= k tokens."""
    nitems = offs.shape[1] - 1
    out = np.zeros(nitems, dtype=np.int64)
    for i in nb.prange(nitems):
        total = 0
        for f in range(offs.shape[0]):
            k = 0
            for j in range(offs[f, i], offs[f, i + 1]):
                b = data[j]
                if chars or not (b == 32 or 9 <= b <= 13):
                    k += 1
            if k > 0:
                total += max(k - n + 1, 1)
        out[i] = total
    return out


@nb.njit(parallel=True, cache=True)
def _compact(out, region, offsets, values):
    for i in nb.prange(offsets.shape[0] - 1):
        s = offsets[i]
        r = region[i]
        for j in range(offsets[i + 1] - s):
            values[s + j] = out[r + j]


def _chunks(c: pa.Array | pa.ChunkedArray):
    """(offsets, bytes) of each chunk of a string column, without copying the text."""
    for a in c.chunks if isinstance(c, pa.ChunkedArray) else [c]:
        if a.type not in (pa.string(), pa.large_string()):
            a = a.cast(pa.large_string())
        if a.null_count:
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


def shingle_sets(
    columns: list[pa.Array | pa.ChunkedArray], fields: list[str], n: int, mode: str = "tokens"
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique shingle hashes per item, as CSR: (offsets int64[N+1], values uint32).

    `columns[k]` holds field `fields[k]` for every item (null = empty).
    """
    if mode not in MODES:
        raise ValueError(f"shingle mode {mode!r}: use one of {', '.join(MODES)}")
    if n < 1:
        raise ValueError(f"shingle size must be >= 1, got {n}")
    data, offs = _field_bytes(columns)
    data = data if len(data) else np.zeros(1, np.uint8)
    nitems = offs.shape[1] - 1
    chars = mode == "chars"
    region = np.zeros(nitems + 1, dtype=np.int64)
    np.cumsum(_bounds(data, offs, n, chars), out=region[1:])
    out = np.empty(max(int(region[-1]), 1), dtype=np.uint32)
    counts = np.zeros(nitems, dtype=np.int64)
    tags = np.array([field_tag(f) for f in fields], dtype=np.uint32)
    cls, one = char_classes(), ascii_hashes()
    _shingle_kernel(data, offs, tags, n, chars, cls, one, region, out, counts)
    offsets = np.zeros(nitems + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    values = np.empty(int(offsets[-1]), dtype=np.uint32)
    _compact(out, region, offsets, values)
    return offsets, values

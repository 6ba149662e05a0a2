"""The group keys' and spread's sha256, as 64-bit words.

hashlib per string (OpenSSL's sha256 runs several times faster per byte than a compiled
loop of ours, and the call costs well under a microsecond); the words are made and spelled
as hex column-wise. `sha256_128(s)[0]` spells, by `hex16`, what
`hashlib.sha256(x.encode()).hexdigest()[:16]` does.
"""

from __future__ import annotations

from hashlib import sha256

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.shapes.kernels import from_buffers

CHUNK = 1 << 16  # strings made Python objects at once: their memory, not the column's


def sha256_128(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """(hi, lo) uint64: the first 16 bytes of each string's sha256, big-endian."""
    words = np.empty((len(s), 2), np.uint64)
    b = s.cast(pl.Binary)
    for at in range(0, len(s), CHUNK):
        digests = b"".join([sha256(x).digest()[:16] for x in b.slice(at, CHUNK).to_list()])
        words[at : at + CHUNK] = np.frombuffer(digests, ">u8").reshape(-1, 2)
    return words[:, 0].copy(), words[:, 1].copy()


_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)


def hex16(words: np.ndarray) -> pa.Array:
    """uint64 words as 16 lowercase hex digits each (a large_string array)."""
    nibbles = np.asarray(words, np.uint64).astype(">u8").view(np.uint8).reshape(-1, 8)
    digits = np.empty((len(nibbles), 16), np.uint8)
    digits[:, 0::2] = _HEX_DIGITS[nibbles >> 4]
    digits[:, 1::2] = _HEX_DIGITS[nibbles & 15]
    offsets = np.arange(0, 16 * len(nibbles) + 1, 16, dtype=np.int64)
    return from_buffers(digits.reshape(-1), offsets)

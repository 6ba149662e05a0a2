"""Item ids as pairs of integers, for sorting them in little memory.

Ingest's ids are ID_HEX_CHARS lowercase hex digits (schema.item_id). Read as two integers
(the first half of the digits and the second), an id takes 16 bytes instead of a string's
~40 with its offsets, and pairs sort as the strings do (same length, digits in ASCII
order). Ids of any other form (a table given to find_duplicates, a hand-made input) stay
strings: `halves` says None.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.schema import ID_HEX_CHARS

HALF = ID_HEX_CHARS // 2
assert ID_HEX_CHARS == 2 * HALF and HALF <= 15  # each half fits an int64
_HEX_ID = f"^[0-9a-f]{{{ID_HEX_CHARS}}}$"
_DIGITS = np.frombuffer(b"0123456789abcdef", np.uint8)


def halves(ids: pl.Series) -> tuple[np.ndarray, np.ndarray] | None:
    """(first half, second half) of each id as int64, when every id is a string of
    ID_HEX_CHARS lowercase hex digits; else None."""
    if ids.dtype != pl.String or ids.null_count() or not ids.str.contains(_HEX_ID).all():
        return None
    return (
        ids.str.slice(0, HALF).str.to_integer(base=16).to_numpy(),
        ids.str.slice(HALF).str.to_integer(base=16).to_numpy(),
    )


def strings(hi: np.ndarray, lo: np.ndarray) -> pl.Series:
    """The ids `halves` read as (hi, lo), as strings again (a digit column at a time)."""
    n = len(hi)
    digits = np.empty((n, ID_HEX_CHARS), np.uint8)
    for k, half in enumerate((hi, lo)):
        v = half.astype(np.int64, copy=False)
        for i in range(HALF):
            digits[:, k * HALF + i] = _DIGITS[(v >> (4 * (HALF - 1 - i))) & 15]
    offsets = np.arange(n + 1, dtype=np.int64) * ID_HEX_CHARS
    arr = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(digits))
    return pl.Series("id", arr, dtype=pl.String)

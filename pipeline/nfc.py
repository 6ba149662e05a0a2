"""Unicode NFC for keys and similarity, never for what is stored.

The same edit typed on two systems may reach us in two forms, `café` as U+00E9 or as `e` +
U+0301 (NFD: macOS file names, some editors). Byte for byte they differ, so without this the
twins would be neither exact nor near duplicates, would fall in different shape groups, and
could land in different splits. Every key and similarity measure is therefore taken over the
NFC form: dedup's content hash and shingles (`pipeline/dedup/shingles.py` `_chunks`, the one
point every shingling caller goes through, and `scan.py`), shapes' group keys (`columns.py`
`key_frame`) and export's group keys (`export/split.py`, `verify.column_keys`). Items keep
their text exactly as read, and their ids (a hash of the text as read) are unchanged.

One implementation, Arrow's `utf8_normalize` (utf8proc), for every caller, so two keys never
disagree on which texts are twins. ASCII text is NFC already and is returned as it is: most
corpora pay one scan of their bytes.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc


def _ascii(a: pa.Array) -> bool:
    """Whether every string of `a` (a string or large_string array) is ASCII."""
    data = a.buffers()[2]
    return data is None or not len(data) or int(np.frombuffer(data, np.uint8).max()) < 0x80


def nfc_array(a: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The strings of `a` in NFC (nulls stay null), or `a` itself when all are ASCII."""
    if isinstance(a, pa.ChunkedArray):
        return pa.chunked_array([nfc_array(c) for c in a.chunks], a.type)
    if not pa.types.is_string(a.type) and not pa.types.is_large_string(a.type):
        return a
    return a if _ascii(a) else pc.utf8_normalize(a, form="NFC")


def nfc_text(text: str) -> str:
    """One string in NFC, as nfc_array makes it (the references' form)."""
    return text if text.isascii() else str(nfc_array(pa.array([text])).to_pylist()[0])


def nfc_series(s: pl.Series) -> pl.Series:
    """A string Series in NFC (the same name and dtype)."""
    if s.dtype != pl.String:
        return s
    arr = s.to_arrow(compat_level=pl.CompatLevel.oldest())  # large_string, not a view
    out = nfc_array(arr)
    return s if out is arr else pl.Series(s.name, out, dtype=pl.String)


def nfc_columns(df: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """df with its string `columns` (those it has) in NFC."""
    have = [c for c in columns if c in df.columns and df[c].dtype == pl.String]
    return df.with_columns(nfc_series(df[c]) for c in have) if have else df

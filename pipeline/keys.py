"""128-bit keys of text and integers, and where rows of one key meet: the vocabulary of
work cut by key range (executors.by_range) over member rows (kind, key, id): export's
groups and splits (export/assign.py) and its leakage check (leakage.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.nfc import nfc_columns
from pipeline.shapes.sha import sha256_128


def arrow_schema(schema: dict[str, Any]) -> pa.Schema:
    """The Arrow schema of a polars one (the outputs' schemas the executors are given)."""
    return pl.DataFrame(schema=schema).to_arrow().schema


def text_key(frame: pl.DataFrame, columns: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """sha256 words of the columns in NFC, joined by NUL (verify.column_keys' key)."""
    key = pl.concat_str(columns, separator="\x00")
    return sha256_128(nfc_columns(frame, columns).select(key).to_series())


def unsigned(s: pl.Series) -> np.ndarray:
    """Integer keys as uint64 words (their bits)."""
    return s.cast(pl.Int64).to_numpy().view(np.uint64)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads integer keys over the key ranges."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def key_hash(kind: pl.Series, k1: pl.Series, k2: pl.Series) -> np.ndarray:
    """`_h` of each (kind, key): where a key's members meet, spread over the key ranges."""
    kinds = kind.cast(pl.Int64).to_numpy().view(np.uint64)
    return _mix(k1.to_numpy() ^ _mix(k2.to_numpy() ^ _mix(kinds + np.uint64(1))))

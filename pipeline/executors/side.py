"""Columns joined to a stage's input batches by row number (`batches(..., side=)`).

What a stage decided per row in tasks of its own (shapes' groups, decided per key range for
annotate) goes back to the rows it belongs to as tables of (ROW, columns): locally the
driver lays them out as arrays once, on Ray each is cut by span (executors.ray) and a
span's task joins its pieces, so the driver never holds them per row (issue 29: the
driver's memory bounded).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.parts import ROW, as_table


@dataclass(frozen=True)
class Side:
    """Tables (on Ray: held by the workers) each with ROW and some of `schema`'s columns, a
    row named at most once per column; `schema` is what every batch gets appended, in order
    (a row no table names gets zero, or False)."""

    pieces: list[Any]
    schema: pa.Schema


def arrays(tables: Iterable[Any], first: int, rows: int, schema: pa.Schema) -> list[np.ndarray]:
    """schema's columns for rows [first, first + rows), from those of `tables` in that range."""
    out = {f.name: np.zeros(rows, f.type.to_pandas_dtype()) for f in schema}
    for t in map(as_table, tables):
        at = t[ROW].to_numpy() - first
        for c in t.column_names:
            if c != ROW:
                out[c][at] = t[c].to_numpy()
    return [out[f.name] for f in schema]


def joined(
    reader: Iterable[pa.RecordBatch], first: int, columns: list[np.ndarray], schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The batches of `reader` (rows from `first` on) with `columns` (rows from `first`)
    appended as schema's columns."""
    at = 0
    for b in reader:
        n = b.num_rows
        for f, values in zip(schema, columns, strict=True):
            b = b.append_column(f, pa.array(values[at : at + n], f.type))
        at += n
        yield b

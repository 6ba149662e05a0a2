"""What an executor is handed and gives back, for the local and the Ray executor alike.

A batch function is pure (any worker can run it), a task function a generator over one task's
pieces of output; results come back as tables with counts, and counts sum with `merge`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import polars as pl
import pyarrow as pa

# fn(batch, ctx) -> ({output name: table}, {count: number}); pure, so any worker can run it
BatchFn = Callable[[pa.RecordBatch, Any], tuple[dict[str, Any], dict[str, Any]]]
# outputs (Arrow tables; a polars frame a step returned stays one locally), counts, rows in
Result = tuple[dict[str, Any], dict[str, Any], int]
# fn(task, ctx) -> yields (outputs, counts): a generator over one task's pieces of output
TaskFn = Callable[[Any, Any], Iterator[tuple[dict[str, Any], dict[str, Any]]]]
# fn(rows, ctx) -> a result: over a lazy frame of rows holding every row that shares a key
# with any of them (partitioned: the whole output, or one hash partition of it)
PartFn = Callable[[pl.LazyFrame, Any], Any]
# fn(rows, k, ctx) -> {output name: table}: the rows of range k of target slots, in slot order
RangeFn = Callable[[pa.Table, int, Any], dict[str, pa.Table]]
# fn(rows, p, ctx) -> (result, {output name: table}): the rows whose key falls in key range p,
# in input order (by_range: shapes' groups, whole within one range of their key)
KeyRangeFn = Callable[[pl.DataFrame, int, Any], tuple[Any, dict[str, Any]]]


def merge(total: dict[Any, Any], part: dict[Any, Any]) -> None:
    """Sum `part` into `total`: numbers add, dicts merge recursively."""
    for k, v in part.items():
        if isinstance(v, dict):
            merge(total.setdefault(k, {}), v)
        else:
            total[k] = total.get(k, 0) + v

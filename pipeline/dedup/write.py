"""kept.parquet, removed.parquet and index/ (when wanted) written in output order without the
whole input.

Output order is (id, source, source_ref) order, not input order, so every output chunk
needs rows from all over the input. Each row gets its output slot, and the rows are put in
slot order a range of PART_ROWS slots at a time (pipeline/reorder.py: scatter files locally,
a shuffle of tasks on Ray): each range written as one piece (one Parquet row group, or two
where it straddles a part boundary), and an index part per kept range, a row group at a
time (its signatures made again from the stored shingle sets). Memory: one input batch, or
one range.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.config import DedupConfig
from pipeline.dedup import index as ix
from pipeline.dedup.find import DedupResult
from pipeline.dedup.store import Store
from pipeline.executors import reordered, writer
from pipeline.memory import release
from pipeline.parts import Parts
from pipeline.reorder import SLOT, scatter
from pipeline.storage import Location

PART_ROWS = ix.PART_ROWS  # output rows per chunk, per partition and per index part


def slots(res: DedupResult, n: int) -> tuple[np.ndarray, int]:
    """Each input row's output slot (kept rows first; the removed ones from the first range
    after the kept ones), and how many ranges of PART_ROWS slots the kept rows fill."""
    nkept = len(res.kept_rows)
    kparts = -(-nkept // PART_ROWS)
    slot = np.full(n, -1, dtype=np.int64)
    slot[res.kept_rows] = np.arange(nkept)
    slot[res.removed["_row"].to_numpy()] = kparts * PART_ROWS + np.arange(res.removed.height)
    if n and slot.min() < 0:
        raise AssertionError("dedup: a row is neither kept nor removed")
    return slot, kparts


def _rows_out(t: pa.Table, k: int, ctx: Any) -> dict[str, pa.Table]:
    """A range of output slots in order -> its rows of kept, or of removed with why."""
    kparts, size, removed, removed_extra = ctx  # (the size travels: workers import afresh)
    t = t.drop_columns([SLOT])
    if k < kparts:
        return {"kept.parquet": t}
    extra = removed.slice((k - kparts) * size, size)
    for name, typ in removed_extra:
        t = t.append_column(pa.field(name, typ), extra[name].to_arrow().cast(typ))
    return {"removed.parquet": t}


def write_rows(
    io: Any,
    src: Location,
    res: DedupResult,
    store: Store,
    d: DedupConfig,
    folder: Path,
    removed_extra: list[tuple[str, pa.DataType]],
    index: bool = True,
) -> None:
    """kept.parquet, removed.parquet (+ removed_extra: keeper_id, j, kind) and, when `index`,
    index/. Without the index the rows are put in order on the configured executor (on Ray
    by a shuffle of tasks, the workers writing the parts); the index's signatures come from
    the store in this process, so with it the kept and removed rows are put in order and
    written here."""
    release()
    pf = Parts(src)
    schema = pf.schema_arrow
    removed_schema = schema
    for name, typ in removed_extra:
        removed_schema = removed_schema.append(pa.field(name, typ))
    slot, kparts = slots(res, pf.num_rows)
    ctx = (kparts, PART_ROWS, res.removed, removed_extra)
    if not index:
        schemas = {"kept.parquet": schema, "removed.parquet": removed_schema}
        with ExitStack() as stack:
            out = writer(io.cfg.run, io.sink, schemas, None, stack)
            for outs in reordered(io.cfg, src, slot, PART_ROWS, _rows_out, ctx, folder, schemas):
                out.add(outs)
            out.close()
        return
    parts = scatter(src, slot, PART_ROWS, folder)
    counts = store.counts()
    cols = [*ix.ITEM_COLUMNS, *d.fields]

    def index_groups(t: pa.Table, first: int) -> Iterator[pa.Table]:
        for s in range(0, max(t.num_rows, 1), ix.GROUP_ROWS):
            rows = res.kept_rows[first + s : first + s + min(ix.GROUP_ROWS, t.num_rows - s)]
            items = t.slice(s, ix.GROUP_ROWS).select(cols)
            yield ix.index_table(items, store.sig(rows), counts[rows], d)

    with io.sink("kept.parquet", schema) as kept_w:

        def build(dest: Path) -> None:
            dest.mkdir(parents=True)
            with ThreadPoolExecutor(1) as ex:  # kept rows compressed while the index is made
                for k in range(kparts):
                    t = _rows_out(parts.read(k), k, ctx)["kept.parquet"]
                    kept = ex.submit(kept_w.write_table, t)
                    groups = index_groups(t, k * PART_ROWS)
                    ix.write_part(dest, k, ix.index_schema(d), groups, io.meta)
                    kept.result()
            if not kparts:  # an empty index still has a part, for its schema
                empty = schema.empty_table()
                ix.write_part(dest, 0, ix.index_schema(d), index_groups(empty, 0), io.meta)

        io.write_tree("index", build)
    with io.sink("removed.parquet", removed_schema) as removed_w:
        for k in range(kparts, kparts + -(-res.removed.height // PART_ROWS)):
            removed_w.write_table(_rows_out(parts.read(k), k, ctx)["removed.parquet"])

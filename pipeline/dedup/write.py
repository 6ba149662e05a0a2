"""kept.parquet, removed.parquet and index/ (when wanted) written in output order without the
whole input.

Output order is (id, source, source_ref) order, not input order, so every output chunk
needs rows from all over the input. Instead of holding the input, one pass over it scatters
each row to the partition of its output slot (PART_ROWS consecutive slots per partition,
Arrow IPC files in the working folder), then each partition is read, put in slot order and
written: one Parquet row group per partition, as a whole-table write in chunks of PART_ROWS
gives, and an index part per kept partition, a row group at a time (its signatures made
again from the stored shingle sets). Memory: one input batch, or one partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from pipeline.config import DedupConfig
from pipeline.dedup import index as ix
from pipeline.dedup.find import DedupResult
from pipeline.dedup.store import Store, release
from pipeline.parts import Parts
from pipeline.storage import Location

PART_ROWS = ix.PART_ROWS  # output rows per chunk, per partition and per index part
READ_ROWS = 1 << 16  # input rows per scatter batch
IPC = ipc.IpcWriteOptions(compression="lz4")  # text shrinks 3x: less to write and read back


class Partitions:
    """The scatter files: partition k holds the input rows whose output slot s has
    s // PART_ROWS == k (kept slots first, then removed ones), with a `_slot` column."""

    def __init__(self, folder: Path, schema: pa.Schema) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.dir, self.input_schema = folder, schema
        self.schema = schema.append(pa.field("_slot", pa.int64()))
        self._w: dict[int, Any] = {}

    def add(self, k: int, rows: pa.Table) -> None:
        if k not in self._w:
            self._w[k] = ipc.new_file(self.dir / f"{k:06d}.arrow", self.schema, options=IPC)
        self._w[k].write_table(rows)

    def close(self) -> None:
        for w in self._w.values():
            w.close()

    def read(self, k: int) -> pa.Table:
        """Partition k in slot order, without `_slot`; its file is removed."""
        path = self.dir / f"{k:06d}.arrow"
        with ipc.open_file(path) as f:
            t = f.read_all()
        path.unlink()  # read once: its disk space is freed as the outputs grow
        order = np.argsort(t["_slot"].to_numpy(), kind="stable")
        return t.drop_columns(["_slot"]).take(pa.array(order))


def scatter(src: Location, res: DedupResult, folder: Path) -> Partitions:
    """One pass over the input: every row to the partition of its output slot."""
    pf = Parts(src)
    n = pf.num_rows
    nkept = len(res.kept_rows)
    slot = np.full(n, -1, dtype=np.int64)
    slot[res.kept_rows] = np.arange(nkept)
    slot[res.removed["_row"].to_numpy()] = nkept + np.arange(res.removed.height)
    if n and slot.min() < 0:
        raise AssertionError("dedup: a row is neither kept nor removed")
    kparts = -(-nkept // PART_ROWS)
    part = np.where(slot < nkept, slot // PART_ROWS, kparts + (slot - nkept) // PART_ROWS)
    parts = Partitions(folder, pf.schema_arrow)
    r0 = 0
    try:
        for batch in pf.iter_batches(READ_ROWS):
            r1 = r0 + batch.num_rows
            p = part[r0:r1]
            t = pa.Table.from_batches([batch]).append_column("_slot", pa.array(slot[r0:r1]))
            order = np.argsort(p, kind="stable")
            for sel in np.split(order, np.flatnonzero(np.diff(p[order])) + 1):
                parts.add(int(p[sel[0]]), t.take(pa.array(sel)))
            r0 = r1
    finally:
        parts.close()
    return parts


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
    index/."""
    release()
    parts = scatter(src, res, folder)
    schema = parts.input_schema
    kparts = -(-len(res.kept_rows) // PART_ROWS)
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
                    t = parts.read(k)
                    kept = ex.submit(kept_w.write_table, t)
                    groups = index_groups(t, k * PART_ROWS)
                    ix.write_part(dest, k, ix.index_schema(d), groups, io.meta)
                    kept.result()
            if not kparts:  # an empty index still has a part, for its schema
                empty = schema.empty_table()
                ix.write_part(dest, 0, ix.index_schema(d), index_groups(empty, 0), io.meta)

        if index:
            io.write_tree("index", build)
        else:  # no signatures made again: the kept rows as they are
            for k in range(kparts):
                kept_w.write_table(parts.read(k))

    removed_schema = schema
    for name, typ in removed_extra:
        removed_schema = removed_schema.append(pa.field(name, typ))
    with io.sink("removed.parquet", removed_schema) as removed_w:
        for k in range(-(-res.removed.height // PART_ROWS)):
            t = parts.read(kparts + k)
            extra = res.removed.slice(k * PART_ROWS, PART_ROWS)
            for name, typ in removed_extra:
                t = t.append_column(pa.field(name, typ), extra[name].to_arrow().cast(typ))
            removed_w.write_table(t)

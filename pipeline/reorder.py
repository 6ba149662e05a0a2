"""An output's rows put in another order without holding them: each row has a target slot,
and the rows are wanted range by range of `size` consecutive slots, each range in slot order
(dedup's outputs in (id, source, source_ref) order, spread's kept in batch order).

Locally one pass over the input scatters each row to the partition file of its range (Arrow
IPC in a working folder, with a SLOT column), then each partition is read back and sorted:
memory holds one input batch, or one partition. On Ray the same cut is a shuffle of tasks
(executors.ray.ray_reordered). Both sort a partition by one `take`, so its columns come out
as one chunk each whichever way its rows came: the files written from it are the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from pipeline.parts import Parts
from pipeline.storage import Location

SLOT = "_slot"  # a partition's column of its rows' target slots
READ_ROWS = 1 << 16  # input rows per scatter batch
IPC = ipc.IpcWriteOptions(compression="lz4")  # text shrinks 3x: less to write and read back


def in_slot_order(t: pa.Table) -> pa.Table:
    """A partition's rows sorted by SLOT (kept), every column one chunk."""
    return t.take(pa.array(np.argsort(t[SLOT].to_numpy(), kind="stable")))


def ranges(slots: np.ndarray, size: int) -> np.ndarray:
    """The ranges (slot // size) that hold rows, in order."""
    return np.unique(slots // size) if len(slots) else np.empty(0, np.int64)


class Partitions:
    """The scatter files: partition k holds the input rows whose slot s has s // size == k,
    with a SLOT column."""

    def __init__(self, folder: Path, schema: pa.Schema) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.dir = folder
        self.schema = schema.append(pa.field(SLOT, pa.int64()))
        self._w: dict[int, Any] = {}

    def add(self, k: int, rows: pa.Table) -> None:
        if k not in self._w:
            self._w[k] = ipc.new_file(self.dir / f"{k:06d}.arrow", self.schema, options=IPC)
        self._w[k].write_table(rows)

    def close(self) -> None:
        for w in self._w.values():
            w.close()

    def read(self, k: int) -> pa.Table:
        """Partition k in slot order (in_slot_order); its file is removed."""
        path = self.dir / f"{k:06d}.arrow"
        with ipc.open_file(path) as f:
            t = f.read_all()
        path.unlink()  # read once: its disk space is freed as the outputs grow
        return in_slot_order(t)


def scatter(src: Location, slots: np.ndarray, size: int, folder: Path) -> Partitions:
    """One pass over the input: every row to the partition of its slot's range."""
    pf = Parts(src)
    part = slots // size
    parts = Partitions(folder, pf.schema_arrow)
    r0 = 0
    try:
        for batch in pf.iter_batches(READ_ROWS):
            r1 = r0 + batch.num_rows
            p = part[r0:r1]
            t = pa.Table.from_batches([batch]).append_column(SLOT, pa.array(slots[r0:r1]))
            order = np.argsort(p, kind="stable")
            for sel in np.split(order, np.flatnonzero(np.diff(p[order])) + 1):
                parts.add(int(p[sel[0]]), t.take(pa.array(sel)))
            r0 = r1
    finally:
        parts.close()
    return parts

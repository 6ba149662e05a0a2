"""The stage's shingle sets, change sets and band keys between Ray's workers and the stage's
working files, never through the driver (run.executor = "ray").

The working files (store.py) are on the disk of the driver's machine, which a worker on
another node cannot open, so tasks on the driver's node (executors.ray.here) move the data:

- in: the scan's tasks keep each batch's sets (held outputs), and a chain of tasks on the
  driver's node appends them to the files in input order (`on_node`); only the small
  per-row columns come to the driver;
- out: tasks there read the rows that verification will ask for, BLOCK_ROWS of them at a
  time, into Ray's object store (`hold`); a verifying task, wherever it runs, takes the
  blocks that hold its rows from there (Ray brings a block to a node once, and tasks there
  read it in place). The band keys go out the same way (ray_bands.py).

The driver holds references and offsets only.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pipeline.dedup.scan import unpack
from pipeline.dedup.store import Sets, Store, csr_take, write_rows
from pipeline.executors.ray import _count, _get, _own, _spent, ensure_ray, here, in_turn

if TYPE_CHECKING:
    from pipeline.config import RunConfig

BLOCK_ROWS = 1 << 16  # rows a block holds: about 30 MB of sets on real corpora

CSR = tuple[np.ndarray, np.ndarray]


class HeldSets:
    """What store.Sets gives a verifying task (`shingles(rows)`, `changes(rows)`, `perm`),
    read from blocks in Ray's object store: block k holds the sets of `held[k * size :
    (k + 1) * size]` (store rows, sorted; None: every row), and only held rows may be asked
    for."""

    def __init__(
        self,
        blocks: list[Any],
        size: int,
        held: np.ndarray | None,
        perm: tuple[np.ndarray, np.ndarray],
        has_change: bool,
    ):
        self.blocks, self.size, self.held = blocks, size, held  # (the size travels with them)
        self.perm, self.has_change = perm, has_change

    def shingles(self, rows: np.ndarray) -> CSR:
        """The shingle sets of `rows` (any order, repeats allowed) as CSR, in that order."""
        return self._take(rows, 0)

    def changes(self, rows: np.ndarray) -> CSR | None:
        """The change sets of `rows` likewise, or None: not made (the check is off)."""
        return self._take(rows, 2) if self.has_change else None

    def _take(self, rows: np.ndarray, at: int) -> CSR:
        import ray

        u, inv = np.unique(np.asarray(rows, np.int64), return_inverse=True)
        held = self.held
        pos = u if held is None else np.searchsorted(held, u)
        if held is not None and len(u) and (pos[-1] >= len(held) or (held[pos] != u).any()):
            raise ValueError("dedup: a set was asked for that was not held")
        blk = pos // self.size
        runs = np.flatnonzero(np.diff(blk, prepend=-1))  # a run of rows per block
        ends = np.append(runs[1:], len(blk))[: len(runs)]
        got = ray.get([self.blocks[int(blk[s])] for s in runs])
        lens, values = [], []
        for s, e, block in zip(runs.tolist(), ends.tolist(), got, strict=True):
            offs, vals = block[at], block[at + 1]
            local = pos[s:e] - int(blk[s]) * self.size
            o, v = csr_take(offs, vals, local)
            lens.append(np.diff(o))
            values.append(v)
        local_offs = np.zeros(len(u) + 1, np.int64)
        if lens:
            np.cumsum(np.concatenate(lens), out=local_offs[1:])
        flat = np.concatenate(values) if values else np.empty(0, np.uint32)
        if np.array_equal(u, rows):  # already sorted and unique
            return local_offs, flat
        return csr_take(local_offs, flat, inv.reshape(-1))


def hold(sets: Sets, rows: np.ndarray | None, *, run: RunConfig) -> HeldSets:
    """The sets of store rows `rows` (sorted, unique; None: every row) put in Ray's object
    store by tasks on this process's node, which read the working files there."""
    ray = ensure_ray(run)
    n = len(sets.offsets) - 1 if rows is None else len(rows)
    ref = ray.put(sets)  # once: every block's task reads its offsets
    load = here(ray, _load, num_returns=2)
    cut = (lambda lo: None) if rows is None else (lambda lo: rows[lo : lo + BLOCK_ROWS])
    calls = ((ref, lo, min(lo + BLOCK_ROWS, n), cut(lo)) for lo in range(0, n, BLOCK_ROWS))
    loads = list(in_turn(load, calls))
    for _, spent in loads:  # each block made (a file that cannot be read fails here)
        _count(_get(ray, spent))
    return HeldSets([b for b, _ in loads], BLOCK_ROWS, rows, sets.perm, sets.change is not None)


def _load(
    sets: Sets, lo: int, hi: int, rows: np.ndarray | None, after: Any
) -> tuple[Any, dict[str, Any]]:
    """One block: the shingle sets (and change sets, or empty arrays) of store rows [lo, hi)
    (rows None) or of `rows`, as (offsets, values, change offsets, change values); then the
    task's CPU time and node (`after`: the previous block's, executors.ray.in_turn)."""
    t0 = time.process_time()
    which = np.arange(lo, hi, dtype=np.int64) if rows is None else np.asarray(rows, np.int64)
    change = sets.changes(which)
    empty = (np.zeros(1, np.int64), np.empty(0, np.uint32))
    return (*sets.shingles(which), *(change or empty)), _spent(t0)


def on_node(
    results: Iterable[tuple[dict[str, Any], int]], store: Store, run: RunConfig
) -> Iterator[tuple[dict[str, Any], int]]:
    """scan_batch's results as the workers hold them (executors' held outputs), in input
    order, with their `rows` brought here and without their `sets`: those are appended to
    the store's files by a task on this node each, each task after the one before (a chain:
    they run in order without this process waiting on them). The store counts the appended
    rows once the last result is given."""
    ray = ensure_ray(run)
    append = here(ray, _append, num_returns=2)
    names, has_change = store.names(), store.has_change
    chain: list[Any] = []  # as executors.ray.in_turn makes one, a result at a time
    for outs, n in results:
        if "sets" in outs:
            h = outs.pop("sets")
            after = chain[-1][1] if chain else None
            chain.append(append.remote(store.dir, names, has_change, h.ref, h.start, h.rows, after))
        if "rows" in outs:
            h = outs["rows"]
            outs["rows"] = _own(_get(ray, h.ref).slice(h.start, h.rows))
        yield outs, n
    for ref, spent in chain:
        _count(_get(ray, spent))
        store.took(*_get(ray, ref))


def _append(
    folder: Path,
    names: list[str],
    has_change: bool,
    t: Any,
    start: int,
    rows: int,
    after: Any,
) -> tuple[tuple[np.ndarray, np.ndarray | None], dict[str, Any]]:
    """Rows [start, start + rows) of a batch's sets appended to the store's files in
    `folder` (`after`: the previous batch's CPU time, so that this runs after it); their CSR
    offsets from 0 (shingle sets, change sets or None), then the task's CPU time and node."""
    t0 = time.process_time()
    bands = sum(n.startswith("band-") for n in names)
    offsets, values, keys, change = unpack(t.slice(start, rows).combine_chunks(), bands, has_change)
    files = {name: open(folder / name, "ab") for name in names}
    try:
        write_rows(files, values, keys, change)
    finally:
        for f in files.values():
            f.close()
    return (offsets, change[0] if change is not None else None), _spent(t0)

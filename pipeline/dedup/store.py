"""Dedup's working files: shingle sets and band keys on disk, not in memory.

At 10M items the shingle sets are a few GB and the signatures 10 GB (256 x uint32 each), so
the stage writes what it needs later batch by batch and reads back only what a step needs:

    shingles.u32     every row's sorted shingle set back to back (offsets stay in memory)
    change.u32       every row's change set likewise (when dedup.change_threshold is on)
    band-BBB.u64     uint64[N]: band B's LSH key of every row (a band is read whole)
    ids.arrow        every row's id in (id, source, source_ref) order, ID_BATCH to a record
                     batch: the outputs name items by id, and only a few are named
    rows.arrow       every row's input row and keeper rank values, in that order: the
                     outputs need them of the rows they name

Signatures are not stored: the few a step needs (candidate pairs, big buckets, the kept
rows' for the index) are recomputed from the shingle sets, which costs less than writing
and reading back 1 KB per row (and 10 GB of disk at 10M). Rows are gathered with pread,
never mmap: a mapped file's touched pages count in the process's resident size, and the
kernel maps the pages around each touched one as well.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO, Protocol

import numba as nb
import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.dedup.minhash import permutations, signatures
from pipeline.jit import use_kernel_cache

use_kernel_cache()  # before the first njit(cache=True) below


ID_BATCH = 1 << 20  # ids to a record batch of ids.arrow: a lookup reads the batches it needs
GAP = 1 << 10  # spans closer than this are read in one call: fewer calls, at most 1 KB more


def read_spans(fd: int, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bytes [lo[k], hi[k]) of file fd (spans sorted, not overlapping) read into one
    buffer: (buffer, where span k starts in it)."""
    if not len(lo):
        return np.empty(0, np.uint8), np.empty(0, np.int64)
    brk = np.flatnonzero(lo[1:] > hi[:-1] + GAP) + 1
    first = np.concatenate(([0], brk))
    last = np.concatenate((brk, [len(lo)])) - 1
    run_lo, size = lo[first], hi[last] - lo[first]
    at = np.zeros(len(first), np.int64)
    np.cumsum(size[:-1], out=at[1:])
    buf = np.empty(int(size.sum()), np.uint8)
    view = buf.data
    for a, off, s in zip(at.tolist(), run_lo.tolist(), size.tolist(), strict=True):
        while s:  # pread may return less than asked (it does not on regular files)
            got = os.preadv(fd, [view[a : a + s]], off)
            if got <= 0:
                raise OSError(f"dedup work file: short read at byte {off}")
            a, off, s = a + got, off + got, s - got
    run = np.repeat(np.arange(len(first)), last - first + 1)
    return buf, at[run] + (lo - run_lo[run])


@nb.njit(nogil=True, cache=True)
def _take_ranges(values, starts, lens, out):
    w = 0
    for k in range(starts.shape[0]):
        s = starts[k]
        for j in range(lens[k]):
            out[w + j] = values[s + j]
        w += lens[k]


def take_ranges(values: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """values[starts[k] : starts[k] + lens[k]] for every k, back to back."""
    out = np.empty(int(lens.sum()), dtype=values.dtype)
    _take_ranges(values, starts.astype(np.int64), lens.astype(np.int64), out)
    return out


def csr_take(
    offsets: np.ndarray, values: np.ndarray, items: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The CSR sets of `items` (in that order) as a CSR of their own."""
    lens = offsets[items + 1] - offsets[items]
    local = np.zeros(len(items) + 1, np.int64)
    np.cumsum(lens, out=local[1:])
    return local, take_ranges(values, offsets[items], lens)


class SetReader(Protocol):
    """What verification reads of the sets, wherever it runs: Sets (the working files) or
    ray_sets.HeldSets (blocks of them in Ray's object store)."""

    perm: tuple[np.ndarray, np.ndarray]

    def shingles(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def changes(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None: ...


class Sets:
    """Read access to a sealed store's shingle sets and change sets (their files, offsets and
    the permutations): small enough to hand to a task on this machine, which reads the files
    itself (locally a verifying chunk; on Ray a task on the driver's node, ray_sets.py, as
    the files are on its disk)."""

    def __init__(
        self,
        path: Path,
        offsets: np.ndarray,
        perm: tuple[np.ndarray, np.ndarray],
        change: tuple[Path, np.ndarray] | None = None,
    ):
        self.path, self.offsets, self.perm, self.change = path, offsets, perm, change

    def shingles(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The shingle sets of `rows` (any order, repeats allowed) as CSR, in that order."""
        return read_csr(self.path, self.offsets, rows)

    def changes(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """The change sets of `rows` as shingles() gives sets, or None: not made (the check
        is off)."""
        return None if self.change is None else read_csr(*self.change, rows)


def read_csr(path: Path, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows `rows` (any order, repeats allowed) of the CSR sets in file `path` (uint32 values
    back to back; row k is offsets[k]:offsets[k+1]), as a CSR of their own, in that order."""
    u, inv = np.unique(np.asarray(rows, np.int64), return_inverse=True)
    lo, hi = offsets[u], offsets[u + 1]
    fd = os.open(path, os.O_RDONLY)
    try:
        buf, at = read_spans(fd, 4 * lo, 4 * hi)
    finally:
        os.close(fd)
    values = take_ranges(buf.view(np.uint32), at // 4, hi - lo)  # spans are whole words
    local = np.zeros(len(u) + 1, np.int64)
    np.cumsum(hi - lo, out=local[1:])
    if np.array_equal(u, rows):  # already sorted and unique: no second copy
        return local, values
    return csr_take(local, values, inv.reshape(-1))


def write_rows(
    files: Mapping[str, BinaryIO],
    values: np.ndarray,
    keys: np.ndarray,
    change: tuple[np.ndarray, np.ndarray] | None,
) -> None:
    """The next rows' shingle set values, band keys (uint64[bands, N]) and change set values
    (when kept) appended to the store's files (by their names, Store.names)."""
    files["shingles.u32"].write(np.ascontiguousarray(values, np.uint32).data)
    if change is not None:
        files["change.u32"].write(np.ascontiguousarray(change[1], np.uint32).data)
    for b in range(keys.shape[0]):
        files[f"band-{b:03d}.u64"].write(np.ascontiguousarray(keys[b], np.uint64).data)


class BandKeys:
    """Band b's keys of the store rows `rows` (in that order), read from the store's band
    files: a callable that pickles without the keys (a path and the rows), so that a task on
    the store's node reads them there (ray_bands.py) instead of this process sending them."""

    def __init__(self, folder: Path, rows: np.ndarray):
        self.dir, self.rows = folder, rows

    def __call__(self, b: int) -> np.ndarray:
        return np.fromfile(self.dir / f"band-{b:03d}.u64", dtype=np.uint64)[self.rows]


class Store:
    """The working files of one dedup run, appended batch by batch, then read by row."""

    def __init__(
        self, folder: Path, num_perm: int, seed: int, bands: int, rows: int, change: bool = False
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.dir, self.bands, self.rows, self.has_change = folder, bands, rows, change
        self.perm = permutations(num_perm, seed)
        self.n = 0
        self._parts = {"shingles": [np.zeros(1, np.int64)], "change": [np.zeros(1, np.int64)]}
        self._shift = {"shingles": 0, "change": 0}
        self._w = {name: open(folder / name, "wb") for name in self.names()}
        self.offsets = np.zeros(1, np.int64)  # shingle set k: values offsets[k]:offsets[k+1]
        self.change_offsets = np.zeros(1, np.int64)  # change set k, likewise in change.u32
        self._kept: dict[str, pa.Schema] = {}  # tables kept by position (put), their schemas

    def names(self) -> list[str]:
        change = ["change.u32"] if self.has_change else []
        return ["shingles.u32", *change, *(f"band-{b:03d}.u64" for b in range(self.bands))]

    def add(
        self,
        offsets: np.ndarray,
        values: np.ndarray,
        keys: np.ndarray,
        change: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        """The next rows' CSR shingle sets (offsets from 0), band keys (uint64[bands, N]) and,
        when the store keeps them, CSR change sets, made by whoever ran the per-item work
        (scan.scan_batch, on any executor)."""
        if self.has_change and change is None:
            raise ValueError("this dedup store keeps change sets: add them")
        write_rows(self._w, values, keys, change if self.has_change else None)
        self.took(offsets, change[0] if change is not None and self.has_change else None)

    def took(self, offsets: np.ndarray, change: np.ndarray | None = None) -> None:
        """Count the next rows, whose sets were appended to the files (by add, or on Ray by
        a task on this node: ray_sets.on_node): their shingle sets' and change sets' CSR
        offsets from 0."""
        for name, offs in (("shingles", offsets), ("change", change)):
            if offs is not None:
                self._parts[name].append(offs[1:] + self._shift[name])
                self._shift[name] += int(offs[-1])
        self.n += len(offsets) - 1

    def seal(self) -> None:
        """Done appending: files flushed, set offsets in one array each."""
        for f in self._w.values():
            f.close()
        self.offsets = np.concatenate(self._parts["shingles"])
        self.change_offsets = np.concatenate(self._parts["change"])
        self._parts = {}

    def band_keys(self, rows: np.ndarray) -> BandKeys:
        """Each band's keys of `rows`, a band at a time (BandKeys(b))."""
        return BandKeys(self.dir, rows)

    def sets(self) -> Sets:
        """Read access to the sealed shingle and change sets, for this process or a worker."""
        change = (self.dir / "change.u32", self.change_offsets) if self.has_change else None
        return Sets(self.dir / "shingles.u32", self.offsets, self.perm, change)

    def shingles(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The shingle sets of `rows` (any order, repeats allowed) as CSR, in that order."""
        return self.sets().shingles(rows)

    def changes(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The change sets of `rows` as shingles() gives sets (the store must keep them)."""
        ch = self.sets().changes(rows)
        if ch is None:
            raise ValueError("this dedup store keeps no change sets")
        return ch

    def sig(self, rows: np.ndarray) -> np.ndarray:
        """uint32[len(rows), num_perm]: the signatures of `rows`, from their shingle sets."""
        return signatures(*self.shingles(rows), *self.perm)

    def counts(self) -> np.ndarray:
        """int32[N]: the size of every row's shingle set."""
        return np.diff(self.offsets).astype(np.int32)

    def put_ids(self, n: int, ids: Callable[[int, int], pl.Series]) -> None:
        """Keep the ids of positions 0..n-1 ((id, source, source_ref) order) on disk, asked
        of `ids(start, stop)` a record batch at a time, in order."""
        self.put(
            "ids", pa.schema([("id", pa.large_string())]), n, lambda a, b: ids(a, b).to_frame()
        )

    def ids(self, pos: np.ndarray) -> pl.Series:
        """The ids at positions `pos` (any order, repeats allowed), in that order."""
        return self.take("ids", pos)["id"]

    def put(
        self, name: str, schema: pa.Schema, n: int, part: Callable[[int, int], pl.DataFrame]
    ) -> None:
        """Keep a table of n rows by position on disk (NAME.arrow), asked of `part(start,
        stop)` a record batch of ID_BATCH rows at a time, in order."""
        with pa.ipc.new_file(self.dir / f"{name}.arrow", schema) as f:
            for s in range(0, n, ID_BATCH):  # batch k holds positions k * ID_BATCH on (take)
                t = part(s, min(s + ID_BATCH, n)).to_arrow().cast(schema).combine_chunks()
                f.write_batch(t.to_batches()[0])
        self._kept[name] = schema

    def put_frame(self, name: str, frame: pl.DataFrame) -> None:
        """put() of the rows of `frame`, by row number."""
        schema = frame.head(0).to_arrow().schema
        self.put(name, schema, frame.height, lambda a, b: frame.slice(a, b - a))

    def take(self, name: str, pos: np.ndarray) -> pl.DataFrame:
        """The rows at positions `pos` (any order, repeats allowed) of the table `put` kept,
        in that order: read from the record batches that hold them, one at a time."""
        pos = np.asarray(pos, dtype=np.int64)
        order = np.argsort(pos, kind="stable")
        batch = pos[order] // ID_BATCH
        cut = np.flatnonzero(np.diff(batch)) + 1
        chunks = [pl.DataFrame(pl.from_arrow(self._kept[name].empty_table()))]
        with pa.OSFile(str(self.dir / f"{name}.arrow")) as f:  # read, not mapped (see above)
            reader = pa.ipc.open_file(f)
            for sel in np.split(order, cut) if len(pos) else []:
                b = int(pos[sel[0]] // ID_BATCH)
                t = reader.get_batch(b).take(pa.array(pos[sel] - b * ID_BATCH))
                chunks.append(pl.DataFrame(pl.from_arrow(t)))
        out = pl.concat(chunks, rechunk=False)  # (one copy: the gather's)
        return out[np.argsort(order, kind="stable")] if len(pos) else out.rechunk()

    def drop_sets(self) -> None:
        """Done reading sets: their files removed and their offsets (16 bytes a row) freed."""
        self.drop("shingles.u32", "change.u32")
        self.offsets = self.change_offsets = np.zeros(1, np.int64)

    def drop(self, *names: str) -> None:
        """Remove working files no later step reads (their disk space)."""
        for name in names:
            (self.dir / name).unlink(missing_ok=True)

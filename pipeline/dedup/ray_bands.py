"""LSH band grouping on Ray (run.executor = "ray"): lsh.banded's buckets by a shuffle.

On one machine banded sorts a band's keys in the driver; on Ray they never pass through it.
(band, key, item) rows go to Ray a few bands at a time (a pass holds at most ROWS_AT_ONCE
rows): a task on the driver's node reads a band's keys from the stage's working files (on
that node's disk: `keys_of` is a store.BandKeys) and makes its rows in the object store. A
shuffle of plain Ray tasks: a task per band cuts its rows by a
hash of (band, key) into one piece per partition (`_split`), so that every bucket lands whole
in one partition; a task per partition joins its pieces and expands its buckets by lsh's own
kernel (`_reduce`, `bucket_pairs`): the pairs of a bucket within the cap, and a bucket over it
as (band, key, members). Not Ray Data's `repartition(keys=)`: its hash shuffle starts
aggregator actors, processes of their own that import the package again (about 10 s of CPU
of a 200k-item run on 2 CPUs went to the shuffle's processes), and a `groupby().map_groups`
makes a Python call per group, where nearly every bucket holds one item (40 us a call on 2
CPUs: hours at 10M items x 32 bands). The pairs stay in Ray's object store (ray_bucket_data;
ray_pairs.py takes them on) or come to the driver (pair_arrays); the big buckets come to the
driver, which resolves them as banded does (signature scan or skip, samples, counts) given
them as `made=`. Partitions come back in any order, so the big buckets are sorted by (band,
key), and banded deduplicates the pairs by sorting: the result equals banded's alone, field
for field.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.dedup import lsh
from pipeline.executors.ray import _count, _get, _spent, ensure_ray, here, in_turn, spread

if TYPE_CHECKING:
    from pipeline.config import RunConfig

ROWS_AT_ONCE = 1 << 25  # (band, key, item) rows of one pass: 16 bytes each, 512 MB
ROWS_PER_PARTITION = 1 << 22  # rows one worker's kernel sorts at once
KEYS = ["band", "key"]

OUT_SCHEMA = pa.schema(
    [
        ("band", pa.int32()),
        ("n", pa.int64()),  # pairs:
        ("pairs", pa.large_list(pa.uint64())),  # lo << 32 | hi, of buckets within the cap
        ("big_key", pa.large_list(pa.uint64())),  # buckets over the cap: key,
        ("big_offsets", pa.large_list(pa.int64())),  # where its members start,
        ("big_members", pa.large_list(pa.int64())),  # its members, sorted
    ]
)


def _lists(parts: list[np.ndarray], t: pa.DataType) -> pa.Array:
    """One list per array of `parts`, as a large_list<t> column."""
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([len(p) for p in parts], out=offsets[1:])
    values = pa.array(np.concatenate(parts), type=t)
    return pa.LargeListArray.from_arrays(pa.array(offsets), values)


def bucket_pairs(block: pa.Table, cap: int) -> pa.Table:
    """One partition's buckets (every row of a bucket is in it), a row per band: the pairs
    of the buckets of 2..cap items and the buckets over the cap (OUT_SCHEMA)."""
    if block.num_rows == 0:
        return OUT_SCHEMA.empty_table()
    band = block["band"].to_numpy()
    order = np.argsort(band, kind="stable")
    band = band[order]
    key = block["key"].to_numpy()[order]
    item = block["item"].to_numpy().astype(np.int64)[order]
    cuts = np.concatenate(([0], np.flatnonzero(band[1:] != band[:-1]) + 1, [len(band)]))
    outs = [
        lsh._band_pairs(key[s:e], item[s:e], cap)  # key and item of one band, contiguous
        for s, e in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)
    ]
    return pa.Table.from_arrays(
        [
            pa.array(band[cuts[:-1]], type=pa.int32()),
            pa.array([len(o[0]) for o in outs], type=pa.int64()),
            _lists([o[0] for o in outs], pa.uint64()),
            _lists([o[1] for o in outs], pa.uint64()),
            _lists([o[2] for o in outs], pa.int64()),
            _lists([o[3] for o in outs], pa.int64()),
        ],
        schema=OUT_SCHEMA,
    )


def _collect(t: pa.Table, big: list[tuple[int, Any, np.ndarray]]) -> None:
    """The buckets over the cap of a result batch of bucket_pairs into `big` (band, key,
    members)."""
    for r in range(t.num_rows):  # copies: a view would pin Ray's block in its object store
        band = int(t["band"][r].as_py())
        keys = np.array(t["big_key"][r].values.to_numpy())
        offsets = t["big_offsets"][r].values.to_numpy()
        members = np.array(t["big_members"][r].values.to_numpy())
        big.extend((band, keys[g], members[offsets[g] : offsets[g + 1]]) for g in range(len(keys)))


def _flat(t: pa.Table) -> pa.Table:
    """A result batch's pairs as rows of one uint64 column `p`."""
    return pa.table({"p": pc.list_flatten(t["pairs"])})


Big = list[tuple[int, Any, np.ndarray]]


def ray_bucket_data(
    keys_of: Callable[[int], np.ndarray],
    idx: np.ndarray,
    bands: int,
    cap: int,
    *,
    run: RunConfig,
    rows_at_once: int = ROWS_AT_ONCE,
) -> tuple[list[Any] | None, Big, int]:
    """(pairs, big, n): the pairs of the buckets within the cap as refs of tables of one
    column `p` (lo << 32 | hi, repeats across bands included; None for no item), kept in
    Ray's object store; the buckets over the cap in (band, key) order, on the driver; and
    the number of pairs. See the module docstring; `run` says where to start Ray."""
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    if len(idx) and idx.max() >= 1 << 32:
        raise ValueError("LSH pairs hold item indices in 32 bits")
    big: Big = []
    if not len(idx):
        return None, big, 0
    ray = ensure_ray(run)
    split = spread(ray, _split)
    reduce = spread(ray, _reduce, num_returns=2)
    per_pass = max(1, rows_at_once // len(idx))
    item = ray.put(pa.array(idx.astype(np.uint32)))
    keys = ray.put(keys_of)  # once: a task per band reads it
    read = here(ray, _band_rows, num_returns=2)
    pairs: list[Any] = []
    n = 0
    for b0 in range(0, bands, per_pass):
        todo = range(b0, min(bands, b0 + per_pass))
        parts = partitions(ray, len(todo) * len(idx))
        # map: each band's rows cut by partition; reduce: a partition's pieces of every band
        loads = list(in_turn(read, ((keys, b, item) for b in todo)))
        pieces = [split.options(num_returns=parts).remote(rows, parts) for rows, _ in loads]
        if parts == 1:
            pieces = [[p] for p in pieces]
        outs = [reduce.remote(cap, *[band[p] for band in pieces]) for p in range(parts)]
        del pieces
        for _, spent in loads:
            _count(_get(ray, spent))
        del loads
        for big_ref, pairs_ref in outs:
            t = ray.get(big_ref)
            _collect(t, big)
            n += int(pc.sum(t["n"]).as_py() or 0)
            pairs.append(pairs_ref)
    big.sort(key=lambda b: (b[0], int(b[1])))  # banded's order: band, then key
    return pairs, big, n


def _split(t: pa.Table, parts: int) -> list[pa.Table] | pa.Table:
    """A band's rows cut into `parts` tables by a hash of (band, key): a bucket's rows all
    go to one partition."""
    if parts == 1:
        return t
    h = t["key"].to_numpy() * np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: high bits
    h ^= t["band"].to_numpy().astype(np.uint64)
    part = ((h >> np.uint64(32)) % np.uint64(parts)).astype(np.int64)
    order = np.argsort(part, kind="stable")
    cuts = np.searchsorted(part[order], np.arange(parts + 1))
    return [t.take(pa.array(order[cuts[k] : cuts[k + 1]])) for k in range(parts)]


def _reduce(cap: int, *pieces: pa.Table) -> tuple[pa.Table, pa.Table]:
    """A partition's buckets expanded (bucket_pairs): (the rows' band, pair count and big
    buckets; the pairs as rows of `p`)."""
    out = bucket_pairs(pa.concat_tables(pieces).combine_chunks(), cap)
    return out.drop_columns(["pairs"]), _flat(out)


def partitions(ray: Any, rows: int) -> int:
    """Partitions for a shuffle of `rows` rows: every CPU busy, none over ROWS_PER_PARTITION."""
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    return max(cpus, -(-rows // ROWS_PER_PARTITION))


def pair_arrays(pairs: list[Any] | None) -> list[np.ndarray]:
    """Pairs (refs of tables of column `p`) as arrays on the driver."""
    if not pairs:
        return []
    import ray

    # one table at a time; copies: a view would pin Ray's block in its object store
    return [np.array(ray.get(ref)["p"]) for ref in pairs]


def _band_rows(
    keys_of: Callable[[int], np.ndarray], band: int, item: pa.Array, after: Any
) -> tuple[pa.Table, dict[str, Any]]:
    """Band `band`'s rows: (band, key, item) of every item, its keys read by `keys_of`; then
    the task's CPU time and node (`after`: the previous band's, executors.ray.in_turn)."""
    t0 = time.process_time()
    keys = keys_of(band)
    rows = pa.table(
        {
            "band": pa.array(np.full(len(item), band, np.int32)),
            "key": pa.array(np.ascontiguousarray(keys, np.uint64)),
            "item": item,
        }
    )
    return rows, _spent(t0)

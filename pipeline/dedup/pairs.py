"""Verification of candidate pairs: exact Jaccard of their shingle sets, the MinHash
estimate (for edges.parquet) and the Jaccard of their change sets (1 where the store keeps
none), a chunk of pairs at a time on the run's executor. Each chunk
reads only its own rows' sets (from the store file, store.Sets, or on Ray from the blocks of
them held in the object store, ray_sets.py), never the whole corpus."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.config import RunConfig
from pipeline.dedup import clusters as C
from pipeline.dedup.minhash import signatures
from pipeline.dedup.store import SetReader
from pipeline.executors import tasks

EDGE_SCHEMA = pa.schema(  # edges.parquet: the verified pairs at or above edge_floor
    [
        ("a", pa.string()),
        ("b", pa.string()),
        ("est_j", pa.float64()),
        ("exact_j", pa.float64()),
        ("change_j", pa.float64()),
    ]
)
VERIFY_CHUNK = 1 << 15  # candidate pairs verified at once: their rows' sets read per chunk


@dataclass
class Graph:
    """What find needs of the verified edges: stars and components per node, the counts,
    and edges.parquet's rows (a stream of tables, in the local file's order)."""

    keeper: np.ndarray
    j: np.ndarray
    comp: np.ndarray
    counts: dict[str, int]
    edges: Iterator[pa.Table]


def verify(
    sets: SetReader, rows: np.ndarray, a: np.ndarray, b: np.ndarray, run: RunConfig | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(exact J, estimated J, change J) of the pairs (a[k], b[k]) of items whose store rows
    are `rows`, a chunk of pairs at a time on the run's executor (locally in this process):
    `sets` are the store's (Store.sets, or on Ray ray_sets.HeldSets)."""
    out = [np.empty(len(a), dtype=np.float64) for _ in range(3)]
    todo = [(s, min(s + VERIFY_CHUNK, len(a))) for s in range(0, len(a), VERIFY_CHUNK)]
    at = 0
    for outs, _ in tasks(run or RunConfig(), todo, verify_chunk, (sets, rows, a, b)):
        j = outs["j"]
        for o, name in zip(out, ("exact", "est", "change"), strict=True):
            o[at : at + j.num_rows] = j[name].to_numpy()
        at += j.num_rows
    return out[0], out[1], out[2]


def verify_chunk(
    span: tuple[int, int], ctx: tuple[SetReader, np.ndarray, np.ndarray, np.ndarray]
) -> Any:
    """Pairs [s, e): their exact, estimated and change J."""
    sets, rows, a, b = ctx
    exact, est, change = jaccards(sets, rows, a[span[0] : span[1]], b[span[0] : span[1]])
    yield {"j": pa.table({"exact": exact, "est": est, "change": change})}, {}


def jaccards(
    sets: SetReader, rows: np.ndarray, a: np.ndarray, b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(exact J, estimated J, change J) of the pairs (a[k], b[k]) (one chunk): only their
    sets are read, signatures made from them."""
    aa, bb = rows[a], rows[b]
    u, inv = np.unique(np.concatenate([aa, bb]), return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    la, lb = inv[: len(aa)], inv[len(aa) :]
    offsets, values = sets.shingles(u)
    sig = signatures(offsets, values, *sets.perm)
    exact, est = C.exact_jaccard(offsets, values, la, lb, False), C.est_jaccard(sig, la, lb)
    ch = sets.changes(u)
    change = np.ones(len(a)) if ch is None else C.exact_jaccard(*ch, la, lb, True)
    return exact, est, change

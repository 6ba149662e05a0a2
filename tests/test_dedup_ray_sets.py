"""On Ray, verification reads the shingle and change sets from blocks in the object store
(ray_sets.py), not from the stage's working files: a worker on another node cannot open
those, as they are on the driver's disk."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.config import RunConfig
from pipeline.dedup import ray_sets, store
from pipeline.dedup.pairs import verify

RAY = RunConfig(executor="ray")


def _store(tmp_path, n: int) -> store.Store:
    """A store of n rows with shingle and change sets; every fourth row's sets are near
    the row before's, so the pairs verified below span all J."""
    rng = np.random.default_rng(3)
    s = store.Store(tmp_path / "w", 16, 1, 2, 2, change=True)
    sets, changes = [], []
    for k in range(n):
        base = sets[-1] if k % 4 and sets else rng.integers(0, 1 << 32, 40, dtype=np.uint32)
        keep = base[rng.random(len(base)) < 0.9]
        sets.append(np.unique(np.concatenate([keep, rng.integers(0, 1 << 32, 3, np.uint32)])))
        changes.append(np.unique(rng.integers(0, 64, rng.integers(0, 6), dtype=np.uint32)))
    for lo in range(0, n, 1000):

        def csr(part):
            offs = np.concatenate([[0], np.cumsum([len(x) for x in part])]).astype(np.int64)
            vals = np.concatenate(part) if part else np.empty(0, np.uint32)
            return offs, vals.astype(np.uint32)

        offs, vals = csr(sets[lo : lo + 1000])
        s.add(offs, vals, np.zeros((2, len(offs) - 1), np.uint64), csr(changes[lo : lo + 1000]))
    s.seal()
    return s


def test_verification_on_ray_reads_held_blocks_not_the_working_files(
    tmp_path, ray_local, monkeypatch
):
    monkeypatch.setattr(ray_sets, "BLOCK_ROWS", 300)  # several blocks (the tasks read it)
    s = _store(tmp_path, 2_500)
    rng = np.random.default_rng(5)
    rows = rng.permutation(2_500)  # item k is store row rows[k]
    a = rng.integers(0, 2_500, 4_000)
    after = np.argsort(rows)[(rows[a] + 1) % 2_500]  # the item of the next store row
    b = np.where(rng.random(4_000) < 0.5, after, rng.integers(0, 2_500, 4_000))
    want = verify(s.sets(), rows, a, b)  # here, from the files
    needed = np.unique(np.concatenate([rows[a], rows[b]]))
    held = ray_sets.hold(s.sets(), needed, run=RAY)
    everything = ray_sets.hold(s.sets(), None, run=RAY)
    assert len(held.blocks) == -(-len(needed) // 300) and len(everything.blocks) == 9
    s.drop(*s.names())  # the working files gone: only the held blocks can answer
    for sets in (held, everything):
        got = verify(sets, rows, a, b, RAY)
        for w, g in zip(want, got, strict=True):
            assert np.array_equal(w, g)
    assert 0 < (want[0] >= 0.8).sum() < len(a) and (want[2] < 1).any()  # a real mix of J
    with pytest.raises(ValueError, match="not held"):
        held.shingles(np.setdiff1d(np.arange(2_500), needed)[:1])


def test_sets_held_for_no_rows_answer_for_none(tmp_path, ray_local):
    s = _store(tmp_path, 10)
    held = ray_sets.hold(s.sets(), np.empty(0, np.int64), run=RAY)
    offs, vals = held.shingles(np.empty(0, np.int64))
    assert held.blocks == [] and list(offs) == [0] and len(vals) == 0

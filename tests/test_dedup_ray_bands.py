"""Band grouping on Ray Data (ray_bands.py) gives lsh.banded's Candidates, field for field."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pyarrow as pa

from pipeline.config import RunConfig
from pipeline.dedup import lsh
from pipeline.dedup.ray_bands import bucket_pairs, pair_arrays, ray_bucket_data

NUM_PERM, BANDS, ROWS = 64, 16, 4
CAP, MAX_BUCKET = 4, 30


def corpus() -> np.ndarray:
    """Signatures of templated families (each member redraws a few slots of its family's, so
    a family's buckets vary in size from band to band: within the cap, over it, and for the
    40-member family near-identical, over max_bucket) and of loners."""
    rng = np.random.default_rng(7)
    sigs = [rng.integers(0, 1 << 32, (300, NUM_PERM), dtype=np.uint32)]  # loners
    for size, redraw in (
        [(2, 0.1)] * 5 + [(3, 0.1)] * 4 + [(6, 0.1)] * 4 + [(12, 0.08)] * 3 + [(40, 0.01)]
    ):
        fam = np.tile(rng.integers(0, 1 << 32, NUM_PERM, dtype=np.uint32), (size, 1))
        at = rng.random(fam.shape) < redraw
        fam[at] = rng.integers(0, 1 << 32, int(at.sum()), dtype=np.uint32)
        sigs.append(fam)
    sig = np.concatenate(sigs)
    return sig[rng.permutation(len(sig))]  # families spread over the rows


def banded_both(sig: np.ndarray, idx: np.ndarray, **kw) -> tuple[lsh.Candidates, ...]:
    keys = lsh.band_keys(sig, idx, 0, BANDS, ROWS)
    args = (lambda b: keys[b], lambda m: sig[m], idx, BANDS, ROWS, CAP, NUM_PERM)
    opts = dict(nsample=3, max_bucket=MAX_BUCKET)
    pairs, big, n = ray_bucket_data(args[0], idx, BANDS, CAP, run=RunConfig(), **kw)
    made = (pair_arrays(pairs), big)
    assert n == sum(len(p) for p in made[0])
    return lsh.banded(*args, **opts), lsh.banded(*args, **opts, made=made)


def assert_same(want: lsh.Candidates, got: lsh.Candidates) -> None:
    for f in dataclasses.fields(lsh.Candidates):
        a, b = getattr(want, f.name), getattr(got, f.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b), f.name
        else:
            assert a == b, f.name


def test_ray_data_buckets_are_the_local_ones(ray_local):
    sig = corpus()
    idx = np.flatnonzero(np.arange(len(sig)) % 9 != 4)  # not every row is eligible
    t0 = time.perf_counter()
    # 8 bands per pass: 2 passes, so bands are fed a few at a time
    want, got = banded_both(sig, idx, rows_at_once=8 * len(idx))
    print(f"ray_bucket_data + banded: {time.perf_counter() - t0:.1f} s")
    assert_same(want, got)
    # the corpus covers every kind of bucket
    assert want.raw_pairs > len(want.a) > 0
    assert want.big_scanned.any() and not want.big_scanned.all()
    assert want.big_found.sum() > 0 and want.skipped_pairs > 0
    assert len(np.unique(want.big_band)) > 1


def test_nothing_to_band_is_the_local_nothing():
    assert_same(*banded_both(corpus(), np.arange(0)))  # Ray is not asked


def test_a_partition_expands_each_band_on_its_own():
    """bucket_pairs (run per partition): equal keys in two bands are two buckets."""
    t = pa.table(
        {
            "band": pa.array([1, 0, 1, 0, 0, 0, 0], pa.int32()),
            "key": pa.array([5, 5, 5, 5, 5, 5, 9], pa.uint64()),
            "item": pa.array([3, 1, 2, 7, 8, 9, 4], pa.uint32()),
        }
    )
    out = bucket_pairs(t, cap=3).to_pydict()
    assert out["band"] == [0, 1]
    assert out["pairs"] == [[], [2 << 32 | 3]]
    assert out["big_key"] == [[5], []] and out["big_members"] == [[1, 7, 8, 9], []]
    assert bucket_pairs(t.slice(0, 0), cap=3).num_rows == 0

import numpy as np

from pipeline.arrays import sorted_unique
from pipeline.dedup.lsh import candidates, p_candidate, sorted_keys


def test_default_bands_catch_a_pair_at_the_threshold():
    assert round(p_candidate(0.8, 32, 8), 3) == 0.997
    assert p_candidate(0.5, 32, 8) < 0.15


def test_items_sharing_a_band_are_candidates_once():
    sig = np.array([[1, 2, 3, 4], [1, 2, 9, 9], [7, 7, 3, 4], [5, 5, 5, 5]], dtype=np.uint32)
    c = candidates(sig, np.arange(4), bands=2, rows=2, cap=64)
    assert list(zip(c.a, c.b, strict=True)) == [(0, 1), (0, 2)]
    assert c.raw_pairs == 2 and len(c.big_size) == 0


def test_a_bucket_over_the_cap_is_scanned_once_not_skipped():
    sig = np.zeros((7, 4), dtype=np.uint32)
    sig[6] = 9  # alone; item 0 is not asked about
    c = candidates(sig, np.arange(1, 7), bands=2, rows=2, cap=3, nsample=2)
    # every pair of the 6-item bucket is found, compared once (band 0), not again in band 1
    assert len(c.a) == 10 and set(c.a) | set(c.b) == {1, 2, 3, 4, 5}
    assert list(c.big_band) == [0, 1] and list(c.big_size) == [5, 5]
    assert c.big_sample.tolist() == [[1, 2], [1, 2]]
    assert c.big_compared.tolist() == [10, 0] and c.skipped_pairs == 0


def test_a_scanned_bucket_keeps_only_pairs_near_enough_on_signatures():
    rng = np.random.default_rng(0)
    sig = rng.integers(0, 1 << 31, size=(6, 16), dtype=np.uint32)
    sig[:, :4] = 7  # all six share band 0
    sig[1, 4:14] = sig[0, 4:14]  # items 0 and 1: 14 of 16 slots equal
    c = candidates(sig, np.arange(6), bands=4, rows=4, cap=2, scan_floor=0.8)
    assert list(zip(c.a, c.b, strict=True)) == [(0, 1)]
    assert c.big_compared.sum() == 15


def test_a_bucket_over_max_bucket_is_skipped_and_counted():
    sig = np.zeros((5, 4), dtype=np.uint32)
    c = candidates(sig, np.arange(5), bands=1, rows=4, cap=2, max_bucket=4)
    assert len(c.a) == 0 and c.big_scanned.tolist() == [False] and c.skipped_pairs == 10


def test_a_templated_family_keeps_full_recall_past_the_cap():
    """300 items sharing every band: the pairs a star needs are all found."""
    base = np.arange(64, dtype=np.uint32)
    sig = np.tile(base, (300, 1))
    c = candidates(sig, np.arange(300), bands=8, rows=8, cap=64)
    assert len(c.a) == 300 * 299 // 2
    assert c.big_compared.sum() == 300 * 299 // 2  # scanned in band 0 only


def test_sorted_keys_is_a_stable_argsort_however_the_keys_fall():
    rng = np.random.default_rng(3)
    uniform = rng.integers(0, 1 << 63, 5000, dtype=np.uint64) * np.uint64(2)
    repeats = rng.choice(uniform[:40], 5000)  # a few keys, many times each (a big bucket)
    clash = rng.integers(0, 1 << 20, 5000, dtype=np.uint64)  # all on the same top bits
    for key in (uniform, repeats, clash, uniform[:1], uniform[:0]):
        sk, order = sorted_keys(key)
        assert np.array_equal(order, np.argsort(key, kind="stable"))
        assert np.array_equal(sk, np.sort(key))


def test_sorted_unique_is_np_unique():
    x = np.random.default_rng(4).integers(0, 50, 1000).astype(np.uint64)
    assert np.array_equal(sorted_unique(x.copy()), np.unique(x))
    assert len(sorted_unique(np.empty(0, np.uint64))) == 0

import numpy as np

from pipeline.dedup.lsh import candidates, p_candidate


def test_default_bands_catch_a_pair_at_the_threshold():
    assert round(p_candidate(0.8, 32, 8), 3) == 0.997
    assert p_candidate(0.5, 32, 8) < 0.15


def test_items_sharing_a_band_are_candidates_once():
    sig = np.array([[1, 2, 3, 4], [1, 2, 9, 9], [7, 7, 3, 4], [5, 5, 5, 5]], dtype=np.uint32)
    c = candidates(sig, np.arange(4), bands=2, rows=2, cap=64)
    assert list(zip(c.a, c.b, strict=True)) == [(0, 1), (0, 2)]
    assert c.raw_pairs == 2 and len(c.big_size) == 0


def test_a_bucket_over_the_cap_is_reported_not_expanded():
    sig = np.zeros((7, 4), dtype=np.uint32)
    sig[6] = 9  # alone; item 0 is not asked about
    c = candidates(sig, np.arange(1, 7), bands=2, rows=2, cap=3, nsample=2)
    assert len(c.a) == 0
    assert list(c.big_band) == [0, 1] and list(c.big_size) == [5, 5]
    assert c.big_sample.tolist() == [[1, 2], [1, 2]]

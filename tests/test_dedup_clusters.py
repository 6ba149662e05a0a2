import numpy as np
import polars as pl

from pipeline.dedup.clusters import best_first, components, est_jaccard, exact_jaccard


def test_exact_jaccard_over_sorted_sets_and_empty_sets_score_zero():
    offsets = np.array([0, 3, 6, 6, 6])
    values = np.array([1, 2, 3, 2, 3, 4], dtype=np.uint32)
    j = exact_jaccard(offsets, values, np.array([0, 0, 2]), np.array([1, 0, 3]))
    assert j.tolist() == [0.5, 1.0, 0.0]


def test_est_jaccard_is_the_share_of_equal_slots():
    sig = np.array([[1, 2, 3, 4], [1, 2, 0, 0]], dtype=np.uint32)
    assert est_jaccard(sig, np.array([0]), np.array([1])).tolist() == [0.5]


def test_components_are_labelled_by_their_smallest_node_whatever_the_edge_order():
    a, b = np.array([4, 3, 1]), np.array([3, 0, 2])
    assert components(6, a, b).tolist() == [0, 1, 1, 0, 0, 5]
    assert components(6, b[::-1].copy(), a[::-1].copy()).tolist() == [0, 1, 1, 0, 0, 5]


def test_keeper_rank_longest_comment_then_earliest_then_id():
    df = pl.DataFrame(
        {
            "g": [0, 0, 0, 1],
            "id": ["c", "b", "a", "d"],
            "source": "s",
            "source_ref": "r",
            "comment": ["long one", "long one", "x", "y"],
            "created_at": [None, 5, 1, 1],
        }
    )
    out = best_first(df, "g", ["-comment_len", "created_at", "id"])
    assert out["id"].to_list() == ["b", "c", "a", "d"]

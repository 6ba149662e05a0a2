import numpy as np
import polars as pl

from pipeline.dedup.clusters import best_first, components, est_jaccard, exact_jaccard


def test_exact_jaccard_over_sorted_sets_and_empty_sets_score_zero():
    offsets = np.array([0, 3, 6, 6, 6])
    values = np.array([1, 2, 3, 2, 3, 4], dtype=np.uint32)
    j = exact_jaccard(offsets, values, np.array([0, 0, 2]), np.array([1, 0, 3]), False)
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


def test_path_depth_keeps_the_shallowest_path_and_a_missing_path_last():
    df = pl.DataFrame(
        {
            "g": [0, 0, 0, 0],
            "id": ["a", "b", "c", "d"],
            "source": "s",
            "source_ref": "r",
            "path": [None, "deno/lib/types.ts", "src/types.ts", "vendor/x/src/types.ts"],
        }
    )
    out = best_first(df, "g", ["path_depth", "id"])
    assert out["id"].to_list() == ["c", "b", "d", "a"]


def test_stars_match_the_reference_on_random_graphs():
    from pipeline.dedup.clusters import stars, stars_reference

    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(2, 30))
        m = int(rng.integers(0, n * 2))
        pairs = {tuple(sorted(map(int, rng.choice(n, 2, replace=False)))) for _ in range(m)}
        edges = {p: float(rng.uniform(0.8, 1.0)) for p in sorted(pairs)}
        order = rng.permutation(n).astype(np.int64)
        a = np.array([p[0] for p in edges], dtype=np.int64)
        b = np.array([p[1] for p in edges], dtype=np.int64)
        j = np.array(list(edges.values()), dtype=np.float64)
        keeper, jk = stars(order, a, b, j)
        ref_k, ref_j = stars_reference(order.tolist(), edges)
        assert keeper.tolist() == [ref_k[x] for x in range(n)]
        assert jk.tolist() == [ref_j[x] for x in range(n)]
        # no chaining: a removed node's edge is to its own keeper; keepers share no edge
        for x in range(n):
            k = keeper[x]
            assert k == x or tuple(sorted((x, k))) in edges
            assert keeper[k] == k
        assert not any(keeper[x] == x and keeper[y] == y for x, y in edges)

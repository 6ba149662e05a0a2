import polars as pl
import pytest

from pipeline.dedup import tune as T
from tests.test_dedup_stage import corpus, make_run

EDGES = pl.DataFrame(
    {
        "a": ["a", "b", "d"],
        "b": ["b", "c", "e"],
        "est_j": [0.9, 0.6, 0.7],
        "exact_j": [0.9, 0.6, 0.7],
    }
)
# "a" stands for 3 items (itself and two exact copies x1, x2)
CLUSTERS = pl.DataFrame({"id": ["a", "x1", "x2", "b"], "exact_of": ["a", "a", "a", "b"]})


def test_sweep_counts_pairs_clusters_and_items_removed_per_threshold():
    t = T.sweep(EDGES, T.rep_weights(CLUSTERS), 10, [0.5, 0.8, 0.95])
    assert t.select("threshold", "pairs", "clusters", "items_removed").rows() == [
        (0.5, 3, 2, 5),  # {a(3), b, c} and {d, e}
        (0.8, 1, 1, 3),  # {a(3), b}
        (0.95, 0, 1, 2),  # a's exact copies only
    ]
    assert t["share_removed"].to_list() == [0.5, 0.3, 0.2]
    assert t["p_candidate"][1] == pytest.approx(0.997, abs=1e-3)


def test_sweep_with_the_keeper_rank_clusters_into_stars_as_the_stage_does():
    # chain a - b - c at 0.5: ranked a, b, c, the star of a takes b; c keeps
    rank = pl.DataFrame({"rep": ["a", "b", "c", "d", "e"], "pos": [0, 1, 2, 3, 4]})
    t = T.sweep(EDGES, T.rep_weights(CLUSTERS), 10, [0.5], rank=rank)
    assert t.select("clusters", "items_removed").rows() == [(2, 4)]  # {a(3), b}, {d, e}
    # ranked b first: b's star takes a (and a's two copies) and c
    rank_b = rank.with_columns(pos=pl.Series([1, 0, 2, 3, 4]))
    assert T.sweep(EDGES, T.rep_weights(CLUSTERS), 10, [0.5], rank=rank_b)[
        "items_removed"
    ].to_list() == [5]


def test_labelled_pairs_give_precision_recall_and_the_best_threshold():
    labels = pl.DataFrame(
        {
            "id_a": ["a", "x1", "b", "d", "a"],
            "id_b": ["b", "a", "c", "e", "z"],
            "is_duplicate": [True, True, False, True, False],
        }
    )
    pr = T.precision_recall(EDGES, CLUSTERS, labels, [0.5, 0.65, 0.8])
    assert pr.select("threshold", "tp", "fp", "fn").rows() == [
        (0.5, 3, 1, 0),
        (0.65, 3, 0, 0),
        (0.8, 2, 0, 1),
    ]
    assert T.best_threshold(pr) == 0.65


def test_borderline_shows_the_pairs_either_side_of_the_threshold():
    b = T.borderline(EDGES, 0.8, k=1)
    assert b.select("a", "side").rows() == [("d", "below"), ("a", "above")]


def test_tune_command_writes_table_plot_and_scores_labels(tmp_path, cli):
    cfg, p = make_run(tmp_path, corpus())
    cli("dedup", "--config", p)
    removed = pl.read_parquet(cfg.run_dir / "dedup" / "removed.parquet")
    labels = tmp_path / "labels.csv"
    pl.DataFrame(
        {"id_a": removed["id"], "id_b": removed["keeper_id"], "is_duplicate": 1}
    ).write_csv(labels)
    res = cli("tune", cfg.run_dir, "--labels", labels, "--ngram", "3")
    out = cfg.run_dir / "tune"
    for f in ("sweep.csv", "sweep.png", "borderline.csv", "labels_pr.csv"):
        assert (out / f).stat().st_size > 0, f
    sweep = pl.read_csv(out / "sweep.csv")
    assert sorted(sweep["ngram"].unique()) == [3, 5]
    at = sweep.filter((pl.col("ngram") == 5) & (pl.col("threshold") == 0.8))
    assert at["items_removed"].to_list() == [removed.height]
    assert "best threshold by F1" in res.output
    assert pl.read_csv(out / "labels_pr.csv").filter(pl.col("threshold") == 0.8)["recall"][0] == 1


def test_tune_without_a_dedup_stage_says_what_to_run(tmp_path, cli):
    res = cli("tune", tmp_path, ok=False)
    assert res.exit_code == 2 and "run `editcurate dedup` first" in res.output

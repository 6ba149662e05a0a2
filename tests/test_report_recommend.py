"""The Stage 1 recommendation: the smallest shape policy that keeps every batch free of two
items of one group and keeps apart the non-finite sets smoke-train found."""

from __future__ import annotations

import polars as pl

from pipeline.report.recommend import recommend


def shapes(groups: dict[str, list[str]], scope: str = "repo") -> pl.DataFrame:
    """shapes.parquet rows: each group's ids (a group of one is an item alone)."""
    rows = [{"id": i, "scope": scope, "group_id": g} for g, ids in groups.items() for i in ids]
    return pl.DataFrame(rows)


def sampling(twins: dict[str, int | None], items: dict[str, int], total: int) -> dict:
    """The sampling section's figures: batches with two of one group and items per policy."""
    order = ["no shape dedup", "cap k=1", "cap k=2", "cap k=4", "spread"]
    return {
        "present": True,
        "scope": "repo",
        "batch": 16,
        "policies": [
            {
                "policy": p,
                "items": items.get(p, total),
                "share_of_corpus": round(100.0 * items.get(p, total) / total, 2),
                "batches_with_shape_twins": twins.get(p, 0),
                "language_kept": {"rust": 100.0},
                "repo_kept": {"acme/kv": 100.0},
            }
            for p in order
        ],
    }


# 40 items: one version-bump class of 3 (Cargo.toml rev bumps), the rest alone
BUMPS = ["b1", "b2", "b3"]
GROUPS = {"bump": BUMPS, **{f"solo{k}": [f"s{k:02d}"] for k in range(37)}}


def test_nothing_to_do_when_no_batch_holds_two_of_one_group():
    r = recommend(sampling({}, {}, 40), shapes(GROUPS), {}, window=16)
    assert r["policy"] == "no shape dedup" and r["settings"] == ["shapes.policy=annotate"]
    assert r["considered"][0]["verdict"] == "no batch holds two items of one group"


def test_spread_before_cap_when_it_can_be_spread_even_if_not_run():
    """Spread keeps every item: it is smaller than any cap; not run, it is checked for
    feasibility (largest group <= windows) and the user is told to rerun shapes."""
    samp = sampling({"no shape dedup": 2, "spread": None}, {"cap k=1": 38, "cap k=2": 39}, 40)
    r = recommend(samp, shapes(GROUPS), {}, window=16)
    assert r["policy"] == "spread" and not r["verified"]
    assert r["settings"] == ["shapes.policy=spread", "shapes.scope=repo", "shapes.window=16"]
    assert r["considered"][1]["verdict"].startswith("not run (largest group 3 items, 3 windows")
    assert r["share"] == 100.0 and r["language_kept"] == {"rust": 100.0}


def test_cap_when_the_largest_group_cannot_be_spread():
    """A group of 5 over 2 windows of 16 (20 items) cannot be spread: the largest cap with no
    two of one group in a batch is chosen, as settings a user can paste."""
    groups = {"bump": [f"b{k}" for k in range(5)], **{f"solo{k}": [f"s{k}"] for k in range(15)}}
    samp = sampling(
        {"no shape dedup": 1, "spread": None, "cap k=4": 1, "cap k=2": 0},
        {"cap k=4": 19, "cap k=2": 17, "cap k=1": 16},
        20,
    )
    r = recommend(samp, shapes(groups), {}, window=16)
    assert "it cannot be spread" in r["considered"][1]["verdict"]
    assert r["policy"] == "cap k=2" and r["items"] == 17
    assert r["settings"] == [
        "shapes.policy=cap",
        "shapes.scope=repo",
        "shapes.cap_other=2",
        "shapes.cap_digit_only=2",
    ]
    assert "Smaller steps fall short" in r["reason"] and "cap k=4: 1 batches" in r["reason"]


def test_a_non_finite_pair_of_one_group_rules_out_doing_nothing():
    """The incident: two version bumps of one file, NaN only together. Even with no twins in the
    seeded order, the pair must be kept apart: spread (which ran, no twins) does it."""
    smoke = {"culprits": [{"ids": ["b1", "b2"], "found_by": "window", "table": []}]}
    r = recommend(sampling({}, {}, 40), shapes(GROUPS), smoke, window=16)
    assert r["policy"] == "spread" and r["verified"]
    assert "could still meet in a batch" in r["considered"][0]["verdict"]
    (c,) = r["culprit_sets"]
    assert c["groups"] == ["bump"] and "no shape dedup" not in c["kept_apart_by"]
    assert {"spread", "cap k=1"} <= set(c["kept_apart_by"])
    assert "keeps apart the non-finite sets" in r["reason"]


def test_a_set_no_shape_policy_separates_is_named_as_the_data():
    """A pair of items from different groups, or one item alone, is not batching's doing."""
    smoke = {"culprits": [{"ids": ["s01", "s02"]}, {"ids": ["s05"]}]}
    r = recommend(sampling({}, {}, 40), shapes(GROUPS), smoke, window=16)
    assert r["policy"] == "no shape dedup"
    assert [c["kept_apart_by"] for c in r["culprit_sets"]] == [[], []]
    assert "2 non-finite set(s) from smoke-train cannot be kept apart" in r["reason"]


def test_without_shapes_it_says_so():
    r = recommend({"present": False}, None, {}, window=16)
    assert not r["present"] and "shapes stage not run" in r["note"]

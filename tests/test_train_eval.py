"""smoke-train's judgement: changed-region similarity, its baselines, the gate, held-out items."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.train.evaluate import changed, gate, region_score

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from pipeline.train import stage as smoke  # noqa: E402
from tests.test_train_smoke import items, run_dir, small  # noqa: E402


def test_copy_baseline_scores_zero_on_a_pure_insertion():
    before = "def f(x):\n    return x\n"
    after = "def f(x):\n    x = int(x)\n    return x\n"
    removed, put = changed(before, after)
    assert removed == "" and sorted(put) == sorted("    x = int(x)\n")  # the inserted line
    assert region_score(before, before, after) == 0.0
    assert region_score(before, after, after) == 100.0


def test_changed_region_ignores_the_unchanged_lines_around_the_edit():
    before = "a = 1\n" * 20 + "if x == None:\n" + "b = 2\n" * 20
    after = "a = 1\n" * 20 + "if x is None:\n" + "b = 2\n" * 20
    assert region_score(before, before, after) == 0.0  # whole-string similarity would be ~99
    half = "a = 1\n" * 20 + "if x iz None:\n" + "b = 2\n" * 20
    assert 0 < region_score(before, half, after) < 100
    assert region_score(before, "garbage", after) == 0.0  # rewriting everything: no credit
    assert region_score("abc", "", "") == 100.0 and region_score("abc", "abc", "") == 0.0


def test_gate_pass_fail_skipped():
    r = {"items": 3, "model": 40.0, "base_model": 10.0, "copy_before": 0.0}
    assert gate(r, 3)["gate"] == "pass"
    assert gate({**r, "base_model": 40.0}, 3)["gate"] == "fail"
    assert gate(r, 0) == {
        "gate": "skipped",
        "gate_reason": "--eval-items 0: no held-out items judged",
    }
    assert gate({**r, "items": 0}, 3)["gate"] == "skipped"


def test_gate_judges_validation_items_only(tmp_path):
    val = items(3, start=50)
    test = items(3, start=70)
    d = run_dir(tmp_path, items(16), validation=val, test=test)
    s = smoke.run(d, small(eval_items=10, max_new_tokens=4))
    g = s["generation"]
    assert g["split"] == "validation" and g["held_out"] is True
    assert g["ids"] == val["id"].to_list() and g["items"] == 3
    judged = pl.read_parquet(d / "smoke" / "eval.parquet")
    assert judged["id"].to_list() == val["id"].to_list()
    assert {"model", "base_model", "copy_before"} <= set(judged.columns)
    assert judged["copy_before"].to_list() == [0.0, 0.0, 0.0]
    assert s["gate"] in ("pass", "fail") and "3 items" in s["gate_reason"]
    trained = set(pl.read_parquet(d / "smoke" / "items.parquet")["id"].to_list())
    assert not trained & set(g["ids"]) and trained == set(items(16)["id"].to_list())
    assert json.loads((d / "smoke" / "summary.json").read_text())["gate"] == s["gate"]

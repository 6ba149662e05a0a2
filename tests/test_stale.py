"""No output is older than what should have made it: a stage that runs again with other output
makes every stage downstream of it stale, and nothing reads a stale stage as current."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.api import Pipeline
from pipeline.runs import MANIFEST, STALE, read_manifest, stale_stages
from pipeline.stage import NAMES
from pipeline.verify import verify_run
from pipeline.why import explain

SAMPLE = Path(__file__).parent.parent / "data" / "sample" / "edits.jsonl"

# a change to each stage's config that changes its output on the sample
CHANGES = {
    "filter": {"filter.rules": "strict"},
    "dedup": {"dedup.threshold": 0.5, "dedup.shingle": "chars"},
    "decontaminate": {"decontaminate.against": [str(SAMPLE)]},
    "shapes": {"shapes.policy": "cap", "shapes.cap_other": 1, "shapes.cap_digit_only": 1},
}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("stale") / "run"
    Pipeline.from_paths(SAMPLE, out=out).run()
    return out


@pytest.mark.parametrize("stage", list(CHANGES))
def test_a_changed_stage_run_alone_makes_everything_after_it_stale(full_run, tmp_path, stage):
    out = tmp_path / "run"
    shutil.copytree(full_run, out)
    done = Pipeline.from_paths(SAMPLE, out=out, overrides=CHANGES[stage]).run(until=stage)
    after = NAMES[NAMES.index(stage) + 1 :]
    assert list(stale_stages(out)) == list(after)
    for name in after:
        assert not (out / name / MANIFEST).exists()
        why = json.loads((out / name / STALE).read_bytes())["stale_because"]
        made_stale_by = NAMES[NAMES.index(stage) : NAMES.index(name)]
        assert why == f"{stage} changed after it ran" or why in {
            f"{u} is stale" for u in made_stale_by
        }
    problems, passed = verify_run(out)  # the current stages conserve; stale ones are not read
    assert not problems
    assert [p.split(":")[0] for p in passed] == list(NAMES[: NAMES.index(stage) + 1])
    assert list(done.summary()["stale"]) == list(after)
    assert set(done.summary()["stages"]).isdisjoint(after)
    # the whole run again brings every stage up to date
    Pipeline.from_paths(SAMPLE, out=out, overrides=CHANGES[stage]).run()
    assert stale_stages(out) == {} and not verify_run(out)[0]
    assert all(read_manifest(out / n) for n in NAMES)


def test_an_unchanged_rerun_leaves_later_stages_current(full_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(full_run, out)
    Pipeline.from_paths(SAMPLE, out=out).run(until="dedup", force=True)  # same output bytes
    assert stale_stages(out) == {} and all(read_manifest(out / n) for n in NAMES)


def test_why_says_a_stage_is_stale(full_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(full_run, out)
    Pipeline.from_paths(SAMPLE, out=out, overrides=CHANGES["dedup"]).run(until="dedup")
    some = pl.read_parquet(out / "dedup" / "kept.parquet")["id"][0]
    (result,) = explain(out, [some])
    assert "stale" in json.dumps(result, default=str)


def test_the_report_refuses_a_run_with_stale_stages(full_run, tmp_path):
    from pipeline.report.report import ReportFailed, build

    out = tmp_path / "run"
    shutil.copytree(full_run, out)
    Pipeline.from_paths(SAMPLE, out=out, overrides=CHANGES["shapes"]).run(until="shapes")
    with pytest.raises(ReportFailed, match="stage export stale .*editcurate run"):
        build(out)

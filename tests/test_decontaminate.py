"""The decontaminate stage: items near a benchmark's test items leave; the rest pass through."""

from __future__ import annotations

import json

import polars as pl

from pipeline.runs import read_manifest
from pipeline.stage import NAMES, by_name
from pipeline.verify import verify_run
from tests.test_dedup_incremental import corpus, frame, near_twin, run, write


def test_it_sits_between_dedup_and_shapes_and_shapes_reads_it():
    assert NAMES.index("decontaminate") == NAMES.index("dedup") + 1
    assert NAMES.index("shapes") == NAMES.index("decontaminate") + 1
    assert by_name("shapes").reads == ("decontaminate/kept.parquet",)


def test_without_benchmarks_it_passes_every_item_through(tmp_path):
    done = run(tmp_path, "plain", corpus(20))
    kept = frame(done, "decontaminate/kept.parquet")
    assert kept.equals(frame(done, "dedup/kept.parquet"))
    assert frame(done, "decontaminate/removed.parquet").height == 0
    assert frame(done, "shapes/kept.parquet").height == 20
    m = read_manifest(done / "decontaminate")
    assert m["counts"]["kept"] == 20 and m["counts"]["removed"] == 0
    assert verify_run(done)[0] == []


def test_a_planted_benchmark_item_and_its_near_twin_are_removed(tmp_path, cli):
    rows = corpus(30, seed=5)
    bench_rows = corpus(8, seed=77)
    planted, twin = bench_rows[3], near_twin(bench_rows[5], "t")
    data = [*rows[:15], {**planted, "comment": "copied from the benchmark"}, *rows[15:], twin]
    # the benchmark: a CSV (any table format ingest reads), default item field names
    csv = tmp_path / "bench.csv"
    pl.DataFrame(bench_rows).select("before", "after", "comment").write_csv(csv)
    other = write(tmp_path / "other.jsonl", corpus(4, seed=78))
    done = run(
        tmp_path,
        "clean",
        data,
        decontaminate={"against": [str(csv), str(other)], "threshold": 0.8},
    )
    kept = frame(done, "decontaminate/kept.parquet")
    removed = frame(done, "decontaminate/removed.parquet").sort("kind")
    assert kept.height == 30 and sorted(kept["path"]) == sorted(r["path"] for r in rows)
    assert removed["kind"].to_list() == ["near", "same_content"]
    assert removed["benchmark_source"].to_list() == [str(csv), str(csv)]
    refs = [r.split(" (")[0] for r in removed["benchmark_ref"]]  # CSV: "row 6 (line 67)"
    assert refs == ["row 6", "row 4"]
    assert removed["j"][1] == 1.0 and 0.8 <= removed["j"][0] < 1.0
    assert frame(done, "shapes/kept.parquet").height == 30
    m = read_manifest(done / "decontaminate")
    assert m["counts"]["removed"] == 2 and m["counts"]["benchmark_items"] == 12
    assert m["benchmarks"][str(csv)]["removed"] == 2
    assert m["benchmarks"][str(other)] | {"reasons": {}} == {
        "records": 4,
        "items": 4,
        "errors": 0,
        "reasons": {},
        "removed": 0,
    }
    assert verify_run(done)[0] == []
    why = cli("why", done, removed["id"][1]).stdout
    assert f"decontaminate removed: same_content of benchmark item {csv} row 4" in why
    cli("report", done)
    funnel = json.loads((done / "report" / "report.json").read_text())["funnel"]["stages"]
    assert {"stage": "decontaminate", "in": 32, "out": 30} in [
        {k: f[k] for k in ("stage", "in", "out")} for f in funnel
    ]
    # a stricter threshold keeps the twin; the stage re-runs, dedup does not
    stamp = (done / "dedup" / "manifest.json").stat().st_mtime_ns
    again = run(tmp_path, "clean", data, decontaminate={"against": [str(csv)], "threshold": 0.99})
    assert (done / "dedup" / "manifest.json").stat().st_mtime_ns == stamp
    assert frame(again, "decontaminate/removed.parquet")["kind"].to_list() == ["same_content"]


def test_unreadable_or_unusable_benchmarks_fail_naming_them(tmp_path, cli):
    src = write(tmp_path / "e.jsonl", corpus(3))
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[run]\nname = "r"\nroot = "runs"\n[[ingest.sources]]\nkind = "table"\n'
        f'path = "{src.name}"\n[decontaminate]\nagainst = ["nope.jsonl"]\n'
    )
    res = cli("run", "--config", cfg, ok=False)
    assert res.exit_code == 3 and "decontaminate.against: nope.jsonl" in res.output
    write(tmp_path / "wrong.jsonl", [{"question": "q", "answer": "a"}])
    res = cli("run", "--config", cfg, "--set", 'decontaminate.against=["wrong.jsonl"]', ok=False)
    assert res.exit_code == 2
    assert "decontaminate.against: wrong.jsonl: no benchmark item in 1 records" in res.output


def test_an_earlier_runs_test_split_folder_is_a_benchmark(tmp_path):
    """`against` may name a stage output (a folder of Parquet parts): a later batch is
    decontaminated against the test split of an earlier release."""
    first = run(tmp_path, "first", corpus(40, seed=3), until="export")
    test = first / "export" / "test.parquet"
    held = frame(first, "export/test.parquet")
    assert test.is_dir() and held.height > 0
    data = [*corpus(10, seed=9), *held.select("before", "after", "comment", "path").to_dicts()]
    done = run(tmp_path, "second", data, decontaminate={"against": [str(test)]})
    removed = frame(done, "decontaminate/removed.parquet")
    assert sorted(removed["before"]) == sorted(held["before"])
    assert set(removed["kind"]) == {"same_content"}
    assert verify_run(done)[0] == []

"""bench/run.py's figures from fake rounds: medians, paired ratios, the exit part, the goals."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "run.py"


def _load():
    path = list(sys.path)  # the bench puts bench/ first on sys.path: not for the tests after
    try:
        spec = importlib.util.spec_from_file_location("bench_run", BENCH)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path[:] = path


bench = _load()
PARTS = {"startup": 0.5, "stages": 6.0, "between_stages": 1.0, "verify": 0.5, "report": 1.0}


def one(cpu: float, wall: float, ingest: float, floor_cpu: float, peak: float = 500.0) -> dict:
    stages = {"ingest": ingest, "filter": 2.0}
    return {
        "run": {
            "wall_s": wall,
            "cpu_s": cpu,
            "peak_mib": peak,
            "stages": stages,
            "stage_wall": stages,
            "parts": {"process": cpu - 0.5, **PARTS},
        },
        "floor": {"wall_s": 1.0, "cpu_s": floor_cpu, "peak_mib": 90.0, "work_cpu_s": 1.0},
    }


def test_medians_ratios_and_goals():
    rounds = [one(100.0, 80.0, 2.0, 2.0), one(120.0, 100.0, 4.0, 2.0, peak=2000.0)]
    rounds.append(one(110.0, 85.0, 3.0, 4.0))
    res = bench.summarise(rounds, 1_000_000)
    run, floor = res["run"], res["floor"]
    assert (run["cpu_s"], run["wall_s"], run["max_peak_mib"]) == (110.0, 85.0, 2000.0)
    assert run["us_per_item"] == 110.0
    assert run["parts"]["exit"] == 0.5  # wait4's CPU less the process's own
    assert floor["ratio_cpu"] == 50.0  # the median of the paired 50, 60, 27.5
    assert res["ingest_vs_floor"]["x_floor_work"] == 3.0
    assert res["ingest_vs_floor"]["x_floor_child"] == 1.0  # the median of 1, 2, 0.75
    goals = {k: g["met"] for k, g in res["goals"].items()}
    assert goals == {"cpu_per_item": True, "wall_1m": True, "peak_1m": False, "ingest_floor": True}


def test_goals_for_1m_not_judged_at_other_sizes():
    res = bench.summarise([one(3.0, 1.0, 0.1, 0.1)], 20_000)
    assert res["goals"]["wall_1m"]["met"] is None and res["goals"]["peak_1m"]["met"] is None
    assert res["goals"]["cpu_per_item"]["met"] is False  # 150 us per item


def test_a_baseline_checkout_is_a_contender_with_its_stages_and_ratio():
    rounds = []
    for cpu, base in ((100.0, 120.0), (110.0, 150.0)):
        r = one(cpu, 80.0, 2.0, 2.0)
        r["baseline"] = {**one(base, 90.0, 3.0, 2.0)["run"]}
        rounds.append(r)
    res = bench.summarise(rounds, 1_000_000)
    assert res["baseline"]["stages"]["ingest"] == 3.0
    assert res["baseline"]["ratio_cpu"] == (100 / 120 + 110 / 150) / 2  # ours / the baseline's
    bench.show(res)  # prints the baseline's row and its column of stages

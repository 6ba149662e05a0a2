"""Does the smoke-train probe find the founding incident's pair, whatever the training order?

The sample corpus (data/runs/sample; built first when absent) holds the two `.pre-commit-config
.yaml` items of the founding incident (` rev: v4.5.0 -> v5.0.0`, ` rev: 6.1.0 -> 7.0.0`). The
TEST-ONLY fault rule makes a micro-batch non-finite when both share it. For each of N
training-order seeds this trains the tiny model on export's train split (micro-batch 1, so
training never meets the fault) and runs the stage's locate step with --probe-batch 8 over
every curated item; "found" means the culprit set is exactly the pair. Beside it, the old
probe by position (consecutive K-blocks of the training order) on the same orders.

    python bench/probe_recall.py --seeds N        (goal: found >= 95%, <= 1 pass per item)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FOUNDING = ((" rev: v4.5.0", " rev: v5.0.0"), (" rev: 6.1.0", " rev: 7.0.0"))


def sample_run() -> Path:
    run = ROOT / "data" / "runs" / "sample"
    if not (run / "export" / "manifest.json").exists():
        cfg = ROOT / "data" / "sample" / "editcurate.toml"
        subprocess.run(
            [sys.executable, "-m", "pipeline.cli", "run", "--config", str(cfg)],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
    return run


def founding_ids(curated: pl.DataFrame) -> list[str]:
    ids = []
    for before, after in FOUNDING:
        hit = curated.filter(
            pl.col("path").str.ends_with(".pre-commit-config.yaml")
            & pl.col("before").str.contains(before, literal=True)
            & pl.col("after").str.contains(after, literal=True)
        )
        if hit.height != 1:
            sys.exit(f"probe_recall: expected one founding item {before!r}, found {hit.height}")
        ids.append(hit["id"][0])
    return sorted(ids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20, help="training-order seeds 0..N-1")
    ap.add_argument("--k", type=int, default=8, help="--probe-batch")
    a = ap.parse_args()

    import torch

    from pipeline.config import SmokeConfig
    from pipeline.train.data import order_items
    from pipeline.train.faults import parse_fault
    from pipeline.train.stage import fit, locate, read_splits

    torch.set_num_threads(1)
    run = sample_run()
    frames = read_splits(run)
    pair = founding_ids(frames["curated"])
    fault = parse_fault("pair:" + ",".join(pair))
    found = by_position = 0
    costs: list[dict] = []
    groupings: dict[str, int] = {}
    t0 = time.time()
    for seed in range(a.seeds):
        sc = SmokeConfig(seed=seed, probe_batch=a.k, eval_items=0)
        res = fit(frames["train"], sc, "cpu", fault)
        located = locate(res, run, frames["curated"], sc, "cpu", fault)
        sets = located["window_culprits"] + located["culprits"]
        hit = [c for c in sets if sorted(c["ids"]) == pair and "table" in c]
        found += bool(hit)
        for c in hit[:1]:
            groupings[c["found_by"]] = groupings.get(c["found_by"], 0) + 1
        costs.append(located["cost"])
        # the old probe: consecutive K-blocks of the curated items in training order
        order = order_items(frames["curated"], seed)["id"].to_list()
        by_position += order.index(pair[0]) // a.k == order.index(pair[1]) // a.k
    n = a.seeds
    curated = frames["curated"].height
    mean = {k: statistics.mean(c[k] for c in costs) for k in ("passes", "screen", "ddmin", "table")}
    print(f"sample: {curated} curated items; founding pair {pair[0]} + {pair[1]}; K = {a.k}")
    print(f"found {found}/{n} ({100 * found / n:.1f}%) by suspicion; found by: {groupings}")
    print(
        f"mean probe cost: {mean['passes']:.1f} forward+backward passes "
        f"({mean['passes'] / curated:.3f} per curated item; screen {mean['screen']:.1f}, "
        f"ddmin {mean['ddmin']:.1f}, table {mean['table']:.1f})"
    )
    print(
        f"by position (the old probe, consecutive blocks of the training order): "
        f"found {by_position}/{n}"
    )
    ok = found >= 0.95 * n and mean["passes"] <= curated
    print(
        f"goal (>= 95% found, <= 1 pass per curated item): {'met' if ok else 'NOT met'}; "
        f"{time.time() - t0:.0f} s"
    )


if __name__ == "__main__":
    main()

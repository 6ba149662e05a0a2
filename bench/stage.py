"""One stage alone, as users rerun it on a finished run folder, against another checkout's:
`editcurate STAGE RUN --force` of this tree and of a baseline tree in alternating rounds,
each a child process of this script.

    python bench/stage.py RUN --stage export --baseline DIR [--executor local|ray] [--rounds R]

DIR is another checkout (`git worktree add DIR COMMIT`), run with its package first on
PYTHONPATH, from its folder. Each child is measured by os.wait4 (bench/run.py's run_child):
wall, CPU (user + sys of the driver process and the children it reaps: on Ray, the local
instance's raylet and GCS, whose CPU varies from run to run; the workers are not among them,
so the stage's manifest CPU, the driver's and the workers', is printed and compared beside
it) and peak RSS (the driver's).
Both write the stage's outputs into RUN in turn, so its later stages go stale: copy a run
folder to bench on. Printed: every round, then the medians and the median of the paired
ratios (ours / baseline). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import ROOT, run_child  # noqa: E402  (bench/run.py, beside this file)


def one(tree: Path, run: Path, stage: str, executor: str, log: Path) -> dict[str, Any]:
    args = [sys.executable, "-m", "pipeline.cli", stage, str(run), "--force"]
    args += ["--set", f"run.executor={executor}"]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    r = run_child(args, log, env, tree)
    m = json.loads((run / stage / "manifest.json").read_text())
    r.pop("stdout")
    return r | {"manifest_cpu_s": m.get("cpu_s"), "workers_cpu_s": m.get("workers_cpu_s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a finished run folder (its stage is rewritten)")
    ap.add_argument("--stage", default="export")
    ap.add_argument("--baseline", type=Path, required=True, help="another checkout")
    ap.add_argument("--executor", default="local", choices=["local", "ray"])
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    trees = {"baseline": a.baseline.resolve(), "ours": ROOT}
    logs = Path(a.run).resolve().parent / "bench-stage-logs"
    logs.mkdir(exist_ok=True)
    rounds: list[dict[str, dict[str, Any]]] = []
    for k in range(a.rounds):
        got = {}
        for name, tree in trees.items():  # the baseline first in each round
            got[name] = one(tree, a.run, a.stage, a.executor, logs / f"{name}-{k}.stderr")
            r = got[name]
            print(
                f"round {k + 1} {name:8s} wall {r['wall_s']:7.2f} s  cpu {r['cpu_s']:7.2f} s  "
                f"peak {r['peak_mib']:7.0f} MiB  manifest cpu {r['manifest_cpu_s']} "
                f"(workers {r['workers_cpu_s']})",
                flush=True,
            )
        rounds.append(got)
    for key in ("wall_s", "cpu_s", "manifest_cpu_s", "peak_mib"):
        if any(r[t][key] is None for r in rounds for t in trees):
            continue
        base = [r["baseline"][key] for r in rounds]
        ours = [r["ours"][key] for r in rounds]
        ratio = statistics.median(o / b for o, b in zip(ours, base, strict=True))
        print(
            f"{a.stage} ({a.executor}) {key}: ours {statistics.median(ours):.2f}, "
            f"baseline {statistics.median(base):.2f}, ours/baseline {ratio:.3f}"
        )


if __name__ == "__main__":
    main()

"""A fresh clone's first run: `editcurate run --config data/sample/editcurate.toml` with an
empty kernel cache (numba compiles dedup's and shapes' kernels), and the same run again with
the cache filled, as child processes in alternating rounds.

    python bench/first_run.py [--rounds R] [--baseline DIR]

--baseline DIR: another checkout of the project (`git worktree add DIR <commit>`), run the
same way in the same rounds (its package first on PYTHONPATH), so the figures of two
versions are taken side by side on the same machine at the same time.

Each child is measured by os.wait4: wall time and CPU (user + sys of the child and every
process it reaped: the compile-ahead processes). Every cold run gets a new, empty
EDITCURATE_CACHE_DIR; the warm run after it uses that cache. Goal (issue 30): the cold run
under 20 s. A bench reports: the goal is printed as met or not, nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL_S = 20.0


def timed(src: Path, cache: Path, log_path: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one sample run of the checkout at `src` (into its data/runs/)."""
    env = {**os.environ, "EDITCURATE_CACHE_DIR": str(cache), "PYTHONPATH": str(src)}
    code = "import sys; from pipeline.cli import app; sys.argv[0] = 'editcurate'; app()"
    cfg = src / "data" / "sample" / "editcurate.toml"
    cmd = [sys.executable, "-c", code, "run", "--config", str(cfg), "--force"]
    t = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, cwd=src, env=env, stdout=log, stderr=log)
        _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        sys.exit(f"{src}: the sample run failed (exit {status >> 8}):\n{log_path.read_text()}")
    return wall, ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline", type=Path, help="another checkout, timed alternately")
    a = ap.parse_args()
    versions = {"this": ROOT}
    if a.baseline:
        versions["baseline"] = a.baseline.resolve()
    work = Path(tempfile.mkdtemp(prefix="editcurate-first-run-"))
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for r in range(a.rounds):
            names = list(versions) if r % 2 == 0 else list(reversed(versions))
            for name in names:
                cache = work / f"cache-{name}-{r}"
                for kind in ("cold", "cached"):
                    wall, cpu = timed(versions[name], cache, work / f"{name}-{kind}.log")
                    got.setdefault((name, kind), []).append((wall, cpu))
                    print(f"round {r + 1}: {name} {kind} {wall:.1f}s wall {cpu:.1f}s CPU")
                shutil.rmtree(cache, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nmedians over {a.rounds} rounds, {os.cpu_count()} cpus")
    for (name, kind), runs in got.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"  {name:>8} {kind:>6}  {wall:6.1f}s wall  {cpu:6.1f}s CPU")
    cold = statistics.median(w for w, _ in got[("this", "cold")])
    print(f"\ngoal (issue 30): the first run under {GOAL_S:.0f} s: {cold:.1f} s", end=" ")
    print("met" if cold < GOAL_S else "NOT MET")


if __name__ == "__main__":
    main()

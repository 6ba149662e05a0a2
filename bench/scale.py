"""The whole pipeline at scale: N generated items (1M by default, --items 10000000 for 10M)
through every stage, each stage a child process, with its wall time, CPU time (user+sys of that
child, from wait4) and peak RSS; then the totals.

    python bench/scale.py [--items N] [--keep DIR]

Goals on a 2-core, 24 GiB machine (issue 15): 1M items < 3 min and < 2 GiB peak; 10M items
complete with < 8 GiB peak. The figures are printed whether or not they meet them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dedup_speed import generate  # noqa: E402

from pipeline.stage import NAMES  # noqa: E402

FIELDS = ("repo", "change", "path", "before", "after", "comment", "author")


def write_items(path: Path, n: int, chunk: int = 200_000) -> None:
    """n generated items as JSON lines in the item's own field names (a zero-config input)."""
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, n, chunk):
            t = generate(min(chunk, n - start), seed=start + 1)
            cols = {c: t[c].to_pylist() for c in FIELDS}
            for k in range(t.num_rows):
                row = {c: cols[c][k] for c in FIELDS}
                row["change"] = f"{start}-{row['change']}"  # unique across chunks
                f.write(json.dumps(row) + "\n")


def run_child(args: list[str]) -> dict[str, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{err[-2000:]}")
    return {
        "wall_s": time.perf_counter() - t0,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_mib": ru.ru_maxrss / 1024,  # KiB on Linux
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    ap.add_argument("--generate-to", type=Path, help=argparse.SUPPRESS)  # the child's job
    a = ap.parse_args()
    if a.generate_to:
        write_items(a.generate_to, a.items)
        return
    work = a.keep or Path(tempfile.mkdtemp(prefix="editcurate-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / "items.jsonl"
    t = time.perf_counter()
    if not data.exists():
        # in a child: a stage child's peak RSS starts at its parent's RSS when it is spawned
        # (Linux carries the high-water mark across fork + exec), so the parent stays small
        gen = [sys.executable, __file__, "--items", str(a.items), "--generate-to", str(data)]
        subprocess.run(gen, check=True)
    print(
        f"{a.items:,} items generated in {time.perf_counter() - t:.0f}s "
        f"({data.stat().st_size / 2**20:,.0f} MiB JSONL); {os.cpu_count()} cpus"
    )
    exe = [sys.executable, "-m", "pipeline.cli"]
    cfg = work / "editcurate.toml"
    out = subprocess.run(
        [*exe, "run", str(data), "--out", str(work / "run"), "--print-config"],
        capture_output=True,
        text=True,
        check=True,
    )
    cfg.write_text(out.stdout)
    rows = {}
    for stage in NAMES:
        rows[stage] = run_child([*exe, stage, "--config", str(cfg), "--force"])
        r = rows[stage]
        print(
            f"{stage:>8}: {r['wall_s']:7.1f}s wall {r['cpu_s']:7.1f}s CPU "
            f"{r['peak_mib']:8,.0f} MiB peak",
            flush=True,
        )
    wall = sum(r["wall_s"] for r in rows.values())
    cpu = sum(r["cpu_s"] for r in rows.values())
    peak = max(r["peak_mib"] for r in rows.values())
    print(f"{'total':>8}: {wall:7.1f}s wall {cpu:7.1f}s CPU {peak:8,.0f} MiB peak (max stage)")
    goal_s, goal_mib = (180, 2048) if a.items <= 1_000_000 else (float("inf"), 8192)
    ok = wall < goal_s and peak < goal_mib
    print(
        f"goal for {a.items:,}: < {goal_s}s and < {goal_mib} MiB peak -> "
        + ("OK" if ok else "NOT MET")
    )
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

"""The whole pipeline at scale: N generated items (1M by default, --items 10000000 for 10M)
through every stage, each stage a child process, with its wall time, CPU time (user+sys of that
child, from wait4) and peak RSS; then the totals.

    python bench/scale.py [--items N] [--keep DIR]
    python bench/scale.py --executor ray [--items N] [--rounds R] [--keep DIR]

Goals on a 2-core, 24 GiB machine (issue 15): 1M items < 3 min and < 2 GiB peak; 10M items
complete with < 8 GiB peak. The figures are printed whether or not they meet them.

--executor ray (issue 29): `editcurate run ITEMS --executor ray` as one process on a local
Ray instance of the machine's CPUs, against the same command with the local executor, in
alternating rounds. Each: wall; CPU of the whole process tree (the driver by wait4, its
own children included, which it reaps: Ray's raylet and GCS; plus every process further
down, Ray's workers, sampled every 0.2 s with psutil, since no one reaps them into a
rusage the driver sees); the driver's peak RSS
(wait4) and the largest peak RSS of any other process (a worker); and the CPU the run's
own `--json` counted (`cpu_s.total`: the driver's and the workers'). Goals: the Ray run's
CPU at most 1.2x the local run's; the driver's peak RSS under 1 GiB at 10M items.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

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


def run_tree(args: list[str]) -> dict[str, Any]:
    """One `editcurate run` child and everything under it: wall, the driver's CPU and peak
    RSS (wait4), the other processes' CPU and largest peak RSS (sampled), its --json."""
    import psutil

    # (pid, start time) -> (CPU, peak RSS), of the processes under the child that it does
    # not reap itself: its own children's CPU is in its wait4 rusage already (Ray's raylet
    # and GCS, waited for at shutdown), their children's (Ray's workers) is not
    seen: dict[tuple[int, float], tuple[float, int]] = {}
    # the driver's peak private memory and peak of Ray's object store mapped into it (shared
    # pages of objects it read, counted in its RSS though no process owns them alone)
    driver_mem = {"RssAnon": 0, "RssShmem": 0}
    stop = threading.Event()

    def sample(pid: int) -> None:
        while True:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        k, _, v = line.partition(":")
                        if k in driver_mem:
                            driver_mem[k] = max(driver_mem[k], int(v.split()[0]) * 1024)
            except (OSError, ValueError):
                pass
            try:
                procs = psutil.Process(pid).children(recursive=True)
            except psutil.Error:
                procs = []
            for q in procs:
                try:
                    with q.oneshot():
                        t, rss = q.cpu_times(), q.memory_info().rss
                        k = (q.pid, q.create_time())
                        cpu = 0.0 if q.ppid() == pid else t.user + t.system
                        seen[k] = (cpu, max(rss, seen.get(k, (0, 0))[1]))
                except psutil.Error:
                    pass
            if stop.wait(0.2):
                return

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, text=True)
        th = threading.Thread(target=sample, args=(proc.pid,))
        th.start()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        stop.set()
        th.join()
        out.seek(0)
        err.seek(0)
        text, log = out.read(), err.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{log[-2000:]}")
    summary = json.loads(text[text.index("{") :])
    driver = ru.ru_utime + ru.ru_stime
    others = sum(c for c, _ in seen.values())
    return {
        "wall_s": wall,
        "cpu_s": driver + others,
        "driver_cpu_s": driver,
        "driver_peak_mib": ru.ru_maxrss / 1024,
        "driver_private_mib": driver_mem["RssAnon"] / 2**20,
        "driver_shmem_mib": driver_mem["RssShmem"] / 2**20,
        "worker_peak_mib": max((r for _, r in seen.values()), default=0) / 2**20,
        "counted_cpu_s": summary["cpu_s"]["total"],
        # the driver's peak within each stage (its manifest's peak_rss_mib): where it holds most
        "stage_peaks": {k: v.get("peak_rss_mib") for k, v in summary["stages"].items()},
    }


def ray_rounds(exe: list[str], data: Path, work: Path, items: int, rounds: int) -> None:
    """The Ray run against the local one, alternating rounds (the first untimed: numba's
    cache and the page cache warm up)."""
    got: dict[str, list[dict[str, Any]]] = {"local": [], "ray": []}
    for r in range(rounds + 1):
        order = ("local", "ray") if r % 2 else ("ray", "local")
        for ex in order:
            args = [*exe, "run", str(data), "--out", str(work / f"run-{ex}"), "--force"]
            res = run_tree([*args, "--json", "--executor", ex])
            if r:
                got[ex].append(res)
            print(
                f"{'warm-up' if not r else f'round {r}'} {ex:>5}: {res['wall_s']:7.1f}s wall "
                f"{res['cpu_s']:7.1f}s CPU (driver {res['driver_cpu_s']:.1f}s, counted "
                f"{res['counted_cpu_s']:.1f}s) driver peak {res['driver_peak_mib']:,.0f} MiB, "
                f"worker peak {res['worker_peak_mib']:,.0f} MiB",
                flush=True,
            )

    def med(ex: str, k: str) -> float:
        return statistics.median(x[k] for x in got[ex])

    ratio = {
        k: statistics.median(r[k] / lo[k] for r, lo in zip(got["ray"], got["local"], strict=True))
        for k in ("cpu_s", "wall_s")
    }
    print(f"\n{items:,} items, {os.cpu_count()} cpus, medians of {rounds} rounds:")
    for ex in ("local", "ray"):
        print(
            f"{ex:>6}: {med(ex, 'wall_s'):7.1f}s wall {med(ex, 'cpu_s'):7.1f}s CPU "
            f"({1e6 * med(ex, 'cpu_s') / items:.0f} us/item; "
            f"counted {med(ex, 'counted_cpu_s'):.1f}s) "
            f"driver peak {med(ex, 'driver_peak_mib'):,.0f} MiB, worker peak "
            f"{med(ex, 'worker_peak_mib'):,.0f} MiB"
        )
        peaks = got[ex][-1]["stage_peaks"]
        print(
            "        driver peak RSS per stage (MiB, last round): "
            + ", ".join(f"{k} {v:,.0f}" for k, v in peaks.items() if v is not None)
        )
        print(
            f"        of the driver: peak private (RssAnon) {med(ex, 'driver_private_mib'):,.0f} "
            f"MiB, peak of Ray's object store mapped in (RssShmem) "
            f"{med(ex, 'driver_shmem_mib'):,.0f} MiB"
        )
    cpu_ok = ratio["cpu_s"] <= 1.2
    print(
        f"ray / local: CPU {ratio['cpu_s']:.2f}x (goal <= 1.2x: {'met' if cpu_ok else 'NOT MET'}), "
        f"wall {ratio['wall_s']:.2f}x"
    )
    if items >= 10_000_000:
        ok = med("ray", "driver_peak_mib") < 1024
        print(f"driver peak RSS at {items:,}: goal < 1 GiB: {'met' if ok else 'NOT MET'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    ap.add_argument("--executor", choices=("local", "ray"), default="local")
    ap.add_argument("--rounds", type=int, default=1, help="--executor ray: timed rounds")
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
    if a.executor == "ray":
        ray_rounds(exe, data, work, a.items, a.rounds)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        return
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

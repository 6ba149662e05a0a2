"""The whole pipeline as users run it: `editcurate run` as ONE child process on N generated
items (1M by default), against baselines run in the same process tree, in alternating rounds.

    python bench/run.py [--items N | --input FILE] [--rounds R] [--keep DIR] [--no-until-ingest]
                        [--json] [--baseline DIR]

Contenders, each a child process of this script, the order rotating per round:
  run     `editcurate run ITEMS --out DIR --force --json` (`python -m pipeline.cli`): ingest,
          filter, dedup, decontaminate, shapes, export, verify and the report, in one process.
  floor   the I/O floor of ingest: `polars.read_ndjson(ITEMS).write_parquet(...)` of the same
          JSON lines, nothing else (the least any ingest of them could cost).
  ingest  `editcurate run ITEMS --until ingest --force --json` alone (--no-until-ingest: not run).
  baseline  with --baseline DIR: `editcurate run` of another checkout (`git worktree add DIR
          COMMIT`), its package first on PYTHONPATH: the before of a change, side by side.

Each child is measured by os.wait4: wall time, CPU time (user + sys of the child, threads and
the children it reaped included) and peak RSS (ru_maxrss). From `run --json` also each stage's
cpu_s (that stage's process CPU) and the `cpu_s` parts of the command (process, startup,
stages, between_stages, verify, report). Printed: medians over the rounds, and per baseline the
median of the per-round paired ratios (ours / baseline). Before the timed rounds one untimed
warm-up round runs every contender: numba compiles the project's kernels on the first run of
this code (into the kernel cache, pipeline/jit.py), and the page cache takes the JSON lines.

The items are generated once, in a child (bench/scale.py's write_items), as
DIR/items-N.jsonl, and reused from there with --keep DIR; or --input FILE names a JSON-lines
file of review items (a real or held-out corpus: the same measures on other data). This
process imports no polars or numpy, so it stays small: a child's peak RSS starts at its
parent's (Linux carries the high-water mark across fork + exec). `run` has no --quiet; each
child's stderr (progress) goes to a file in the work folder, shown when the child fails.

Goals (issue 30): the full run <= 110 us of CPU per item; at 1M items, one process, wall < 90 s
and peak RSS < 1.5 GiB; the ingest stage's CPU <= 3x the floor's. A bench reports: each goal
is printed as met or not, nothing is asserted.
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
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))

from pipeline.jit import cache_root  # noqa: E402  (stdlib only: the parent stays small)

STAGES = ("ingest", "filter", "dedup", "decontaminate", "shapes", "export")
PARTS = ("process", "startup", "stages", "between_stages", "verify", "report")
GOAL_US_PER_ITEM = 110.0
GOAL_WALL_S = 90.0
GOAL_PEAK_MIB = 1.5 * 1024
GOAL_INGEST_X = 3.0
GOAL_ITEMS = 1_000_000


def floor_child(src: Path, dst: Path) -> None:
    """The floor: read the JSON lines with polars, write them as Parquet; prints the CPU of
    that work alone (process CPU, polars' threads included), without start-up and import."""
    import polars as pl

    t = os.times()
    try:
        frame = pl.read_ndjson(src)
    except pl.exceptions.PolarsError:  # a field whose type changes after the first rows
        frame = pl.read_ndjson(src, infer_schema_length=None)
    frame.write_parquet(dst)
    e = os.times()
    print(json.dumps({"work_cpu_s": e.user + e.system - t.user - t.system}))


def run_child(args: list[str], log: Path, env: dict[str, str], cwd: Path = ROOT) -> dict[str, Any]:
    """One child: its wall, CPU (user + sys, wait4) and peak RSS, and its stdout."""
    with open(log, "w") as err, tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, env=env, cwd=cwd)
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        stdout = out.read()
    if proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(args)} failed ({proc.returncode}); stderr ({log}):\n"
            + log.read_text()[-3000:]
        )
    return {
        "wall_s": wall,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "peak_mib": ru.ru_maxrss / 1024,  # KiB on Linux
        "stdout": stdout,
    }


def measure(
    name: str, data: Path, work: Path, tag: str, env: dict[str, str], baseline: Path | None = None
) -> dict[str, Any]:
    exe = [sys.executable, "-m", "pipeline.cli", "run", str(data), "--force", "--json"]
    out = work / f"out-{name}"
    remove(out)  # a fresh --out per round
    cwd = ROOT
    if name == "baseline":  # the other checkout's package first, run from its folder
        assert baseline is not None
        env = {**env, "PYTHONPATH": os.pathsep.join([str(baseline), env["PYTHONPATH"]])}
        args, cwd = [*exe, "--out", str(out)], baseline
    elif name == "run":
        args = [*exe, "--out", str(out)]
    elif name == "ingest":
        args = [*exe, "--out", str(out), "--until", "ingest"]
    else:
        args = [sys.executable, __file__, "--floor", str(data), str(out)]
    r = run_child(args, work / "logs" / f"{name}-{tag}.stderr", env, cwd)
    res = json.loads(r.pop("stdout"))
    if name == "floor":
        r["work_cpu_s"] = res["work_cpu_s"]
    else:
        r["stages"] = {k: v["cpu_s"] for k, v in res["stages"].items()}
        r["stage_wall"] = {k: v["wall_s"] for k, v in res["stages"].items()}
        r["parts"] = res["cpu_s"]
    remove(out)
    return r


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def summarise(rounds: list[dict[str, dict[str, Any]]], n: int) -> dict[str, Any]:
    """Medians per contender, paired ratios per baseline, the goals."""
    names = list(rounds[0])
    res: dict[str, Any] = {"items": n, "rounds": len(rounds), "cpus": os.cpu_count()}
    for name in names:
        rs = [r[name] for r in rounds]
        m: dict[str, Any] = {k: med([r[k] for r in rs]) for k in ("wall_s", "cpu_s", "peak_mib")}
        m["max_peak_mib"] = max(r["peak_mib"] for r in rs)
        m["us_per_item"] = m["cpu_s"] / n * 1e6
        if name == "floor":
            m["work_cpu_s"] = med([r["work_cpu_s"] for r in rs])
        else:
            m["stages"] = {s: med([r["stages"][s] or 0.0 for r in rs]) for s in rs[0]["stages"]}
            m["stage_wall"] = {
                s: med([r["stage_wall"][s] or 0.0 for r in rs]) for s in rs[0]["stage_wall"]
            }
            m["parts"] = {p: med([r["parts"][p] for r in rs]) for p in rs[0]["parts"]}
            # after the command: the child's CPU (wait4) less the process's own at the end of
            # the command (the interpreter's exit: atexit, module teardown, freeing)
            m["parts"]["exit"] = med([r["cpu_s"] - r["parts"]["process"] for r in rs])
        if name != "run":
            m["ratio_cpu"] = med([r["run"]["cpu_s"] / r[name]["cpu_s"] for r in rounds])
            m["ratio_wall"] = med([r["run"]["wall_s"] / r[name]["wall_s"] for r in rounds])
        res[name] = m
    # the ingest stage against the floor, per round: against the floor child's whole CPU
    # (wait4: start-up and polars' import included) and against its read + write alone (like
    # the stage's cpu_s, which holds no start-up); the goal is judged on the second, stricter
    ing = [r["run"]["stages"]["ingest"] for r in rounds]
    res["ingest_vs_floor"] = {
        "stage_cpu_s": med(ing),
        "x_floor_child": med([i / r["floor"]["cpu_s"] for i, r in zip(ing, rounds, strict=True)]),
        "x_floor_work": med(
            [i / r["floor"]["work_cpu_s"] for i, r in zip(ing, rounds, strict=True)]
        ),
    }
    if "ingest" in names:
        res["ingest_vs_floor"]["until_ingest_x_floor_child"] = med(
            [r["ingest"]["cpu_s"] / r["floor"]["cpu_s"] for r in rounds]
        )
    run = res["run"]
    at_goal_n = n == GOAL_ITEMS
    res["goals"] = {
        "cpu_per_item": {
            "goal": f"<= {GOAL_US_PER_ITEM:.0f} us CPU per item (full run)",
            "value": f"{run['us_per_item']:.1f} us",
            "met": run["us_per_item"] <= GOAL_US_PER_ITEM,
        },
        "wall_1m": {
            "goal": f"1M items, one process: wall < {GOAL_WALL_S:.0f} s",
            "value": f"{run['wall_s']:.1f} s",
            "met": run["wall_s"] < GOAL_WALL_S if at_goal_n else None,
        },
        "peak_1m": {
            "goal": f"1M items, one process: peak RSS < {GOAL_PEAK_MIB / 1024:.1f} GiB",
            "value": f"{run['max_peak_mib']:,.0f} MiB (max over rounds)",
            "met": run["max_peak_mib"] < GOAL_PEAK_MIB if at_goal_n else None,
        },
        "ingest_floor": {
            "goal": f"ingest stage CPU <= {GOAL_INGEST_X:.0f}x the floor's read + write",
            "value": f"{res['ingest_vs_floor']['x_floor_work']:.2f}x",
            "met": res["ingest_vs_floor"]["x_floor_work"] <= GOAL_INGEST_X,
        },
    }
    return res


def show(res: dict[str, Any]) -> None:
    n = res["items"]
    print(f"\nmedians over {res['rounds']} rounds, {n:,} items, {res['cpus']} cpus")
    print(
        f"{'':>8} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9} {'us/item':>8} "
        f"{'CPU run/x':>11} {'wall run/x':>12}"
    )
    for name in ("run", "baseline", "floor", "ingest"):
        if name not in res:
            continue
        m = res[name]
        ratio = f"{m['ratio_cpu']:10.2f}x {m['ratio_wall']:11.2f}x" if "ratio_cpu" in m else ""
        print(
            f"{name:>8} {m['wall_s']:8.2f} {m['cpu_s']:8.2f} {m['peak_mib']:9,.0f} "
            f"{m['us_per_item']:8.1f} {ratio}"
        )
    run, base = res["run"], res.get("baseline")
    print("\nrun, per stage (the stage's cpu_s and wall_s from `run --json`):")
    print(
        f"{'':>14} {'CPU s':>8} {'wall s':>8} {'us/item':>8} {'of CPU':>7}"
        + (f" {'baseline CPU s':>15}" if base else "")
    )
    for s, c in run["stages"].items():
        print(
            f"{s:>14} {c:8.2f} {run['stage_wall'][s]:8.2f} {c / n * 1e6:8.1f} "
            f"{c / run['cpu_s']:7.0%}" + (f" {base['stages'].get(s, 0.0):15.2f}" if base else "")
        )
    print(
        "run, the command's CPU in parts (`cpu_s` of `run --json`; exit: wait4's CPU less "
        "process, the interpreter's teardown after the command):"
    )
    for p, c in run["parts"].items():
        print(
            f"{p:>14} {c:8.2f} {'':>8} {c / n * 1e6:8.1f} {c / run['cpu_s']:7.0%}"
            + (f" {base['parts'].get(p, 0.0):15.2f}" if base else "")
        )
    f = res["floor"]
    iv = res["ingest_vs_floor"]
    print(
        f"\ningest stage {iv['stage_cpu_s']:.2f}s CPU; floor child {f['cpu_s']:.2f}s "
        f"(read + write alone {f['work_cpu_s']:.2f}s): {iv['x_floor_child']:.2f}x the child, "
        f"{iv['x_floor_work']:.2f}x the read + write"
    )
    if "until_ingest_x_floor_child" in iv:
        print(
            f"`run --until ingest` (whole command) {res['ingest']['cpu_s']:.2f}s CPU: "
            f"{iv['until_ingest_x_floor_child']:.2f}x the floor child"
        )
    print("\ngoals (issue 30):")
    if n < GOAL_ITEMS:
        print(
            f"  (at {n:,} items the fixed costs, start-up, report, exit, weigh more per item "
            f"than at {GOAL_ITEMS:,})"
        )
    for g in res["goals"].values():
        met = g["met"]
        word = "met" if met else "NOT MET" if met is False else f"not judged at {n:,} items"
        print(f"  {g['goal']:<52} {g['value']:>26}  {word}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=GOAL_ITEMS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it (items cached)")
    ap.add_argument(
        "--input",
        type=Path,
        help="a JSON-lines file of review items to run on instead of generated ones (a real "
        "or held-out corpus; its non-blank lines are the items)",
    )
    ap.add_argument(
        "--no-until-ingest", action="store_true", help="skip the `run --until ingest` baseline"
    )
    ap.add_argument("--json", action="store_true", help="also print the results as JSON")
    ap.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (git worktree add DIR COMMIT): its `editcurate run` alternates too",
    )
    ap.add_argument("--generate-to", type=Path, help=argparse.SUPPRESS)  # the child's job
    ap.add_argument("--floor", nargs=2, type=Path, help=argparse.SUPPRESS)  # the child's job
    a = ap.parse_args()
    if a.generate_to:
        from scale import write_items  # numpy, pyarrow: in the child only

        write_items(a.generate_to, a.items)
        return
    if a.floor:
        floor_child(*a.floor)
        return
    work = a.keep or Path(tempfile.mkdtemp(prefix="editcurate-run-bench-"))
    (work / "logs").mkdir(parents=True, exist_ok=True)
    data = a.input.resolve() if a.input else work / f"items-{a.items}.jsonl"
    t = time.perf_counter()
    if a.input:
        with open(data, "rb") as f:
            a.items = sum(1 for line in f if line.strip())
        how = "given"
    elif not data.exists():
        part = data.with_suffix(".part")
        gen = [sys.executable, __file__, "--items", str(a.items), "--generate-to", str(part)]
        subprocess.run(gen, check=True)
        part.rename(data)
        how = f"generated in {time.perf_counter() - t:.0f}s"
    else:
        how = "cached"
    print(
        f"{a.items:,} items {how} ({data}, {data.stat().st_size / 2**20:,.0f} MiB JSONL); "
        f"{os.cpu_count()} cpus; child stderr in {work / 'logs'}"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
    )
    names = ["run", *(["baseline"] if a.baseline else []), "floor"]
    names += [] if a.no_until_ingest else ["ingest"]
    t = time.perf_counter()
    for name in names:
        measure(name, data, work, "warmup", env, a.baseline)
    print(
        f"warm-up round (untimed) {time.perf_counter() - t:.0f}s: numba compiles the kernels "
        f"on the first run of this code (cache: {cache_root()}), the page cache takes the items"
    )
    rounds: list[dict[str, dict[str, Any]]] = []
    for i in range(a.rounds):
        order = names[i % len(names) :] + names[: i % len(names)]
        r = {name: measure(name, data, work, f"r{i + 1}", env, a.baseline) for name in order}
        rounds.append({name: r[name] for name in names})
        print(
            f"round {i + 1}: "
            + ", ".join(
                f"{name} {r[name]['wall_s']:.1f}s wall {r[name]['cpu_s']:.1f}s CPU "
                f"{r[name]['peak_mib']:,.0f} MiB"
                for name in order
            ),
            flush=True,
        )
    res = summarise(rounds, a.items)
    res["per_round"] = rounds
    show(res)
    if a.json:
        print(json.dumps(res, indent=2))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

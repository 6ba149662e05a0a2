"""Ingest throughput and peak memory on N generated JSON-lines items (default 1M).

Prints items/s and peak RSS of `editcurate ingest` (run as a child process, so its peak is its
own), against two baselines measured in the same run on the same file: a bare `json.loads`
loop (the floor for per-line parsing in Python) and `polars.read_ndjson` (fast, but holds the
whole file in memory). Goal: peak RSS under 1 GiB at 1M items.

    python bench/ingest.py [--items 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LANGS = [
    ("py", "x = compute({n})", "x = compute({n}, cache=True)"),
    ("js", "const x = load({n});", "const x = await load({n});"),
    ("go", "if err != nil {{ return {n} }}", 'if err != nil {{ return fmt.Errorf("{n}") }}'),
    ("yaml", "    rev: v{n}.0.0", "    rev: v{m}.0.0"),
]


def generate(path: Path, n: int) -> None:
    rnd = random.Random(1)
    with open(path, "w") as f:
        for i in range(n):
            ext, b, a = LANGS[i % len(LANGS)]
            k = rnd.randrange(1000)
            ctx = "\n".join(f"line {j} of context {k}" for j in range(3))
            rec = {
                "repo": f"org{k % 50}/proj{k % 7}",
                "commit": f"{rnd.getrandbits(160):040x}",
                "path": f"src/mod{k}/file{i % 97}.{ext}",
                "before": b.format(n=k, m=k + 1),
                "after": a.format(n=k, m=k + 1),
                "context": ctx,
                "comment": f"please handle case {k} here",
                "author": f"dev{k % 300}",
                "timestamp": 1_700_000_000 + i,
                "lines_removed": 1,
                "lines_added": 1,
            }
            f.write(json.dumps(rec) + "\n")


def child_peak_mb(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of a child process run alone."""
    code = (
        "import resource, subprocess, sys, time; t = time.time(); "
        "r = subprocess.run(sys.argv[1:]); "
        "print(time.time() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024); "
        "sys.exit(r.returncode)"
    )
    out = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr[-2000:]}")
    wall, peak = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(peak)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, default=None, help="work folder to keep")
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / "items.jsonl"
    t = time.time()
    generate(data, args.items)
    size_mb = data.stat().st_size / 2**20
    print(f"generated {args.items:,} items ({size_mb:.0f} MiB) in {time.time() - t:.1f}s")
    cfg = work / "bench.toml"
    cfg.write_text(
        '[run]\nname = "bench"\nroot = "runs"\n\n'
        '[[ingest.sources]]\nkind = "table"\npath = "items.jsonl"\n'
        '[ingest.sources.fields]\nchange = "commit"\ncreated_at = "timestamp"\n'
    )
    ours_s, ours_mb = child_peak_mb(
        [sys.executable, "-m", "pipeline.cli", "ingest", "--config", str(cfg), "--force"]
    )
    loads_s, loads_mb = child_peak_mb(
        [
            sys.executable,
            "-c",
            f"import json\nfor line in open({str(data)!r}, 'rb'): json.loads(line)",
        ]
    )
    polars_s, polars_mb = child_peak_mb(
        [sys.executable, "-c", f"import polars as pl; pl.read_ndjson({str(data)!r})"]
    )
    n = args.items
    print(f"{'':28}{'items/s':>12}{'wall s':>9}{'peak RSS MiB':>15}")
    print(f"{'editcurate ingest':28}{n / ours_s:>12,.0f}{ours_s:>9.1f}{ours_mb:>15.0f}")
    print(f"{'baseline json.loads loop':28}{n / loads_s:>12,.0f}{loads_s:>9.1f}{loads_mb:>15.0f}")
    print(
        f"{'baseline polars.read_ndjson':28}{n / polars_s:>12,.0f}{polars_s:>9.1f}"
        f"{polars_mb:>15.0f}"
    )
    print(
        f"speed ratio vs json.loads loop: {loads_s / ours_s:.2f}x "
        f"(ingest also maps, hashes ids and writes Parquet)"
    )
    print(f"peak RSS ratio vs polars.read_ndjson: {ours_mb / polars_mb:.2f}x")
    verdict = "OK" if ours_mb < 1024 else "OVER"
    print(f"peak RSS goal < 1024 MiB: {ours_mb:.0f} MiB {verdict}")


if __name__ == "__main__":
    main()

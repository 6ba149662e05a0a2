"""Dedup speed: this stage's signatures + candidates against datasketch, and 1M items end to end.

Part 1 (default 100k items, same run, same corpus): datasketch (one MinHash per item, then
MinHashLSH query + insert, 32 bands x 8 rows over 256 permutations) against our vectorised
shingles + signatures + band keys + candidate pairs. Two datasketch baselines:
  strict   -- identical signatures: the same seeded permutations fed our 32-bit shingle hashes
              (precomputed by our kernel and NOT counted in datasketch's time; hashfunc=int),
              so datasketch only does MinHash + LSH. Signatures are checked equal.
  typical  -- the usual datasketch pipeline: Python `re` shingling, sha1_hash32 per shingle.
Part 2 (--stage-items, default 1M): `editcurate dedup` on a generated filter/kept.parquet, run
as a child process with NUMBA_NUM_THREADS=2; prints wall time and peak RSS.
Goals: >= 20x datasketch (strict); 1M items < 180 s and < 4 GiB peak RSS on 2 cores.

    python bench/dedup_speed.py [--items 100000] [--ds-items N] [--stage-items 1000000]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.schema import ITEM_SCHEMA, item_id  # noqa: E402

FIELDS = ["path", "before", "after", "comment"]
WORDS = [
    f"{a}{b}"
    for a in (
        "get",
        "set",
        "load",
        "save",
        "user",
        "item",
        "conf",
        "data",
        "node",
        "path",
        "size",
        "name",
        "value",
        "cache",
        "query",
    )
    for b in ("", "_id", "s", "_list", "_map", "Count", "Name", "2", "_cfg", "Info")
]
FUNCS = ["len", "print", "open", "json.load", "os.path.join", "self.run", "fetch", "parse"]


def _line(rnd: random.Random) -> str:
    w = rnd.choice
    forms = (
        lambda: f"    {w(WORDS)} = {w(FUNCS)}({w(WORDS)}, {w(WORDS)})",
        lambda: f"    if {w(WORDS)} is None:",
        lambda: f"        return {w(WORDS)}[{rnd.randrange(10)}]",
        lambda: f"    for {w(WORDS)} in {w(WORDS)}.items():",
        lambda: f"    {w(WORDS)}.{w(WORDS)} += {rnd.randrange(100)}",
        lambda: f"def {w(WORDS)}({w(WORDS)}, {w(WORDS)}={rnd.randrange(9)}):",
    )
    return rnd.choice(forms)()


def _mutate(text: str, rnd: random.Random, k: int) -> str:
    """Change k words (or append a line) so a copy is near but not equal."""
    lines = text.split("\n")
    for _ in range(k):
        i = rnd.randrange(len(lines))
        toks = lines[i].split(" ")
        j = rnd.randrange(len(toks))
        toks[j] = rnd.choice(WORDS) if toks[j].strip() else toks[j]
        lines[i] = " ".join(toks)
    if rnd.random() < 0.3:
        lines.append(_line(rnd))
    return "\n".join(lines)


def generate(n: int, seed: int = 1) -> pa.Table:
    """Code-review-like items: 12% near copies (1-4 words changed), 4% exact copies in other
    PRs, 3% templated version bumps; the rest distinct."""
    rnd = random.Random(seed)
    cols: dict[str, list] = {f.name: [] for f in ITEM_SCHEMA}
    for k in range(n):
        r = rnd.random()
        if k > 10 and r < 0.12:
            src = rnd.randrange(k)
            before = _mutate(cols["before"][src], rnd, rnd.randint(0, 2))
            after = _mutate(cols["after"][src], rnd, rnd.randint(1, 3))
            path, comment = cols["path"][src], cols["comment"][src]
        elif k > 10 and r < 0.16:
            src = rnd.randrange(k)
            path, before, after, comment = (cols[f][src] for f in FIELDS)
        elif r < 0.19:
            a, b = rnd.randrange(1, 30), rnd.randrange(20)
            path = ".pre-commit-config.yaml"
            before, after = f"    rev: v{a}.{b}.0", f"    rev: v{a}.{b + 1}.0"
            comment = f"Bump {rnd.choice(WORDS)} from {a}.{b}.0 to {a}.{b + 1}.0"
        else:
            body = [_line(rnd) for _ in range(rnd.randint(3, 8))]
            before = "\n".join(body)
            after = _mutate(before, rnd, rnd.randint(1, 3))
            path = f"src/{rnd.choice(WORDS)}/{rnd.choice(WORDS)}.py"
            comment = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 12)))
        repo, change = f"org/repo{k % 97}", str(k)
        row = {
            "id": item_id(repo, change, path, before, after, comment),
            "source": "bench",
            "source_ref": f"row {k}",
            "repo": repo,
            "change": change,
            "path": path,
            "language": "python",
            "before": before,
            "after": after,
            "context": "",
            "comment": comment,
            "author": f"dev{k % 300}",
            "author_is_bot": False,
            "lines_removed": before.count("\n") + 1,
            "lines_added": after.count("\n") + 1,
            "created_at": None,
        }
        for f, v in row.items():
            cols[f].append(v)
    return pa.table(cols, schema=ITEM_SCHEMA)


def ours(table: pa.Table, bands: int = 32, rows: int = 8, cap: int = 64):
    """Signatures + candidates, as the stage does them (the exact-duplicate pass excluded)."""
    from pipeline.dedup.lsh import candidates
    from pipeline.dedup.minhash import permutations, signatures
    from pipeline.dedup.shingles import shingle_sets

    t = time.perf_counter()
    offs, vals = shingle_sets([table[f] for f in FIELDS], FIELDS, 5)
    t_sh = time.perf_counter()
    sig = signatures(offs, vals, *permutations(256, 1))
    t_sig = time.perf_counter()
    nonempty = np.flatnonzero(np.diff(offs) > 0)
    cand = candidates(sig, nonempty, bands, rows, cap)
    t_end = time.perf_counter()
    times = {"shingles": t_sh - t, "signatures": t_sig - t_sh, "candidates": t_end - t_sig}
    return offs, vals, sig, cand, times


def datasketch_strict(offs, vals, n: int):
    import datasketch

    perms = np.array(datasketch.MinHash(num_perm=256, seed=1).permutations)
    lsh = datasketch.MinHashLSH(num_perm=256, params=(32, 8))
    sigs = np.empty((n, 256), dtype=np.uint32)
    t = time.perf_counter()
    for i in range(n):
        m = datasketch.MinHash(num_perm=256, permutations=perms, scheme="affine32", hashfunc=int)
        m.update_batch(vals[offs[i] : offs[i + 1]].tolist())
        lsh.query(m)
        lsh.insert(i, m, check_duplication=False)
        sigs[i] = m.hashvalues
    return time.perf_counter() - t, sigs


def datasketch_typical(table: pa.Table, n: int) -> float:
    import datasketch

    from pipeline.dedup.shingles import item_shingles

    items = table.slice(0, n).select(FIELDS).to_pylist()
    lsh = datasketch.MinHashLSH(num_perm=256, params=(32, 8))
    t = time.perf_counter()
    for i, it in enumerate(items):
        m = datasketch.MinHash(num_perm=256, seed=1)
        m.update_batch([repr(s).encode() for s in item_shingles(it, FIELDS, 5)])
        lsh.query(m)
        lsh.insert(i, m, check_duplication=False)
    return time.perf_counter() - t


def child_peak(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of a child process run alone."""
    code = (
        "import resource, subprocess, sys, time; t = time.time(); "
        "r = subprocess.run(sys.argv[1:]); "
        "print(time.time() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024); "
        "sys.exit(r.returncode)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *cmd], capture_output=True, text=True, env=env, cwd=ROOT
    )
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stderr[-3000:]}")
    wall, peak = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(peak)


def stage_run(n: int, work: Path) -> None:
    from pipeline.runs import StageRun, write_parquet

    t = time.time()
    table = generate(n, seed=2)
    print(f"generated {n:,} items in {time.time() - t:.0f}s")
    flags = pa.array([[]] * n, pa.list_(pa.string()))
    table = table.append_column(pa.field("flags", pa.list_(pa.string())), flags)
    sr = StageRun(work / "runs" / "bench", "filter", "bench", "bench", {})
    sr.begin()
    write_parquet(table, sr.dir / "kept.parquet", sr.meta)
    sr.record_output("kept.parquet", "items")
    sr.finish({})
    del table, flags
    cfg = work / "bench.toml"
    cfg.write_text('[run]\nname = "bench"\nroot = "runs"\n')
    env = {**os.environ, "NUMBA_NUM_THREADS": "2", "POLARS_MAX_THREADS": "2"}
    cmd = [sys.executable, "-m", "pipeline.cli", "dedup", "--config", str(cfg), "--force"]
    wall, peak = child_peak(cmd, env)
    import json

    m = json.loads((sr.run_dir / "dedup" / "manifest.json").read_text())
    c = m["counts"]
    print(
        f"editcurate dedup on {n:,} items (2 threads): {wall:.1f}s wall, peak RSS {peak:.0f} "
        f"MiB; removed {c['removed']:,} ({c['removed_same_id'] + c['removed_same_content']:,} "
        f"exact, {c['removed_near']:,} near), {c['candidate_pairs']:,} candidate pairs, "
        f"{c['oversized_buckets']} oversized buckets"
    )
    ok = wall < 180 and peak < 4096
    print(f"goal 1M items < 180 s and < 4096 MiB: {'OK' if ok else 'NOT MET'}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=100_000, help="0: part 2 only")
    ap.add_argument("--ds-items", type=int, default=0, help="datasketch on the first N (0: all)")
    ap.add_argument("--stage-items", type=int, default=1_000_000, help="0: skip part 2")
    args = ap.parse_args()
    import numba

    if not args.items:
        with tempfile.TemporaryDirectory(prefix="bench-dedup-") as d:
            return stage_run(args.stage_items, Path(d))
    t = time.time()
    table = generate(args.items)
    print(
        f"generated {args.items:,} items in {time.time() - t:.0f}s; "
        f"numba threads {numba.get_num_threads()}, cpus {os.cpu_count()}"
    )
    ours(table.slice(0, 1000))  # compile / load the kernels outside the timing
    runs = [ours(table) for _ in range(3)]
    offs, vals, sig, cand, _ = runs[0]
    first = sum(runs[0][-1].values())
    best = min(runs, key=lambda r: sum(r[-1].values()))[-1]
    total = sum(best.values())
    n_ds = args.ds_items or args.items
    ds_s, ds_sig = datasketch_strict(offs, vals, n_ds)
    same = np.array_equal(ds_sig, sig[:n_ds])
    typ_n = min(n_ds, 20_000)
    typ_s = datasketch_typical(table, typ_n) * n_ds / typ_n
    per = {k: f"{v:.2f}s" for k, v in best.items()}
    print(
        f"ours: {args.items:,} items in {total:.2f}s, best of 3 ({args.items / total:,.0f} "
        f"items/s) {per}; first run {first:.2f}s; {len(cand.a):,} candidate pairs"
    )
    print(
        f"datasketch strict (identical signatures: {same}): {n_ds:,} items in {ds_s:.1f}s "
        f"({n_ds / ds_s:,.0f} items/s)"
    )
    print(
        f"datasketch typical (re + sha1): {typ_s:.1f}s for {n_ds:,} items "
        f"({n_ds / typ_s:,.0f} items/s; timed on {typ_n:,})"
    )
    for name, base in (("strict", ds_s), ("typical", typ_s)):
        ratio, ratio_first = base / n_ds / (total / args.items), base / n_ds / (first / args.items)
        print(f"speed-up vs datasketch {name}: {ratio:.1f}x (first run {ratio_first:.1f}x)")
    print("goal: >= 20x vs datasketch at identical signatures (strict)")
    if args.stage_items:
        with tempfile.TemporaryDirectory(prefix="bench-dedup-") as d:
            stage_run(args.stage_items, Path(d))


if __name__ == "__main__":
    main()

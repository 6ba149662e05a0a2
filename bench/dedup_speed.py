"""Dedup speed: editcurate against datasketch and rensa, alternating in one run, on CPU time.

One generated corpus (default 100k items, `generate` below) is written once; each round runs
every contender in its own child process (`--child NAME`, bench/dedup_contenders.py), the
order rotating per round, and takes the child's wall time and CPU time (user + sys, from
wait4's rusage). Children run single-threaded (NUMBA_NUM_THREADS, POLARS_MAX_THREADS,
RAYON_NUM_THREADS, OMP_NUM_THREADS = 1; --threads to change). Each child writes its verified
pairs; the parent computes each contender's pair recall at exact Jaccard >= threshold against
exact truth (prefix filtering, bench/dedup_truth.py). Printed: per round, then per contender
the medians and the median of the per-round paired ratios (baseline / editcurate).

What a child's CPU time holds, for every contender: Python start and imports, reading the
shingled fields (`before`, `after`) with polars, shingling them with the stage's kernel (the
same sets for all: field-tagged token 5-grams as 32-bit hashes), its own part, and exact-Jaccard
verification of its candidate pairs (the stage's kernel, the same for all). Its own part:
  editcurate  the stage's pair finding: shingle_and_sign (shingles + MinHash, 256 seeded
              permutations), lsh.candidates (32 bands x 8 rows, buckets over bucket_cap
              scanned on signatures). Not the exact-duplicate pass, clusters or outputs.
  datasketch  the shingle hashes as Python ints, MinHash.bulk(num_perm=256, hashfunc=int: the
              same signatures as ours, no sha1), MinHashLSH(num_perm=256, params=(32, 8))
              filled in an insertion_session, then every item queried.
  rensa       the shingle hashes as 4-byte tokens, RMinHash.from_token_sets(num_perm=256),
              RMinHashLSH(num_perm=256, num_bands=32) insert_many + query_all. Skipped, and
              said so, when rensa is not installed (pip install -e '.[dev]').
Goal (issue 15): >= 10x datasketch and >= 2x rensa per CPU second, at recall >= 0.995. The
figures are printed whether or not they meet it. (The dedup stage at 1M items: bench/scale.py.)

    python bench/dedup_speed.py [--items 100000] [--rounds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
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


THREAD_VARS = ("NUMBA_NUM_THREADS", "POLARS_MAX_THREADS", "RAYON_NUM_THREADS", "OMP_NUM_THREADS")


# ------------------------------------------------------------------------------ parent


def run_child(name: str, corpus: Path, out: Path, threshold: float, env: dict) -> dict:
    """Run one child; its wall seconds, CPU seconds (user + sys) and peak RSS (MiB)."""
    cmd = [sys.executable, __file__, "--child", name, "--corpus", str(corpus), "--out", str(out)]
    cmd += ["--threshold", str(threshold)]
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read() if p.stderr else ""
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{name} child failed (exit {p.returncode}):\n{err[-3000:]}")
    stats = json.loads(Path(str(out) + ".json").read_text())
    pairs = np.load(str(out) + ".npz")
    return {
        "wall": wall,
        "cpu": ru.ru_utime + ru.ru_stime,
        "pairs": pairs["a"].astype(np.uint64) << np.uint64(32) | pairs["b"].astype(np.uint64),
        **stats,
    }


def same_signatures(table: pa.Table, k: int = 200) -> bool:
    """Whether datasketch's MinHash.bulk over our shingle hashes gives our signatures."""
    import polars as pl
    from datasketch import MinHash

    from pipeline.config import DedupConfig
    from pipeline.dedup.index import shingle_and_sign

    d = DedupConfig()
    text = pl.from_arrow(table.slice(0, k).select(list(d.fields)))
    offsets, values, sig = shingle_and_sign(text, np.arange(k), d)  # type: ignore[arg-type]
    sets = [values[offsets[i] : offsets[i + 1]].tolist() for i in range(k)]
    ms = MinHash.bulk(sets, num_perm=d.num_perm, seed=d.seed, hashfunc=int)
    return bool(np.array_equal(np.stack([m.hashvalues for m in ms]), sig))


def main() -> None:
    from dedup_contenders import CONTENDERS, child  # bench/ is sys.path[0] when run

    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="threads per child (each library)")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--child", choices=CONTENDERS, help=argparse.SUPPRESS)
    ap.add_argument("--corpus", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.corpus, args.out, args.threshold)

    import polars as pl
    import pyarrow.parquet as pq
    from dedup_truth import codes, truth_pairs

    from pipeline.config import DedupConfig

    names = list(CONTENDERS)
    try:
        import rensa  # noqa: F401
    except ImportError:
        print("rensa is not installed (pip install rensa): skipped")
        names.remove("rensa")
    d = DedupConfig(threshold=args.threshold)
    t = time.time()
    table = generate(args.items)
    print(f"generated {args.items:,} items in {time.time() - t:.0f}s; cpus {os.cpu_count()}")
    env = {**os.environ, **{v: str(args.threads) for v in THREAD_VARS}}
    with tempfile.TemporaryDirectory(prefix="bench-dedup-") as tmp:
        corpus, warm = Path(tmp) / "corpus.parquet", Path(tmp) / "warm.parquet"
        pq.write_table(table.select(list(d.fields)), corpus)
        pq.write_table(table.slice(0, 2000).select(list(d.fields)), warm)
        t = time.time()
        text = pl.read_parquet(corpus)
        from pipeline.dedup.shingles import shingle_sets

        offsets, values = shingle_sets([text[f].to_arrow() for f in d.fields], list(d.fields), 5)
        ta, tb, _ = truth_pairs(offsets, values, args.threshold)
        truth = codes(ta, tb)
        print(
            f"exact truth (prefix filtering): {len(truth):,} pairs at J >= {args.threshold} "
            f"in {time.time() - t:.1f}s; datasketch signatures identical to ours: "
            f"{same_signatures(table)}"
        )
        for name in names:  # untimed: numba's on-disk cache and .pyc files are made here
            run_child(name, warm, Path(tmp) / f"warm-{name}", args.threshold, env)
        print(
            f"children: {', '.join(f'{v}={args.threads}' for v in THREAD_VARS)}; "
            f"{args.rounds} rounds, order rotating"
        )
        rows: dict[str, list[dict]] = {n: [] for n in names}
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                res = run_child(name, corpus, Path(tmp) / f"r{r}-{name}", args.threshold, env)
                found = np.unique(res.pop("pairs"))
                res["recall"] = np.isin(truth, found).mean() if len(truth) else 1.0
                res["false"] = int((~np.isin(found, truth)).sum())
                res["found"] = len(found)
                rows[name].append(res)
                print(
                    f"round {r + 1} {name:<10} wall {res['wall']:6.1f}s  cpu {res['cpu']:6.1f}s  "
                    f"rss {res['rss']:5.0f} MiB  threads {res['threads']}  "
                    f"candidates {res['candidates']:>9,}  pairs {res['found']:>8,}  "
                    f"recall {res['recall']:.4f}  phases {res['phases']}"
                )
    report(rows, names, args.items, len(truth))


def report(rows: dict[str, list[dict]], names: list[str], n: int, ntruth: int) -> None:
    print(f"\nmedians over {len(rows['editcurate'])} rounds ({n:,} items, {ntruth:,} true pairs):")
    for name in names:
        rs = rows[name]
        cpu = statistics.median(r["cpu"] for r in rs)
        recalls = sorted({round(r["recall"], 6) for r in rs})
        print(
            f"  {name:<10} wall {statistics.median(r['wall'] for r in rs):6.1f}s  cpu {cpu:6.1f}s "
            f"({n / cpu:,.0f} items per CPU second)  recall {'/'.join(map(str, recalls))}  "
            f"pairs not in truth {max(r['false'] for r in rs)}"
        )
    ours = rows["editcurate"]
    ratios = {}
    for name in names[1:]:
        cpu = statistics.median(b["cpu"] / o["cpu"] for o, b in zip(ours, rows[name], strict=True))
        wall = statistics.median(
            b["wall"] / o["wall"] for o, b in zip(ours, rows[name], strict=True)
        )
        ratios[name] = cpu
        print(f"  editcurate vs {name:<10} median paired ratio: cpu {cpu:.2f}x, wall {wall:.2f}x")
    recall = min(r["recall"] for r in ours)
    goal = {"datasketch": 10.0, "rensa": 2.0}
    ok = recall >= 0.995 and all(ratios.get(k, 0.0) >= g for k, g in goal.items())
    print(
        "goal: >= 10x datasketch and >= 2x rensa per CPU second at recall >= 0.995: "
        + ", ".join(f"{k} {v:.1f}x" for k, v in ratios.items())
        + f", recall {recall:.4f} -> {'OK' if ok else 'NOT MET'}"
        + ("" if "rensa" in ratios else " (rensa not measured)")
    )


if __name__ == "__main__":
    main()

"""Filter throughput on N generated items (default 1M) with a rule set (default: default).

Prints items/s of
  - the rules applied to in-memory batches (`apply_rules`, the stage's batch size),
  - the whole stage (`editcurate filter`: input hash, Parquet read, rules, masking, writes),
against two baselines measured in the same run on the same items:
  - the same rules one item at a time in Python `re` (`reference_decide`) on a sample,
  - polars reading the input Parquet (the floor for any stage that reads its input).
The generated mix has clean edits plus bot bumps, lock files, no-ops, whitespace-only edits,
blank-line edits, secrets, contentless comments and long lines, so every rule does real work.
The sample's decisions are also checked against the vectorised ones.

    python bench/filter.py [--items 1000000] [--sample 20000] [--rules default]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline import filter as filter_stage  # noqa: E402
from pipeline.config import load_config  # noqa: E402
from pipeline.filter.apply import apply_rules, reference_decide  # noqa: E402
from pipeline.filter.rules import load_rules, rules_path  # noqa: E402
from pipeline.runs import StageRun, write_parquet  # noqa: E402
from pipeline.schema import ITEM_SCHEMA  # noqa: E402

EDITS = [
    (
        "src/mod{k}/util{j}.py",
        "    total = compute(x{k}, y)",
        "    total = compute(x{k}, y, cache=True)",
    ),
    ("web/src/page{j}.ts", "const v{k} = load(id);", "const v{k} = await load(id);"),
    (
        "cmd/srv{j}/main.go",
        "if err != nil {{ return nil }}",
        'if err != nil {{ return fmt.Errorf("{k}: %w", err) }}',
    ),
    ("lib/core{j}.rs", "let n = items.len() as u32;", "let n = u32::try_from(items.len())?;"),
]
COMMENTS = [
    "please handle the empty case {k} here",
    "this should use the helper from util{j}",
    "rename to something clearer, e.g. total_{k}",
    "nit: add a type hint",
    "why a copy?",
]


def generate(n: int) -> pa.Table:
    rnd = random.Random(7)
    cols: dict[str, list] = {f.name: [] for f in ITEM_SCHEMA}
    for i in range(n):
        k, j, r = rnd.randrange(10_000), rnd.randrange(300), rnd.random()
        path_t, before_t, after_t = EDITS[i % len(EDITS)]
        path, before, after = path_t.format(k=k, j=j), before_t.format(k=k), after_t.format(k=k)
        comment = COMMENTS[rnd.randrange(len(COMMENTS))].format(k=k, j=j)
        author, bot, removed, added = f"dev{k % 500}", False, 1, 1
        if r < 0.03:
            author, bot, comment = "dependabot[bot]", True, f"Bump lib{j} from 1.{k} to 1.{k + 1}"
        elif r < 0.05:
            path = ["uv.lock", "web/package-lock.json", "Cargo.lock"][j % 3]
        elif r < 0.07:
            after = before
        elif r < 0.08:
            after = "  " + before.strip()
        elif r < 0.085:
            before, after, removed, added = "", "", 1, 0
        elif r < 0.087:
            after = f"TOKEN = 'ghp_{k:036d}'"
        elif r < 0.092:
            comment = ["LGTM", "+1", "done", "👍"][j % 4]
        elif r < 0.095:
            after = "DATA = '" + "x" * 1500 + "'"
        cols["id"].append(f"{i:024x}")
        cols["source"].append("bench")
        cols["source_ref"].append(f"line {i + 1}")
        cols["repo"].append(f"org{k % 50}/proj{k % 7}")
        cols["change"].append(f"{rnd.getrandbits(160):040x}")
        cols["path"].append(path)
        cols["language"].append("")
        cols["before"].append(before)
        cols["after"].append(after)
        cols["context"].append("\n".join(f"    line {m} of context {k}" for m in range(3)))
        cols["comment"].append(comment)
        cols["author"].append(author)
        cols["author_is_bot"].append(bot)
        cols["lines_removed"].append(removed)
        cols["lines_added"].append(added)
        cols["created_at"].append(None)
    return pa.Table.from_pydict(cols, schema=ITEM_SCHEMA)


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>12,.0f} items/s  ({seconds:.2f} s for {n:,})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--sample", type=int, default=20_000)
    ap.add_argument("--rules", default="default")
    args = ap.parse_args()

    t = time.perf_counter()
    table = generate(args.items)
    print(f"generated {args.items:,} items in {time.perf_counter() - t:.1f}s")
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = Path(tmp) / "bench.toml"
        cfg_path.write_text(f'[run]\nname = "b"\nroot = "runs"\n[filter]\nrules = "{args.rules}"\n')
        cfg = load_config(cfg_path)
        rules = load_rules(rules_path(cfg))
        sr = StageRun(cfg.run_dir, "ingest", "bench", "bench", {"bench": "generated"})
        sr.begin()
        write_parquet(table, sr.dir / "items.parquet", sr.meta)
        sr.record_output("items.parquet", "items")
        sr.finish({})

        t = time.perf_counter()
        pl.read_parquet(sr.dir / "items.parquet")
        scan_s = time.perf_counter() - t

        df = pl.from_arrow(table)
        bs = cfg.filter.batch_size
        t = time.perf_counter()
        kept = rejected = 0
        for off in range(0, df.height, bs):
            res = apply_rules(df.slice(off, bs), rules)
            kept += res.kept.height
            rejected += res.rejected.height
        apply_s = time.perf_counter() - t

        t = time.perf_counter()
        fsr = filter_stage.prepare(cfg)
        filter_stage.run(cfg, fsr)
        stage_s = time.perf_counter() - t

        sample = table.slice(0, min(args.sample, args.items)).to_pylist()
        t = time.perf_counter()
        ref = [reference_decide(rules, row) for row in sample]
        ref_s = time.perf_counter() - t
        res = apply_rules(df.head(len(sample)), rules)
        got = {r["source_ref"]: (r["rule"], r["flags"]) for r in res.rejected.iter_rows(named=True)}
        got |= {r["source_ref"]: (None, r["flags"]) for r in res.kept.iter_rows(named=True)}
        agree = sum(got[row["source_ref"]] == d for row, d in zip(sample, ref, strict=True))

    n = args.items
    print(
        f"rule set {rules.name!r}: {len(rules.active)} active rules; "
        f"{kept:,} kept, {rejected:,} rejected; cores: {os.cpu_count()}"
    )
    print(f"apply_rules (batches of {bs:,}): {rate(n, apply_s)}")
    print(f"filter stage end to end:       {rate(n, stage_s)}")
    print(f"baseline per-row Python re:    {rate(len(sample), ref_s)}")
    print(f"baseline polars read_parquet:  {rate(n, scan_s)}")
    per_row = len(sample) / ref_s
    print(f"apply_rules vs per-row Python: {n / apply_s / per_row:.1f}x faster")
    print(f"stage vs per-row Python:       {n / stage_s / per_row:.1f}x faster")
    print(
        f"stage vs polars read_parquet:  {scan_s / stage_s:.3f} of read speed "
        f"({stage_s / scan_s:.1f}x the read time)"
    )
    print(f"sample decisions equal to the per-row reference: {agree:,}/{len(sample):,}")


if __name__ == "__main__":
    main()

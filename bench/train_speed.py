"""Tokens/s of the smoke-train loop against a plain PEFT loop, side by side in one run.

Both train the same model (config:tiny unless --model), LoRA r 16 on all linear layers, on the
sample's train split in the same order, micro-batch 1 x accumulation 16, AdamW with the same
schedule. The stage's loop adds what the plain one lacks: token-sum loss over the window,
device-side finite checks before the sum, no step on NaN, per-item figures. Each round runs
both, in alternating order, each in a child process; measured are the child's loop time (tokens
/ s of training alone), its wall time and its CPU time (user + sys of the child, from
getrusage). Then host reads per micro-step: the loop's own count (any device), and on CUDA the
synchronising calls torch reports under set_sync_debug_mode("warn").

    python bench/train_speed.py [--rounds 3] [--items 169] [--threads 1]   (goal: >= 0.9x)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def examples(model_name: str, items: int, device: str = "cpu"):
    import polars as pl
    from probe_recall import sample_run  # bench/ is on sys.path when run as a script

    from pipeline.train.data import order_items, preflight
    from pipeline.train.model import build

    run = sample_run()
    df = order_items(pl.read_parquet(run / "export" / "train.parquet"), 0).head(items)
    model, tok, _ = build(model_name, 0, 16, 32, device)
    ex, _, _ = preflight(df, tok, 1024)
    return model, tok, ex


def plain_loop(model, ex, pad_id: int, lr: float, accum: int, device: str) -> None:
    """The loop a PEFT tutorial writes: HF loss (mean over the micro-batch's tokens) / accum."""
    import torch
    from transformers import get_cosine_schedule_with_warmup

    from pipeline.train.data import collate

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    steps = -(-len(ex) // accum)
    sched = get_cosine_schedule_with_warmup(opt, round(0.1 * steps), steps)
    model.train()
    for i, e in enumerate(ex):
        enc = collate([e], pad_id, 1, device)
        out = model(input_ids=enc["input_ids"], labels=enc["labels"])
        (out.loss / accum).backward()
        if (i + 1) % accum == 0 or i + 1 == len(ex):
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)


def child(kind: str, model_name: str, items: int, threads: int) -> None:
    import torch

    from pipeline.train.loop import LoopConfig, train

    torch.set_num_threads(threads)
    model, tok, ex = examples(model_name, items)
    t0 = time.perf_counter()
    if kind == "stage":
        train(model, ex, tok.pad_token_id, LoopConfig())
    else:
        plain_loop(model, ex, tok.pad_token_id, 2e-4, 16, "cpu")
    loop_s = time.perf_counter() - t0
    print(json.dumps({"tokens": sum(len(e.input_ids) for e in ex), "loop_s": loop_s}))


def measure(kind: str, a: argparse.Namespace) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [
        sys.executable,
        __file__,
        "--child",
        kind,
        "--model",
        a.model,
        "--items",
        str(a.items),
        "--threads",
        str(a.threads),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {**r, "wall_s": wall, "cpu_s": cpu}


def syncs(model_name: str, limit: float | None = None) -> None:
    """Host reads per micro-step: the loop's own count; on CUDA also torch's count of
    synchronising calls. Over `limit` per micro-step: exit 1."""
    import torch

    from pipeline.train.loop import HOST_READS, LoopConfig, train

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tok, ex = examples(model_name, 64, device)
    if device == "cuda":
        train(model, ex[:16], tok.pad_token_id, LoopConfig(), device)  # warm-up
        torch.cuda.synchronize()
    before = HOST_READS[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if device == "cuda":
            torch.cuda.set_sync_debug_mode("warn")
        try:
            train(model, ex, tok.pad_token_id, LoopConfig(), device)
        finally:
            if device == "cuda":
                torch.cuda.set_sync_debug_mode(0)
    reads = (HOST_READS[0] - before) / len(ex)
    print(f"host reads per micro-step through loop.host ({device}): {reads:.4f}")
    if device != "cuda":
        print("syncs per micro-step on CUDA: not measured (no CUDA device here)")
        return
    n = sum(1 for w in caught if "synchroniz" in str(w.message).lower())
    print(
        f"syncs per micro-step on CUDA (set_sync_debug_mode): {n / len(ex):.4f} "
        f"({n} over {len(ex)} micro-steps of {model_name})"
    )
    if limit is not None and n / len(ex) > limit:
        sys.exit(f"train_speed: {n / len(ex):.3f} syncs per micro-step, over {limit}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--items", type=int, default=169)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default="config:tiny")
    ap.add_argument("--child", choices=("stage", "plain"))
    ap.add_argument("--syncs-only", action="store_true", help="only the host-sync count")
    ap.add_argument("--max-syncs", type=float, default=None, help="fail over this per step")
    a = ap.parse_args()
    if a.syncs_only:
        syncs(a.model, a.max_syncs)
        return
    if a.child:
        child(a.child, a.model, a.items, a.threads)
        return
    runs: dict[str, list[dict]] = {"stage": [], "plain": []}
    for r in range(a.rounds):
        for kind in ("stage", "plain") if r % 2 == 0 else ("plain", "stage"):
            runs[kind].append(measure(kind, a))
    print(
        f"model {a.model}, {a.items} items, {a.rounds} rounds (alternating), "
        f"{a.threads} thread(s); medians:"
    )
    med = {}
    for kind, rs in runs.items():
        tok = rs[0]["tokens"]
        med[kind] = {
            "loop": tok / statistics.median(x["loop_s"] for x in rs),
            "wall": tok / statistics.median(x["wall_s"] for x in rs),
            "cpu": tok / statistics.median(x["cpu_s"] for x in rs),
        }
        print(
            f"  {kind:5s}: {med[kind]['loop']:9.0f} tokens/s in the loop; per child process: "
            f"{med[kind]['wall']:8.0f} tokens/s wall, {med[kind]['cpu']:8.0f} per CPU second"
        )
    ratio = {k: med["stage"][k] / med["plain"][k] for k in ("loop", "wall", "cpu")}
    print(
        f"stage / plain: {ratio['loop']:.3f}x loop, {ratio['wall']:.3f}x wall, "
        f"{ratio['cpu']:.3f}x CPU time (goal >= 0.9x)"
    )
    syncs(a.model, a.max_syncs)


if __name__ == "__main__":
    main()

"""`editcurate smoke-train RUN_DIR`: the whole smoke run, its verdict, its gate, RUN_DIR/smoke/.

Trains on export's train split, judges on its validation split (never trained on), and probes
every curated item of all splits. Slow by design (a real loop), so it is a command of its own
and not a stage of `editcurate run`: the optional stage SMOKE (pipeline/stage.py), run through
the one runner (its fingerprint, inputs, atomic outputs, manifest and checks are the runner's).
`verdict` (trains / fails: finite steps, loss going down) sets the exit code; `gate` (pass /
fail / skipped: held-out quality) is reported beside it. Each long phase says what it does and
counts its units on stderr (progress.py; `quiet`: not), which no output depends on.
"""

from __future__ import annotations

import functools
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from pipeline import storage
from pipeline.config import Config, RunConfig, SmokeConfig
from pipeline.errors import EnvError
from pipeline.runs import StageFailed, write_json, write_parquet
from pipeline.stage import SMOKE, SPLITS
from pipeline.storage import Location
from pipeline.train.faults import Fault
from pipeline.train.loop import LoopConfig, count_windows, eval_loss, train
from pipeline.train.progress import QUIET, Reporter, Tick, count
from pipeline.train.sweep import SmokeFailed, classify_sweep, parse_sweep

if TYPE_CHECKING:
    from pipeline.runner import StageIO

__all__ = ["SmokeFailed", "classify_sweep", "parse_sweep", "run", "print_summary", "fit"]

LOSS_SAMPLE = 32  # training items whose loss before and after decides "loss going down"
_NOT_JUDGED = {"gate": "skipped", "gate_reason": "generation not run (run(generate=False))"}


def check_config(sc: SmokeConfig) -> None:
    """What the model cannot check: the checkpoint folder exists, the preset is known."""
    from pipeline.train.model import PRESETS, preset_name

    name = preset_name(sc.model)
    if name is None and not Path(sc.model).is_dir():
        raise SmokeFailed(f"smoke-train: --model {sc.model}: not a local checkpoint folder")
    if name is not None and name not in PRESETS:
        known = ", ".join(f"config:{k}" for k in PRESETS)
        raise SmokeFailed(f"smoke-train: --model {sc.model}: unknown preset; presets: {known}")


def device_of(sc: SmokeConfig) -> str:
    """The device to train on; --device cuda where this torch has no usable GPU is an
    environment error, said in one line before anything is read (exit 3)."""
    import torch

    if sc.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if sc.device == "cuda" and not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
        raise EnvError(
            f"smoke-train: --device cuda: no usable GPU (torch {torch.__version__}, {build}); "
            "use --device cpu, or auto"
        )
    return sc.device


def loop_config(sc: SmokeConfig) -> LoopConfig:
    return LoopConfig(
        lr=sc.lr,
        micro_batch=sc.micro_batch,
        grad_accum=sc.grad_accum,
        warmup=sc.warmup,
        clip=sc.clip,
        skip_budget=sc.skip_budget,
        schedule=sc.schedule,
    )


def key(cfg: Config) -> tuple[str, dict[str, str]]:
    """Before the stage runs: what the config cannot check."""
    if storage.is_remote(cfg.run_dir):  # transformers and peft save to local folders
        raise StageFailed(
            f"smoke-train: the run folder {cfg.run_dir} is in object storage; smoke-train "
            "writes its adapter and windows to a local folder: copy the run folder's export/ "
            "to a local run.root and run it there"
        )
    check_config(cfg.smoke)
    device_of(cfg.smoke)
    return "", {}


def read_splits(run_dir: Path) -> dict[str, pl.DataFrame]:
    """export's splits (a missing one is empty) and `curated`: all of them together."""
    frames = {}
    for s in SPLITS:
        p = run_dir / "export" / f"{s}.parquet"
        frames[s] = (
            pl.read_parquet(p) if p.exists() else pl.DataFrame({"id": []}, {"id": pl.String})
        )
    frames["curated"] = pl.concat([frames[s] for s in SPLITS], how="diagonal_relaxed")
    return frames


def fit(
    train_df: pl.DataFrame,
    sc: SmokeConfig,
    device: str,
    fault: Fault | None = None,
    before_training: Any = None,
    report: Reporter = QUIET,
) -> dict[str, Any]:
    """Build a fresh model, pre-flight, train once in `sc.seed`'s order; what a summary, a
    sweep or the probe needs. `before_training(model, tok)` runs on the untrained model;
    `report` says each phase."""
    from pipeline.train.data import order_items, preflight
    from pipeline.train.model import build, preset_name

    verb = "building" if preset_name(sc.model) is not None else "loading"
    report.phase(f"{verb} model {sc.model or 'config:tiny'} (LoRA r {sc.lora_r}) on {device}")
    model, tok, info = build(
        sc.model, sc.seed, sc.lora_r, sc.lora_alpha, device, sc.grad_checkpointing
    )
    report.phase(f"pre-flight: tokenizing {count(train_df.height, 'training item')}")
    examples, pre, pre_summary = preflight(
        order_items(train_df, sc.seed), tok, sc.max_len, sc.exclude_bad
    )
    sample = random.Random(sc.seed).sample(examples, min(LOSS_SAMPLE, len(examples)))
    n = len(sample)
    tick = report.phase(f"loss before training on {count(n, 'training item')}", n, "loss before")
    before = eval_loss(model, sample, tok.pad_token_id, device, tick)
    extra = before_training(model, tok) if before_training else None
    lc = loop_config(sc)
    windows = count_windows(len(examples), lc)
    on_step = report.steps(
        windows,
        f"training {count(windows, 'step')} of {lc.grad_accum} x {lc.micro_batch} items "
        f"({count(len(examples), 'item')})",
    )
    t0 = time.time()
    items, steps, kept = train(model, examples, tok.pad_token_id, lc, device, fault, on_step)
    wall = time.time() - t0
    tick = report.phase(f"loss after training on {count(n, 'training item')}", n, "loss after")
    after = eval_loss(model, sample, tok.pad_token_id, device, tick)
    report.done()
    return {
        "model": model,
        "tok": tok,
        "info": info,
        "examples": examples,
        "preflight": pre,
        "preflight_summary": pre_summary,
        "items": items,
        "steps": steps,
        "windows": kept,
        "loss_sample": sample,
        "eval_before": before,
        "eval_after": after,
        "train_s": wall,
        "before_training": extra,
    }


def locate(
    res: dict[str, Any],
    run_dir: Path,
    curated: pl.DataFrame,
    sc: SmokeConfig,
    device: str,
    fault: Fault | None = None,
    report: Reporter = QUIET,
) -> dict[str, Any]:
    """ddmin inside each kept non-finite training window (on its saved weights), then, with
    --probe-batch K, the probe over every curated item on the weights of the first failing
    window (else the trained adapter). Culprits, tables, groupings and the cost in passes."""
    from pipeline.train.bisect import Passes, locate_window
    from pipeline.train.data import preflight
    from pipeline.train.model import adapter_state, load_adapter_state
    from pipeline.train.probe import probe, suspicion_groups

    model, tok = res["model"], res["tok"]
    run = Passes(model, tok.pad_token_id, device, fault)
    by_id = {e.id: e for e in res["examples"]}
    ok = res["items"].filter(~pl.col("dropped"))["id"].to_list()
    unrelated = by_id[ok[0]] if ok else None

    def passes(tick: Tick) -> Callable[[], None]:  # each unit's tick, the passes so far beside
        return lambda: tick(status=f"{sum(run.count.values())} passes")

    kept = res["windows"]
    bad = sum(len(w["bad"]) for w in kept)
    after = None
    if bad:
        batches = count(bad, "non-finite micro-batch", "non-finite micro-batches")
        what = f"bisecting {batches} in {count(len(kept), 'kept window')}"
        after = passes(report.phase(what, bad, "bisect"))
    windows = [c for w in kept for c in locate_window(w, by_id, run, unrelated, on_batch=after)]
    report.done()
    out: dict[str, Any] = {"k": sc.probe_batch, "window_culprits": windows, "culprits": []}
    if (k := sc.probe_batch) > 0:

        def on_blocks(n: int) -> Callable[[], None]:
            what = (
                f"probing {count(n, 'block')} of up to {k} items ({count(len(examples), 'item')})"
            )
            return passes(report.phase(what, n, "probe blocks"))

        report.phase(f"probe pre-flight: tokenizing {count(curated.height, 'curated item')}")
        examples, _, _ = preflight(curated, tok, sc.max_len, sc.exclude_bad)
        groups = suspicion_groups(run_dir, curated)
        end = adapter_state(model)
        if res["windows"]:
            load_adapter_state(model, res["windows"][0]["adapter"])
            out["weights"] = f"before step {res['windows'][0]['step']} (its window was non-finite)"
        else:
            out["weights"] = "the trained adapter (no training window was non-finite)"
        run.forget()
        known = [c["ids"] for c in windows if "table" in c]
        try:
            out.update(probe(run, examples, k, groups, sc.seed, known=known, on_blocks=on_blocks))
        finally:
            report.done()
            load_adapter_state(model, end)
    out["cost"] = run.cost(curated.height)
    model.zero_grad(set_to_none=True)
    return out


def verdict(res: dict[str, Any], sc: SmokeConfig, finite: bool) -> tuple[str, str]:
    """`trains` when loss fell, skips are within budget and the adapter is finite."""
    items = res["items"]
    seen = items.height
    skipped = int(items["dropped"].sum()) if seen else 0
    if not res["examples"]:
        return "fails", "no trainable items after pre-flight"
    if skipped > sc.skip_budget * seen:
        return "fails", f"skipped {skipped} of {seen} items, over the {sc.skip_budget:.0%} budget"
    if not finite:
        return "fails", "adapter has non-finite weights"
    b, a = res["eval_before"], res["eval_after"]
    if not (math.isfinite(a) and a < b):
        return "fails", f"loss did not fall on the training sample ({b:.4f} -> {a:.4f})"
    return "trains", f"loss fell {b:.4f} -> {a:.4f}; {skipped} of {seen} items skipped"


def run(
    run_dir: Location,
    sc: SmokeConfig,
    sweep: tuple[str, list[Any]] | None = None,
    fault: Fault | None = None,
    generate: bool = True,
    fault_spec: str = "",
    quiet: bool = False,
) -> dict[str, Any]:
    """Smoke-train export's train split through the runner; write RUN_DIR/smoke/; return the
    summary. Always re-run: a sweep or an injected fault changes the outputs, and neither is
    config. Progress on stderr unless `quiet` (no output depends on it)."""
    from pipeline.runner import run_stage

    cfg = Config(run=RunConfig(root=str(run_dir.parent), name=run_dir.name), smoke=sc)
    knobs = functools.partial(
        step, sweep=sweep, fault=fault, generate=generate, fault_spec=fault_spec, quiet=quiet
    )
    run_stage(replace(SMOKE, step=knobs), cfg, force=True)
    summary: dict[str, Any] = json.loads((cfg.run_dir / SMOKE.name / "summary.json").read_bytes())
    return summary


def step(
    cfg: Config,
    io: StageIO,
    sweep: tuple[str, list[Any]] | None = None,
    fault: Fault | None = None,
    generate: bool = True,
    fault_spec: str = "",
    quiet: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stage: train, locate, judge; its outputs in io.dir; progress on stderr unless
    `quiet`."""
    with Reporter(quiet) as report:
        return _step(cfg, io, sweep, fault, generate, fault_spec, report)


def _step(
    cfg: Config,
    io: StageIO,
    sweep: tuple[str, list[Any]] | None,
    fault: Fault | None,
    generate: bool,
    fault_spec: str,
    report: Reporter,
) -> tuple[dict[str, Any], dict[str, Any]]:
    import torch

    from pipeline.train import evaluate as ev
    from pipeline.train.model import adapter_finite

    sc = cfg.smoke
    run_dir, out = cfg.run_dir, io.dir
    assert not storage.is_remote(run_dir) and not storage.is_remote(out)  # the key refuses it
    device = device_of(sc)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    frames = read_splits(run_dir)
    val = frames["validation"]
    judged = (
        val.sample(min(sc.eval_items, val.height), seed=sc.seed).sort("id") if generate else val
    )
    judged_items = judged.to_dicts() if generate and sc.eval_items > 0 else []

    def generating(who: str) -> Callable[[], None]:
        n, m = len(judged_items), sc.max_new_tokens
        what = f"generating with {who} for {count(n, 'validation item')} (up to {m} new tokens)"
        return report.phase(what, n, f"generate ({who})")

    def base_model(model: Any, tok: Any) -> list[str]:  # the untrained model's answers
        tick = generating("the base model") if judged_items else None
        return ev.generate(model, tok, judged_items, device, sc.max_new_tokens, tick)

    res = fit(frames["train"], sc, device, fault, base_model, report)
    model, tok = res["model"], res["tok"]
    located = locate(res, run_dir, frames["curated"], sc, device, fault, report)
    write_json(out / "culprits.json", located)
    if res["windows"]:  # the first non-finite window's weights and optimiser state, on disk
        w = res["windows"][0]
        (out / "windows").mkdir(exist_ok=True)
        torch.save({k: _cpu(v) for k, v in w.items()}, out / "windows" / f"step_{w['step']}.pt")

    finite = adapter_finite(model)
    if finite:
        model.save_pretrained(out / "adapter")
    scores = None
    if judged_items:
        tick = generating("the trained adapter")
        preds = ev.generate(model, tok, judged_items, device, sc.max_new_tokens, tick)
        scores = ev.score(judged_items, preds, res["before_training"])
        write_parquet(pl.DataFrame(scores["per_item"]).to_arrow(), out / "eval.parquet", io.meta)
        io.run.record_output("eval.parquet", "aux")
    trained_ids = {e.id for e in res["examples"]}
    report.phase(f"pre-flight: tokenizing {count(val.height, 'validation item')}")
    val_examples = _val_examples(val, tok, sc)
    n = len(val_examples)
    tick = report.phase(f"held-out loss on {count(n, 'validation item')}", n, "held-out loss")
    held_out_loss = eval_loss(model, val_examples, tok.pad_token_id, device, tick)
    report.done()

    items = res["preflight"].join(res["items"], on="id", how="left").sort("id")
    write_parquet(items.to_arrow(), out / "items.parquet", io.meta)
    write_parquet(res["steps"].to_arrow(), out / "steps.parquet", io.meta)
    ev.plot(res["steps"], out / "loss_grad.png")

    sweep_out = _sweep(frames["train"], sc, sweep, device, fault, report) if sweep else {}
    v, reason = verdict(res, sc, finite)
    trained = res["items"]
    dropped = trained.filter(pl.col("dropped"))
    tokens = int(sum(len(e.input_ids) for e in res["examples"]))
    culprits = located["window_culprits"] + located["culprits"]
    summary = {
        "verdict": v,
        "reason": reason,
        **(ev.gate(scores, sc.eval_items) if generate else _NOT_JUDGED),
        "model": res["info"],
        "device": device,
        "dtype": f"{res['info']['base_dtype']} base"
        + (", bf16 autocast" if device.startswith("cuda") else "")
        + ", fp32 adapter",
        "config": sc.model_dump(),
        "fault": fault_spec or ("injected (test hook)" if fault else ""),
        "data": {s: frames[s].height for s in (*SPLITS, "curated")},
        "preflight": res["preflight_summary"],
        "items_seen": trained.height,
        "items_skipped": dropped.height,
        "skipped": [
            {
                "id": r["id"],
                "position": r["position"],
                "step": r["step"],
                "where": "forward" if r["first_bad"] == "loss" else "backward",
                "first_bad": r["first_bad"],
            }
            for r in dropped.iter_rows(named=True)
        ],
        "outliers": trained.filter(pl.col("outlier"))["id"].to_list(),
        "steps": res["steps"].height,
        "optimizer_steps": int(res["steps"]["stepped"].sum()),
        "eval_loss_before": res["eval_before"],
        "eval_loss_after": res["eval_after"],
        "held_out_loss_after": held_out_loss,
        "adapter_finite": finite,
        "adapter_saved": finite,
        "train_s": round(res["train_s"], 2),
        "tokens_per_s": round(tokens / res["train_s"], 1) if res["train_s"] > 0 else None,
        "peak_gpu_memory_gib": (
            round(torch.cuda.max_memory_allocated() / 2**30, 2)
            if device.startswith("cuda")
            else None
        ),
        "generation": {
            "split": "validation",
            "held_out": not (set(judged["id"].to_list()) & trained_ids),
            "ids": [r["id"] for r in judged_items],
            "max_new_tokens": sc.max_new_tokens,
            **{k: x for k, x in (scores or {}).items() if k != "per_item"},
        },
        "probe": {
            "k": located["k"],
            "weights": located.get("weights", ""),
            "culprits": [c["ids"] for c in culprits if "table" in c],
            "found_by": [c["found_by"] for c in culprits if "table" in c],
            "blocks_by_grouping": located.get("blocks_by_grouping", {}),
            "cost": located["cost"],
        },
        "culprit_tables": culprits,
        "sweep": sweep_out,
        "torch": torch.__version__,
    }
    write_json(out / "summary.json", summary)
    return {"items": trained.height, "skipped": dropped.height, "verdict": v}, {}


def _sweep(
    train_df: pl.DataFrame,
    sc: SmokeConfig,
    sweep: tuple[str, list[Any]],
    device: str,
    fault: Fault | None,
    report: Reporter,
) -> dict[str, Any]:
    """sweep_runs, each run's phases said, the value it trains with first."""
    from pipeline.train.sweep import sweep_runs

    key, values = sweep
    runs = count(len(values), "more training run")
    report.phase(f"sweep {key}: {runs} ({', '.join(map(str, values))})")
    seen = [0]

    def fit_one(df: pl.DataFrame, one: SmokeConfig, dev: str, f: Fault | None) -> dict[str, Any]:
        seen[0] += 1
        report.phase(f"sweep run {seen[0]}/{len(values)}: {key}={getattr(one, key)}")
        return fit(df, one, dev, f, report=report)

    return sweep_runs(train_df, sc, sweep, device, fault, fit_one)


def _cpu(v: Any) -> Any:
    import torch

    if isinstance(v, torch.Tensor):
        return v.detach().cpu()
    if isinstance(v, dict):
        return {k: _cpu(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_cpu(x) for x in v]
    return v


def _val_examples(val: pl.DataFrame, tok: Any, sc: SmokeConfig) -> list[Any]:
    from pipeline.train.data import preflight

    return preflight(val, tok, sc.max_len)[0] if val.height else []


def print_summary(summary: dict[str, Any]) -> None:
    from pipeline.train.summary import print_summary as show

    show(summary)

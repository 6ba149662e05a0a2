"""`editcurate smoke-train RUN_DIR`: the whole smoke run, its verdict and RUN_DIR/smoke/.

Slow by design (a real loop over every curated item), so it is a command of its own and not
a stage of `editcurate run`.
"""

from __future__ import annotations

import hashlib
import math
import random
import time
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.config import SmokeConfig, canonical_text, updated
from pipeline.runs import (
    StageFailed,
    StageRun,
    code_version,
    input_fingerprint,
    require_output,
    stage_fingerprint,
    write_json,
    write_parquet,
)
from pipeline.train.data import order_items, preflight
from pipeline.train.loop import Fault, LoopConfig, eval_loss, train

STAGE = "smoke"


class SmokeFailed(StageFailed):
    pass


def check_config(sc: SmokeConfig) -> None:
    """What the model cannot check: the checkpoint folder exists (ranges: SmokeConfig)."""
    if sc.model and not Path(sc.model).is_dir():
        raise SmokeFailed(f"smoke-train: --model {sc.model}: not a local checkpoint folder")


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """ "lr=2e-4,8e-4" -> ("lr", [2e-4, 8e-4]), values cast to the SmokeConfig field's type."""
    if "=" not in text:
        raise SmokeFailed(f"--sweep {text!r}: expected KEY=V1,V2, e.g. lr=2e-4,8e-4")
    key, raw = text.split("=", 1)
    key = key.strip()
    fields = SmokeConfig.model_fields
    if key not in fields:
        raise SmokeFailed(f"--sweep: unknown key {key!r}; keys: {', '.join(sorted(fields))}")
    cast = type(getattr(SmokeConfig(), key))
    vals = [v.strip() for v in raw.split(",") if v.strip()]
    if len(vals) < 2:
        raise SmokeFailed(f"--sweep {text!r}: give two or more values")
    if cast is bool:
        return key, [v.lower() in ("1", "true", "yes") for v in vals]
    try:
        values = [cast(v) for v in vals]
    except ValueError:
        raise SmokeFailed(f"--sweep {text!r}: values must be {cast.__name__}") from None
    for v in values:  # each value in its range before anything trains (a ConfigError: exit 2)
        updated(SmokeConfig(), f"--sweep {text!r}", **{key: v})
    return key, values


def classify_sweep(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Same non-finite positions under differing loss curves: data-positioned; else moving."""
    positions = [tuple(r["dropped_positions"]) for r in runs]
    if not any(positions):
        return {"class": "none", "reason": "no non-finite items under any value"}
    curves = [tuple(round(x, 6) for x in r["loss_curve"]) for r in runs]
    if len(set(positions)) == 1:
        if len(set(curves)) == 1:
            return {
                "class": "inconclusive",
                "reason": "loss curves identical; sweep values further apart",
            }
        return {
            "class": "data-positioned",
            "reason": "non-finite at the same positions while the loss curves differ",
            "ids": runs[0]["dropped_ids"],
            "positions": list(positions[0]),
        }
    return {
        "class": "optimisation-driven",
        "reason": "the non-finite positions move with the configuration",
    }


def _device(sc: SmokeConfig) -> str:
    import torch

    if sc.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return sc.device


def _loop_cfg(sc: SmokeConfig) -> LoopConfig:
    return LoopConfig(
        lr=sc.lr,
        micro_batch=sc.micro_batch,
        grad_accum=sc.grad_accum,
        warmup=sc.warmup,
        clip=sc.clip,
        skip_budget=sc.skip_budget,
    )


def prepare(run_dir: Path, sc: SmokeConfig) -> StageRun:
    check_config(sc)
    src = run_dir / "shapes" / "kept.parquet"
    require_output(src, "shapes", "smoke-train", SmokeFailed)
    section_fp = hashlib.sha256(canonical_text(sc.model_dump()).encode()).hexdigest()
    return StageRun(
        run_dir=run_dir,
        stage=STAGE,
        fingerprint=stage_fingerprint(
            STAGE, section_fp[:16], code_version(("train", "template.py"))
        ),
        config_fingerprint=section_fp[:16],
        inputs={"shapes/kept.parquet": input_fingerprint(src)},
    )


def _one_run(df: pl.DataFrame, sc: SmokeConfig, device: str, fault: Fault | None) -> dict:
    """Build a fresh model, pre-flight, train once; everything a summary or a sweep needs."""
    from pipeline.train.model import build

    model, tok, info = build(sc.model, sc.seed, sc.lora_r, sc.lora_alpha, device)
    model.to(device)
    examples, pre, pre_summary = preflight(df, tok, sc.max_len, sc.exclude_bad)
    rng = random.Random(sc.seed)
    eval_set = rng.sample(examples, min(sc.eval_items, len(examples))) if examples else []
    before = eval_loss(model, eval_set, tok.pad_token_id, device)
    t0 = time.time()
    items, steps = train(model, examples, tok.pad_token_id, _loop_cfg(sc), device, fault)
    wall = time.time() - t0
    after = eval_loss(model, eval_set, tok.pad_token_id, device)
    return {
        "model": model,
        "tok": tok,
        "info": info,
        "examples": examples,
        "preflight": pre,
        "preflight_summary": pre_summary,
        "items": items,
        "steps": steps,
        "eval_before": before,
        "eval_after": after,
        "train_s": wall,
    }


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
        return "fails", f"loss did not fall on the eval sample ({b:.4f} -> {a:.4f})"
    return "trains", f"loss fell {b:.4f} -> {a:.4f}; {skipped} of {seen} items skipped"


def run(
    run_dir: Path,
    sc: SmokeConfig,
    sweep: tuple[str, list[Any]] | None = None,
    fault: Fault | None = None,
    generate: bool = True,
) -> dict[str, Any]:
    """Smoke-train every curated item; write RUN_DIR/smoke/; return the summary."""
    import torch

    from pipeline.train.bisect import probe
    from pipeline.train.evaluate import generate_eval, plot
    from pipeline.train.model import adapter_finite

    sr = prepare(run_dir, sc)
    sr.begin()
    out = sr.dir
    device = _device(sc)
    df = order_items(pl.read_parquet(run_dir / "shapes" / "kept.parquet"), sc.seed)
    res = _one_run(df, sc, device, fault)
    model, tok = res["model"], res["tok"]

    culprits: dict[str, Any] = {"k": 0, "culprits": []}
    if sc.probe_batch > 0:
        culprits = probe(model, res["examples"], sc.probe_batch, tok.pad_token_id, device, fault)
    write_json(out / "culprits.json", culprits)

    finite = adapter_finite(model)
    adapter = out / "adapter"
    if finite:
        model.save_pretrained(adapter)
    gen: dict[str, Any] = {}
    if generate and sc.eval_items > 0:
        # export's test split when there is one; every curated item is trained on, so the
        # sample is held out only where its ids were not in the training set.
        test = run_dir / "export" / "test.parquet"
        pool = pl.read_parquet(test) if test.exists() else df
        n = min(sc.eval_items, pool.height)
        sample = pool.sample(n, seed=sc.seed) if n else pool
        gen = generate_eval(model, tok, sample.to_dicts(), device, sc.max_new_tokens)
        trained_ids = {e.id for e in res["examples"]}
        gen["held_out"] = not any(i in trained_ids for i in sample["id"].to_list())
        gen["source"] = "export/test.parquet" if test.exists() else "shapes/kept.parquet"

    items = res["preflight"].join(res["items"], on="id", how="left").sort("id")
    write_parquet(items.to_arrow(), out / "items.parquet", sr.meta)
    write_parquet(res["steps"].to_arrow(), out / "steps.parquet", sr.meta)
    plot(res["steps"], out / "loss_grad.png")

    sweep_out: dict[str, Any] = {}
    if sweep:
        key, values = sweep
        runs = []
        for v in values:
            r = _one_run(df, updated(sc, "--sweep", **{key: v}), device, fault)
            d = r["items"].filter(pl.col("dropped"))
            runs.append(
                {
                    "value": v,
                    "dropped_positions": d["position"].to_list(),
                    "dropped_ids": d["id"].to_list(),
                    "loss_curve": r["steps"]["loss"].fill_nan(None).fill_null(0.0).to_list(),
                    "eval_after": r["eval_after"],
                }
            )
        sweep_out = {"key": key, "runs": runs, **classify_sweep(runs)}

    v, reason = verdict(res, sc, finite)
    trained = res["items"]
    dropped = trained.filter(pl.col("dropped"))
    tokens = int(sum(len(e.input_ids) for e in res["examples"]))
    summary = {
        "verdict": v,
        "reason": reason,
        "model": res["info"],
        "device": device,
        "dtype": "bf16 autocast" if device.startswith("cuda") else "fp32",
        "config": sc.model_dump(),
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
        "adapter_finite": finite,
        "adapter_saved": finite,
        "train_s": round(res["train_s"], 2),
        "tokens_per_s": round(tokens / res["train_s"], 1) if res["train_s"] > 0 else None,
        "generation": {k: v2 for k, v2 in gen.items() if k != "per_item"},
        "probe": {
            "k": culprits["k"],
            "culprits": [c["ids"] for c in culprits.get("culprits", [])],
        },
        "culprit_tables": culprits.get("culprits", []),
        "sweep": sweep_out,
        "torch": torch.__version__,
    }
    write_json(out / "summary.json", summary)
    for name in ("items.parquet", "steps.parquet"):
        sr.record_output(name, "aux")
    for name in ("summary.json", "culprits.json", "loss_grad.png"):
        sr.record_output(name, "aux")
    sr.finish({"items": trained.height, "skipped": dropped.height, "verdict": v})
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    from pipeline.console import console

    t = Table(title=f"smoke-train: {summary['verdict']}")
    t.add_column("measure")
    t.add_column("value")
    pre = summary["preflight"]
    g = summary.get("generation") or {}
    rows = [
        ("model", summary["model"]["model"]),
        ("adapter", f"{summary['model']['tensors']} tensors, {summary['model']['dtypes']}"),
        ("device / dtype", f"{summary['device']} / {summary['dtype']}"),
        ("items / trainable", f"{pre['items']} / {pre['trainable']}"),
        ("zero supervision", str(len(pre["zero_supervision"]))),
        ("truncated target", str(len(pre["truncated_target"]))),
        ("items seen / skipped", f"{summary['items_seen']} / {summary['items_skipped']}"),
        ("steps (optimizer)", f"{summary['steps']} ({summary['optimizer_steps']})"),
        ("eval loss", f"{summary['eval_loss_before']:.4f} -> {summary['eval_loss_after']:.4f}"),
        ("outliers (robust z > 3.5)", str(len(summary["outliers"]))),
        ("tokens/s", str(summary["tokens_per_s"])),
        ("adapter saved", str(summary["adapter_saved"])),
    ]
    if g:
        rows.append(
            ("edit similarity", f"{g['edit_similarity']} (copy {g['copy_input_baseline']})")
        )
    if summary["probe"]["k"]:
        rows.append(("probe culprits", str(summary["probe"]["culprits"])))
    if summary["sweep"]:
        rows.append(("sweep", f"{summary['sweep']['class']}: {summary['sweep']['reason']}"))
    rows.append(("reason", summary["reason"]))
    for r in rows:
        t.add_row(*r)
    console.print(t)
    for c in summary.get("culprit_tables", []):
        ct = Table(title=f"non-finite set in probe batch {c['batch']}: {', '.join(c['ids'])}")
        ct.add_column("condition")
        ct.add_column("grad_norm")
        for r in c["table"]:
            ct.add_row(r["condition"], r["grad_norm"])
        console.print(ct)

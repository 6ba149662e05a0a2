"""The smoke-train loop: accumulate only finite micro-steps, never step on a NaN, log it all.

Each micro-step's adapter gradients are checked before they join the window's sum, so a
non-finite item is dropped from its window (and named, with the first bad parameter) while
the rest of the window still trains. Every item is seen: the loop never stops early.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl
import torch

from pipeline.train.data import IGNORE, Example, collate
from pipeline.train.model import adapter_params

# Test-only fault injection: given the ids of a micro-batch, a truthy result makes its backward
# NaN; the string "forward" makes its loss NaN instead.
Fault = Callable[[list[str]], bool | str]


class _PoisonGrad(torch.autograd.Function):
    """Identity forward, NaN backward: a finite loss whose gradients are not."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * float("nan")


@dataclass
class LoopConfig:
    lr: float = 2e-4
    micro_batch: int = 1
    grad_accum: int = 16
    warmup: float = 0.1  # fraction of steps with a linear warmup
    clip: float = 1.0
    skip_budget: float = 0.01


def autocast(device: str, fp32: bool = False) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA (unless fp32), plain fp32 elsewhere."""
    if device.startswith("cuda") and not fp32:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def item_losses(
    model: Any, batch: list[Example], pad_id: int, device: str, pad_to: int = 1, fp32: bool = False
) -> torch.Tensor:
    """Per-item mean token loss over the supervised (shifted) positions."""
    enc = {k: v.to(device) for k, v in collate(batch, pad_id, pad_to).items()}
    with autocast(device, fp32):
        logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits
    logits = logits[:, :-1].float()
    labels = enc["labels"][:, 1:]
    tok = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        labels.reshape(-1),
        ignore_index=IGNORE,
        reduction="none",
    ).view(labels.shape)
    n = (labels != IGNORE).sum(1).clamp(min=1)
    return tok.sum(1) / n


def forward_backward(
    model: Any,
    batch: list[Example],
    pad_id: int,
    device: str,
    fault: Fault | None = None,
    pad_to: int = 1,
    fp32: bool = False,
) -> tuple[list[float], bool, str, float]:
    """One micro-step without an optimiser: (item losses, finite, first bad name, grad norm).

    The first bad name is "loss" when the forward is non-finite, else the first adapter
    parameter whose gradient is not finite; "" when all is finite.
    """
    model.zero_grad(set_to_none=True)
    per = item_losses(model, batch, pad_id, device, pad_to, fp32)
    hit = fault([e.id for e in batch]) if fault is not None else False
    if hit == "forward":
        per = per * float("nan")
    toks = torch.tensor([sum(1 for x in e.labels[1:] if x != IGNORE) for e in batch], device=device)
    loss = (per * toks).sum() / toks.sum().clamp(min=1)
    if hit and hit != "forward":
        loss = _PoisonGrad.apply(loss)
    losses = [float(x) for x in per.detach()]
    if not torch.isfinite(loss):
        return losses, False, "loss", math.nan
    loss.backward()
    sq = 0.0
    for name, p in adapter_params(model).items():
        if p.grad is None:
            continue
        if not torch.isfinite(p.grad).all():
            return losses, False, name, math.nan
        sq += float(p.grad.double().pow(2).sum())
    return losses, True, "", math.sqrt(sq)


def _flat(params: dict[str, torch.nn.Parameter]) -> torch.Tensor:
    return torch.cat([p.detach().flatten().double() for p in params.values()])


def robust_z(values: list[float]) -> list[float]:
    """0.6745 (x - median) / MAD over the finite values; NaN stays NaN."""
    s = pl.Series(values, dtype=pl.Float64)
    fin = s.filter(s.is_finite())
    if fin.len() == 0:
        return [math.nan] * len(values)
    med = float(fin.median())
    mad = float((fin - med).abs().median())
    if mad == 0:
        return [0.0 if math.isfinite(v) else math.nan for v in values]
    return [0.6745 * (v - med) / mad if math.isfinite(v) else math.nan for v in values]


def train(
    model: Any,
    examples: list[Example],
    pad_id: int,
    cfg: LoopConfig,
    device: str = "cpu",
    fault: Fault | None = None,
    on_step: Callable[[int, int], None] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Run every example once; return (items, steps) tables."""
    params = adapter_params(model)
    opt = torch.optim.AdamW(params.values(), lr=cfg.lr, weight_decay=0.0)
    micro = [examples[i : i + cfg.micro_batch] for i in range(0, len(examples), cfg.micro_batch)]
    windows = [micro[i : i + cfg.grad_accum] for i in range(0, len(micro), cfg.grad_accum)]
    warm = max(1, round(cfg.warmup * len(windows)))
    # Linear warmup: step s runs at lr * (s + 1) / (warm + 1) until it reaches lr.
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / (warm + 1)))
    accum = {n: torch.zeros_like(p) for n, p in params.items()}
    prev = _flat(params)
    items, steps = [], []
    pos = 0
    model.train()
    for step, window in enumerate(windows):
        good = skipped = tokens = 0
        losses: list[float] = []
        lr = opt.param_groups[0]["lr"]
        for batch in window:
            per, ok, bad, gnorm = forward_backward(model, batch, pad_id, device, fault)
            for e, loss in zip(batch, per, strict=True):
                items.append(
                    {
                        "id": e.id,
                        "position": pos,
                        "step": step,
                        "loss": loss,
                        "grad_norm": gnorm,
                        "loss_finite": math.isfinite(loss),
                        "grad_finite": ok,
                        "first_bad": bad,
                        "dropped": not ok,
                        "supervised_tokens": e.supervised_tokens,
                    }
                )
                pos += 1
            if not ok:
                skipped += len(batch)
                continue
            good += 1
            tokens += sum(e.supervised_tokens for e in batch)
            losses.extend(per)
            for n, p in params.items():
                if p.grad is not None:
                    accum[n] += p.grad
        stepped, norm = False, math.nan
        if good:
            gsq = 0.0
            for n, p in params.items():
                grad = accum[n] / good
                p.grad = grad
                gsq += float(grad.double().pow(2).sum())
            norm = math.sqrt(gsq)
            if math.isfinite(norm):  # the finite check comes before the clip and the step
                torch.nn.utils.clip_grad_norm_(list(params.values()), cfg.clip)
                opt.step()
                sched.step()
                stepped = True
        model.zero_grad(set_to_none=True)
        for a in accum.values():
            a.zero_()
        cur = _flat(params)
        wnorm = float(cur.norm())
        pnorm = float(prev.norm())
        rel = float((cur - prev).norm()) / pnorm if pnorm > 0 else math.nan
        prev = cur
        steps.append(
            {
                "step": step,
                "loss": sum(losses) / len(losses) if losses else math.nan,
                "grad_norm": norm,
                "lr": lr,
                "tokens": tokens,
                "items": sum(len(b) for b in window),
                "skipped": skipped,
                "stepped": stepped,
                "adapter_norm": wnorm,
                "adapter_rel_change": rel,
            }
        )
        if on_step:
            on_step(step + 1, len(windows))
    it = pl.DataFrame(items, schema=_ITEM_SCHEMA)
    it = it.with_columns(
        pl.Series("loss_z", robust_z(it["loss"].to_list()), dtype=pl.Float64),
        pl.Series("grad_z", robust_z(it["grad_norm"].to_list()), dtype=pl.Float64),
    ).with_columns(
        ((pl.col("loss_z").abs() > 3.5) | (pl.col("grad_z").abs() > 3.5))
        .fill_null(False)
        .alias("outlier")
    )
    return it, pl.DataFrame(steps, schema=_STEP_SCHEMA)


@torch.no_grad()
def eval_loss(model: Any, examples: list[Example], pad_id: int, device: str) -> float:
    """Mean per-item loss over a fixed set, for 'loss fell' without step-to-step noise."""
    model.eval()
    vals = [float(item_losses(model, [e], pad_id, device)[0]) for e in examples]
    model.train()
    return sum(vals) / len(vals) if vals else math.nan


_ITEM_SCHEMA = {
    "id": pl.String,
    "position": pl.Int64,
    "step": pl.Int64,
    "loss": pl.Float64,
    "grad_norm": pl.Float64,
    "loss_finite": pl.Boolean,
    "grad_finite": pl.Boolean,
    "first_bad": pl.String,
    "dropped": pl.Boolean,
    "supervised_tokens": pl.Int64,
}
_STEP_SCHEMA = {
    "step": pl.Int64,
    "loss": pl.Float64,
    "grad_norm": pl.Float64,
    "lr": pl.Float64,
    "tokens": pl.Int64,
    "items": pl.Int64,
    "skipped": pl.Int64,
    "stepped": pl.Boolean,
    "adapter_norm": pl.Float64,
    "adapter_rel_change": pl.Float64,
}

"""The smoke-train loop: token-sum loss over each window, warmup + decay, never a step on NaN.

A window is `grad_accum` micro-batches. Each micro-batch's loss is the sum of its supervised
token losses divided by the supervised tokens of the whole window, so the window steps on the
gradient of (its token losses summed) / (its supervised tokens): a long target weighs by its
tokens, not as one item. A micro-batch whose loss or any adapter gradient is non-finite is left
out of the sum and the denominator shrinks to the tokens kept; it is named (with the first bad
parameter) and the rest of the window still trains. Every item is seen.

Finite checks, norms and losses stay on the device: the host reads once per window (every
micro-step's figures and the decision to step) and once at the end, never per tensor. A window
with a non-finite micro-batch keeps a copy of the adapter and optimiser state it was computed
on, so its items can be bisected on exactly those weights afterwards (bisect.locate_window).
"""

from __future__ import annotations

import bisect as _bisect
import contextlib
import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
import torch

from pipeline.train.data import IGNORE, Example, collate
from pipeline.train.faults import Fault
from pipeline.train.model import adapter_params, adapter_state

HOST_READS = [0]  # device -> host reads made through `host`; bench/train_speed.py counts them


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
    schedule: str = "cosine"  # decay after warmup: cosine | linear, down to floor * lr
    floor: float = 0.1
    keep_windows: int = 4  # non-finite windows whose weights and optimiser state are kept


def lr_factor(step: int, steps: int, warmup: float, schedule: str, floor: float = 0.1) -> float:
    """Linear warmup over round(warmup * steps) steps, then cosine or linear decay to floor."""
    warm = round(warmup * steps)
    if step < warm:
        return (step + 1) / (warm + 1)
    t = (step - warm) / max(1, steps - warm - 1)  # 0 on the first decayed step, 1 on the last
    shape = 0.5 * (1 + math.cos(math.pi * t)) if schedule == "cosine" else 1 - t
    return floor + (1 - floor) * shape


def host(t: torch.Tensor) -> list[float]:
    """The one way figures leave the device in the loop: one read, counted."""
    HOST_READS[0] += 1
    return t.detach().to("cpu", torch.float64).tolist()


def autocast(device: str, fp32: bool = False) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA (unless fp32), plain fp32 elsewhere."""
    if device.startswith("cuda") and not fp32:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def token_sums(
    model: Any, batch: list[Example], pad_id: int, device: str, pad_to: int = 1, fp32: bool = False
) -> torch.Tensor:
    """Per item, the sum of its token losses over the supervised (shifted) positions."""
    enc = collate(batch, pad_id, pad_to, device)
    with autocast(device, fp32):
        logits = model(input_ids=enc["input_ids"], attention_mask=enc.get("attention_mask")).logits
    logits = logits[:, :-1].float()
    labels = enc["labels"][:, 1:]
    tok = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]),
        labels.reshape(-1),
        ignore_index=IGNORE,
        reduction="none",
    ).view(labels.shape)
    return tok.sum(1)


class Flat:
    """The adapter's gradients as one flat tensor: one finite check and one norm per step."""

    def __init__(self, model: Any) -> None:
        self.params = adapter_params(model)
        self.names = list(self.params)
        sizes = [p.numel() for p in self.params.values()]
        self.starts = [sum(sizes[:i]) for i in range(len(sizes))]
        self.size = sum(sizes)

    def grads(self) -> torch.Tensor:
        return torch.cat(
            [
                (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).float()
                for p in self.params.values()
            ]
        )

    def set_grads(self, flat: torch.Tensor) -> None:
        for s, p in zip(self.starts, self.params.values(), strict=True):
            p.grad = flat[s : s + p.numel()].view_as(p).to(p.dtype)

    def clear(self) -> None:
        """Drop the adapter's gradients (only it has any): model.zero_grad walks every module,
        a measurable cost once per micro-step on a small model."""
        for p in self.params.values():
            p.grad = None

    def name_at(self, index: int) -> str:
        return self.names[_bisect.bisect_right(self.starts, index) - 1]


def micro_step(
    model: Any,
    batch: list[Example],
    pad_id: int,
    device: str,
    flat: Flat,
    denom: int,
    fault: Fault | None = None,
    pad_to: int = 1,
    fp32: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Forward + backward of sum(token losses) / denom, nothing read to the host.

    Returns (flat gradient, ok, figures): figures are the items' token-loss sums, then
    loss finite, all finite, the flat index of the first non-finite gradient, gradient norm.
    """
    flat.clear()
    sums = token_sums(model, batch, pad_id, device, pad_to, fp32)
    hit = fault([e.id for e in batch]) if fault is not None else False
    if hit == "forward":
        sums = sums * float("nan")
    loss = sums.sum() / max(denom, 1)
    if hit and hit != "forward":
        loss = _PoisonGrad.apply(loss)
    loss.backward()
    g = flat.grads()
    fin = torch.isfinite(g)
    loss_ok = torch.isfinite(sums).all()
    ok = fin.all() & loss_ok
    first = (~fin).to(torch.int32).argmax()
    norm = torch.linalg.vector_norm(g.double())
    figures = torch.cat([sums.double(), torch.stack([loss_ok, ok]).double(), first.double()[None]])
    return g, ok, torch.cat([figures, norm[None]])


def probe_pass(
    model: Any,
    batch: list[Example],
    pad_id: int,
    device: str,
    fault: Fault | None = None,
    pad_to: int = 1,
    fp32: bool = False,
) -> float:
    """One forward+backward, no optimiser: the gradient norm of the batch's token-mean loss,
    NaN when the loss or any gradient is not finite."""
    tokens = sum(e.supervised_tokens for e in batch)
    _, _, fig = micro_step(model, batch, pad_id, device, Flat(model), tokens, fault, pad_to, fp32)
    vals = host(fig)
    model.zero_grad(set_to_none=True)
    return vals[-1] if vals[-3] == 1.0 else math.nan  # figures end: loss ok, ok, first, norm


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


def _norms(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(list(tensors))).double())


def count_windows(items: int, cfg: LoopConfig) -> int:
    """The optimizer steps `train` takes over `items` examples: windows of grad_accum
    micro-batches of micro_batch items, the last of each possibly short."""
    micro = -(-items // cfg.micro_batch)
    return -(-micro // cfg.grad_accum)


def train(
    model: Any,
    examples: list[Example],
    pad_id: int,
    cfg: LoopConfig,
    device: str = "cpu",
    fault: Fault | None = None,
    on_step: Callable[[int, int, dict[str, Any]], None] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame, list[dict[str, Any]]]:
    """Run every example once; return (items, steps, kept non-finite windows). `on_step(done,
    windows, row)` after each window, with its row of the steps table (figures already read:
    no extra host read)."""
    flat = Flat(model)
    params = list(flat.params.values())
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    micro = [examples[i : i + cfg.micro_batch] for i in range(0, len(examples), cfg.micro_batch)]
    windows = [micro[i : i + cfg.grad_accum] for i in range(0, len(micro), cfg.grad_accum)]
    items: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    weights: list[torch.Tensor] = []  # per step, on the device: adapter norm, update norm
    pos = 0
    model.train()
    for step, window in enumerate(windows):
        lr = cfg.lr * lr_factor(step, len(windows), cfg.warmup, cfg.schedule, cfg.floor)
        for group in opt.param_groups:
            group["lr"] = lr
        denom = sum(e.supervised_tokens for b in window for e in b)
        acc: torch.Tensor | None = None
        figs = []
        for batch in window:
            g, finite, fig = micro_step(model, batch, pad_id, device, flat, denom, fault)
            g = torch.where(finite, g, 0.0)
            acc = g if acc is None else acc.add_(g)
            figs.append(fig)
        assert acc is not None
        vals = host(torch.cat([*figs, torch.linalg.vector_norm(acc.double())[None]]))
        good_tokens = good = skipped = 0
        sums: list[float] = []
        bad_batches: list[int] = []
        at = 0
        for b_i, batch in enumerate(window):
            n = len(batch)
            per, (loss_ok, ok, first, gnorm) = vals[at : at + n], vals[at + n : at + n + 4]
            at += n + 4
            tokens = sum(e.supervised_tokens for e in batch)
            bad = "" if ok else ("loss" if not loss_ok else flat.name_at(int(first)))
            for e, s in zip(batch, per, strict=True):
                items.append(
                    {
                        "id": e.id,
                        "position": pos,
                        "step": step,
                        "loss": s / max(e.supervised_tokens, 1),
                        "grad_norm": gnorm * denom / max(tokens, 1) if ok else math.nan,
                        "loss_finite": math.isfinite(s),
                        "grad_finite": bool(ok),
                        "first_bad": bad,
                        "dropped": not ok,
                        "supervised_tokens": e.supervised_tokens,
                    }
                )
                pos += 1
            if ok:
                good += 1
                good_tokens += tokens
                sums.extend(per)
            else:
                skipped += n
                bad_batches.append(b_i)
        norm = vals[-1] * denom / good_tokens if good_tokens else math.nan
        if skipped and len(kept) < cfg.keep_windows:
            # the weights and optimiser state this window was computed on (it has not stepped)
            kept.append(
                {
                    "step": step,
                    "adapter": adapter_state(model),
                    "optimizer": copy.deepcopy(opt.state_dict()),
                    "batches": [[e.id for e in b] for b in window],
                    "bad": bad_batches,
                }
            )
        stepped = bool(good_tokens) and math.isfinite(norm)
        before = [p.detach().clone() for p in params]
        if stepped:  # the finite check comes before the clip and the step
            coef = denom / good_tokens * min(1.0, cfg.clip / (norm + 1e-6))
            flat.set_grads(acc.mul_(coef))
            opt.step()
        flat.clear()
        delta = _norms(torch._foreach_sub([p.detach() for p in params], before))  # one kernel
        weights.append(torch.stack([_norms(params), delta, _norms(before)]))
        steps.append(
            {
                "step": step,
                "loss": sum(sums) / good_tokens if good_tokens else math.nan,
                "grad_norm": norm,
                "lr": lr,
                "tokens": good_tokens,
                "items": sum(len(b) for b in window),
                "skipped": skipped,
                "stepped": stepped,
            }
        )
        if on_step:
            on_step(step + 1, len(windows), dict(steps[-1]))
    for row, (wnorm, moved, pnorm) in zip(steps, _rows(weights), strict=True):
        row["adapter_norm"] = wnorm
        row["adapter_rel_change"] = moved / pnorm if pnorm > 0 else math.nan
    return _item_table(items), pl.DataFrame(steps, schema=_STEP_SCHEMA), kept


def _rows(weights: list[torch.Tensor]) -> list[list[float]]:
    rows: Any = host(torch.stack(weights)) if weights else []
    return rows


def _item_table(items: list[dict[str, Any]]) -> pl.DataFrame:
    it = pl.DataFrame(items, schema=_ITEM_SCHEMA)
    return it.with_columns(
        pl.Series("loss_z", robust_z(it["loss"].to_list()), dtype=pl.Float64),
        pl.Series("grad_z", robust_z(it["grad_norm"].to_list()), dtype=pl.Float64),
    ).with_columns(
        ((pl.col("loss_z").abs() > 3.5) | (pl.col("grad_z").abs() > 3.5))
        .fill_null(False)
        .alias("outlier")
    )


@torch.no_grad()
def eval_loss(
    model: Any,
    examples: list[Example],
    pad_id: int,
    device: str,
    on_item: Callable[[], None] | None = None,
) -> float:
    """Token-mean loss over a fixed set (summed token losses / supervised tokens);
    `on_item()` after each item's forward (nothing read to the host)."""
    if not examples:
        return math.nan
    model.eval()
    parts = []
    for e in examples:
        parts.append(token_sums(model, [e], pad_id, device))
        if on_item:
            on_item()
    sums = torch.cat(parts)
    model.train()
    return float(host(sums.sum()[None])[0]) / max(sum(e.supervised_tokens for e in examples), 1)


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

"""After training: greedy generation on a sample, edit similarity next to copy-the-input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from rapidfuzz import fuzz

from pipeline.runs import atomic_path
from pipeline.train.data import prompt_ids, render_item
from pipeline.train.loop import autocast


@torch.no_grad()
def generate_eval(
    model: Any, tok: Any, items: list[dict[str, Any]], device: str, max_new_tokens: int = 128
) -> dict[str, Any]:
    """Edit similarity rapidfuzz.fuzz.ratio(pred.strip(), gold.strip()) vs `before` as pred."""
    model.eval()
    rows = []
    for it in items:
        prompt, _ = render_item(it)
        ids = torch.tensor([prompt_ids(tok, prompt)], device=device)
        with autocast(device):
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id,
            )
        new = out[0, ids.shape[1] :].tolist()
        if tok.eos_token_id in new:
            new = new[: new.index(tok.eos_token_id)]
        pred = tok.decode(new)
        gold = it.get("after") or ""
        rows.append(
            {
                "id": it["id"],
                "model": fuzz.ratio(pred.strip(), gold.strip()),
                "copy_input": fuzz.ratio((it.get("before") or "").strip(), gold.strip()),
            }
        )
    model.train()
    n = len(rows) or 1
    return {
        "items": len(rows),
        "max_new_tokens": max_new_tokens,
        "edit_similarity": round(sum(r["model"] for r in rows) / n, 2),
        "copy_input_baseline": round(sum(r["copy_input"] for r in rows) / n, 2),
        "per_item": rows,
    }


def plot(steps: Any, path: Path) -> None:
    """Loss and grad norm per step, one PNG; skipped steps marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    x = steps["step"].to_list()
    a.plot(x, steps["loss"].to_list(), marker=".")
    a.set_ylabel("loss")
    b.plot(x, steps["grad_norm"].to_list(), marker=".", color="tab:orange")
    b.set_ylabel("grad norm (pre-clip)")
    b.set_xlabel("optimizer step")
    for s, k in zip(x, steps["skipped"].to_list(), strict=True):
        if k:
            a.axvline(s, color="red", alpha=0.3)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)

"""Quality on held-out items: edit similarity on the changed region, next to two baselines.

The changed region of a text is what differs from `before` once their common prefix and suffix
are cut: the span of `before` it removes and the span it puts in. A prediction is scored on
those two spans against the target's, by Levenshtein distance over the target's span lengths:

    score = 100 * max(0, 1 - (lev(removed_pred, removed_gold) + lev(put_pred, put_gold))
                         / (len(removed_gold) + len(put_gold)))

so copying `before` (nothing removed, nothing put in) scores 0 on any real edit, rewriting
everything scores about 0 too, and the unchanged lines around the edit count for nothing. The
trained adapter is scored against copy-`before` and against the untrained base model (the
same greedy generation, run before the first step) on export's validation split, which
training never sees.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from rapidfuzz.distance import Levenshtein

from pipeline.runs import atomic_path
from pipeline.train.data import prompt_ids, render_item
from pipeline.train.loop import autocast


def changed(before: str, text: str) -> tuple[str, str]:
    """(removed from before, put in by text) after cutting their common prefix and suffix."""
    n = min(len(before), len(text))
    p = 0
    while p < n and before[p] == text[p]:
        p += 1
    s = 0
    while s < n - p and before[-1 - s] == text[-1 - s]:
        s += 1
    return before[p : len(before) - s], text[p : len(text) - s]


def region_score(before: str, pred: str, gold: str) -> float:
    """Edit similarity (0-100) of pred's changed region to gold's, both against `before`."""
    gr, gp = changed(before, gold)
    pr, pp = changed(before, pred)
    size = len(gr) + len(gp)
    if size == 0:  # gold changes nothing: only changing nothing is right
        return 100.0 if not (pr or pp) else 0.0
    dist = Levenshtein.distance(pr, gr) + Levenshtein.distance(pp, gp)
    return 100.0 * max(0.0, 1 - dist / size)


@torch.no_grad()
def generate(
    model: Any,
    tok: Any,
    items: list[dict[str, Any]],
    device: str,
    max_new_tokens: int = 128,
    on_item: Callable[[], None] | None = None,
) -> list[str]:
    """Greedy completions, cut at EOS; `on_item()` after each."""
    model.eval()
    out = []
    for it in items:
        prompt, _ = render_item(it)
        ids = torch.tensor([prompt_ids(tok, prompt)], device=device)
        with autocast(device):
            gen = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.pad_token_id,
            )
        new = gen[0, ids.shape[1] :].tolist()
        if tok.eos_token_id in new:
            new = new[: new.index(tok.eos_token_id)]
        out.append(tok.decode(new))
        if on_item:
            on_item()
    model.train()
    return out


def score(items: list[dict[str, Any]], preds: list[str], base: list[str]) -> dict[str, Any]:
    """Per item and mean changed-region similarity: trained model, base model, copy-before."""
    rows = []
    for it, p, b in zip(items, preds, base, strict=True):
        before, gold = (it.get("before") or "").strip("\n"), (it.get("after") or "").strip("\n")
        rows.append(
            {
                "id": it["id"],
                "model": region_score(before, p.strip("\n"), gold),
                "base_model": region_score(before, b.strip("\n"), gold),
                "copy_before": region_score(before, before, gold),
            }
        )
    n = len(rows) or 1
    mean = {
        k: round(sum(r[k] for r in rows) / n, 2) for k in ("model", "base_model", "copy_before")
    }
    return {"items": len(rows), **mean, "per_item": rows}


def gate(result: dict[str, Any] | None, asked: int) -> dict[str, Any]:
    """pass: the trained adapter beats both copy-before and the base model on the changed
    region of held-out items; fail otherwise; skipped when nothing was judged (and why)."""
    if asked == 0:
        return {"gate": "skipped", "gate_reason": "--eval-items 0: no held-out items judged"}
    if not result or not result["items"]:
        return {"gate": "skipped", "gate_reason": "export's validation split has no items"}
    m, b, c = result["model"], result["base_model"], result["copy_before"]
    ok = m > b and m > c
    verb = "beats" if ok else "does not beat"
    why = f"changed-region similarity {m} {verb} base model {b} and copy-before {c}"
    return {"gate": "pass" if ok else "fail", "gate_reason": f"{why} ({result['items']} items)"}


def plot(steps: Any, path: Path) -> None:
    """Loss and grad norm per step, one PNG; skipped steps marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    x = steps["step"].to_list()
    a.plot(x, steps["loss"].to_list(), marker=".")
    a.set_ylabel("loss (token mean)")
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

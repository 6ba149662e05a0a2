"""--probe-batch K: find the minimal set of items that is non-finite together, and re-run it.

Batches of K items are built in training order, as a production sampler would; each is run
forward+backward with no optimiser step. For a non-finite batch, delta debugging (ddmin)
shrinks it to a 1-minimal failing set, then a table of controlled re-runs says whether the
items fail alone, in either order, or only together.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pipeline.train.data import Example
from pipeline.train.loop import Fault, forward_backward


def ddmin(items: list[Any], fails: Callable[[list[Any]], bool]) -> list[Any]:
    """Zeller's delta debugging: a subset that still fails and fails without any one member."""
    n = 2
    while len(items) >= 2:
        size = math.ceil(len(items) / n)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        for c in chunks:
            if fails(c):
                items, n = c, 2
                break
        else:
            for i in range(len(chunks)):
                rest = [x for j, c in enumerate(chunks) if j != i for x in c]
                if fails(rest):
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    break
                n = min(len(items), n * 2)
    return items


def _fmt(norms: list[float]) -> str:
    bad = sum(1 for x in norms if not math.isfinite(x))
    if bad == len(norms):
        return "NaN every time" if len(norms) > 1 else "NaN"
    if bad:
        return f"NaN {bad} of {len(norms)}"
    return "finite" if len(norms) > 1 else f"{norms[0]:.3g}"


def probe(
    model: Any,
    examples: list[Example],
    k: int,
    pad_id: int,
    device: str = "cpu",
    fault: Fault | None = None,
    repeats: int = 5,
) -> dict[str, Any]:
    """Probe every K-batch; for each non-finite one, the minimal set and its re-run table."""

    def norm(batch: list[Example], **kw: Any) -> float:
        _, ok, _, g = forward_backward(model, batch, pad_id, device, fault, **kw)
        return g if ok else math.nan

    batches = [examples[i : i + k] for i in range(0, len(examples), k)]
    bad = [i for i, b in enumerate(batches) if not math.isfinite(norm(b))]
    ok_ids = {e.id for i, b in enumerate(batches) if i not in bad for e in b}
    unrelated = next((e for e in examples if e.id in ok_ids), None)
    culprits = []
    for i in bad:
        members = ddmin(batches[i], lambda s: not math.isfinite(norm(s)))
        rows = [
            {
                "condition": f"the set, {repeats} repeats",
                "grad_norm": _fmt([norm(members) for _ in range(repeats)]),
            }
        ]
        if len(members) > 1:
            for e in members:
                rows.append({"condition": f"{e.id} alone", "grad_norm": _fmt([norm([e])])})
            rows.append({"condition": "reversed order", "grad_norm": _fmt([norm(members[::-1])])})
        if unrelated is not None:
            with_u = [norm([e, unrelated]) for e in members]
            rows.append({"condition": "each with an unrelated item", "grad_norm": _fmt(with_u)})
        if device.startswith("cuda"):
            rows.extend(_cuda_rows(model, members, norm))
        culprits.append({"batch": i, "ids": [e.id for e in members], "table": rows})
    model.zero_grad(set_to_none=True)
    return {"k": k, "batches": len(batches), "non_finite_batches": bad, "culprits": culprits}


def _cuda_rows(model: Any, members: list[Example], norm: Callable[..., float]) -> list[dict]:
    """On CUDA: the set under fp32, padded to a multiple of 128, and each attention backend."""
    rows = [
        {"condition": "fp32 (no autocast)", "grad_norm": _fmt([norm(members, fp32=True)])},
        {
            "condition": "padded to a multiple of 128",
            "grad_norm": _fmt([norm(members, pad_to=128)]),
        },
    ]
    base = getattr(model.config, "_attn_implementation", None)
    for impl in ("eager", "sdpa", "flash_attention_2"):
        try:
            model.set_attn_implementation(impl)
        except (ImportError, ValueError, AttributeError) as e:
            rows.append({"condition": f"attention {impl}", "grad_norm": f"unavailable: {e}"[:80]})
            continue
        rows.append({"condition": f"attention {impl}", "grad_norm": _fmt([norm(members)])})
    if base:
        model.set_attn_implementation(base)
    return rows

"""Shrink a non-finite batch to the items that fail together, and re-run them under control.

`ddmin` (Zeller's delta debugging) shrinks a failing batch to a 1-minimal failing set; the
table then re-runs that set: repeated (NaN every time?), each member alone, in reversed order,
each member with an unrelated item, and on CUDA in fp32, padded, and under each attention
backend. `locate_window` does this inside a non-finite training window, on the adapter and
optimiser state that window was computed on. Every forward+backward is counted (`Passes`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from pipeline.train.data import Example
from pipeline.train.loop import Fault, probe_pass
from pipeline.train.model import adapter_state, as_fp32, load_adapter_state


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
                if len(chunks) > 2 and fails(rest):  # with two chunks, rest is the other chunk
                    items, n = rest, max(n - 1, 2)
                    break
            else:
                if n >= len(items):
                    break
                n = min(len(items), n * 2)
    return items


class Passes:
    """Forward+backward passes on one model, counted by phase; results cached per ordered set
    (a pass is deterministic on fixed weights, and ddmin asks for some sets twice)."""

    def __init__(self, model: Any, pad_id: int, device: str, fault: Fault | None = None) -> None:
        self.model, self.pad_id, self.device, self.fault = model, pad_id, device, fault
        self.count: Counter[str] = Counter()
        self.items = 0  # items forwarded, summed over passes
        self._cache: dict[tuple[str, ...], float] = {}

    def norm(self, batch: list[Example], phase: str, cache: bool = True, **kw: Any) -> float:
        key = tuple(e.id for e in batch)
        if cache and not kw and key in self._cache:
            return self._cache[key]
        self.count[phase] += 1
        self.items += len(batch)
        g = probe_pass(self.model, batch, self.pad_id, self.device, self.fault, **kw)
        if not kw:
            self._cache[key] = g
        return g

    def fails(self, phase: str) -> Callable[[list[Example]], bool]:
        return lambda s: not math.isfinite(self.norm(s, phase))

    def forget(self) -> None:
        """Weights changed: cached results no longer hold."""
        self._cache.clear()

    def cost(self, curated: int) -> dict[str, Any]:
        total = sum(self.count.values())
        return {
            "passes": total,
            **{k: self.count[k] for k in ("screen", "ddmin", "table", "cuda")},
            "items_forwarded": self.items,
            "curated_items": curated,
            "passes_per_item": round(total / curated, 4) if curated else None,
        }


def split_failing(batch: list[Example], run: Passes, limit: int = 4) -> list[list[Example]]:
    """The failing sets in a batch known to fail: ddmin, then again on what is left while
    that still fails (a batch can hold two culprit sets)."""
    sets: list[list[Example]] = []
    rest = batch
    while rest and len(sets) < limit:
        found = ddmin(rest, run.fails("ddmin"))
        sets.append(found)
        ids = {e.id for e in found}
        rest = [e for e in rest if e.id not in ids]
        if not rest or not run.fails("ddmin")(rest):
            break
    return sets


def _fmt(norms: list[float]) -> str:
    bad = sum(1 for x in norms if not math.isfinite(x))
    if bad == len(norms):
        return "NaN every time" if len(norms) > 1 else "NaN"
    if bad:
        return f"NaN {bad} of {len(norms)}"
    return "finite" if len(norms) > 1 else f"{norms[0]:.3g}"


def table(
    members: list[Example], run: Passes, unrelated: Example | None, repeats: int = 5
) -> list[dict[str, str]]:
    """The seed's table: the set repeated, each alone, reversed, each with an unrelated item."""

    def norm(batch: list[Example], **kw: Any) -> float:
        return run.norm(batch, "table", cache=False, **kw)

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
    if run.device.startswith("cuda"):
        rows.extend(diagnostic_rows(members, run))
    return rows


def diagnostic_rows(members: list[Example], run: Passes) -> list[dict[str, str]]:
    """The set with every weight in fp32 (no autocast), padded to a multiple of 128, and under
    each attention backend; run on CUDA by `table`, callable anywhere."""
    model = run.model

    def norm(**kw: Any) -> float:
        return run.norm(members, "cuda", cache=False, **kw)

    with as_fp32(model):
        fp32 = norm(fp32=True)
    rows = [
        {"condition": "fp32 weights, no autocast", "grad_norm": _fmt([fp32])},
        {"condition": "padded to a multiple of 128", "grad_norm": _fmt([norm(pad_to=128)])},
    ]
    base = getattr(model.config, "_attn_implementation", None)
    for impl in ("eager", "sdpa", "flash_attention_2"):
        try:
            model.set_attn_implementation(impl)
        except (ImportError, ValueError, AttributeError) as e:
            rows.append({"condition": f"attention {impl}", "grad_norm": f"unavailable: {e}"[:80]})
            continue
        rows.append({"condition": f"attention {impl}", "grad_norm": _fmt([norm()])})
    if base:
        model.set_attn_implementation(base)
    return rows


def locate_window(
    window: dict[str, Any],
    by_id: dict[str, Example],
    run: Passes,
    unrelated: Example | None,
    repeats: int = 5,
    on_batch: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """ddmin inside each non-finite micro-batch of a kept training window, on the adapter
    (and optimiser state, kept beside it) that the window was computed on; `on_batch()`
    after each."""
    end = adapter_state(run.model)
    load_adapter_state(run.model, window["adapter"])
    run.forget()
    out: list[dict[str, Any]] = []
    try:
        for b in window["bad"]:
            batch = [by_id[i] for i in window["batches"][b]]
            where = f"training window (step {window['step']}, micro-batch {b})"
            if not run.fails("screen")(batch):
                note = "finite when re-run on the saved weights"
                out.append({"ids": [e.id for e in batch], "found_by": where, "note": note})
            else:
                for members in split_failing(batch, run):
                    rows = table(members, run, unrelated, repeats)
                    out.append({"ids": [e.id for e in members], "found_by": where, "table": rows})
            if on_batch:
                on_batch()
    finally:
        load_adapter_state(run.model, end)
        run.forget()
    return out

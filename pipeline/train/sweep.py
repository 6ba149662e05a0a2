"""--sweep KEY=V1,V2: one training run per value, to tell where a non-finite item comes from.

The same non-finite positions under differing loss curves point at the data (the item at that
position); positions that move with the configuration point at the optimisation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from pipeline.config import SmokeConfig, updated
from pipeline.runs import StageFailed


class SmokeFailed(StageFailed):
    pass


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


def sweep_runs(
    train_df: pl.DataFrame,
    sc: SmokeConfig,
    sweep: tuple[str, list[Any]],
    device: str,
    fault: Any,
    fit: Callable[..., dict[str, Any]],
) -> dict[str, Any]:
    """One fresh training run per value of the swept key, classified."""
    key, values = sweep
    runs = []
    for v in values:
        r = fit(train_df, updated(sc, "--sweep", **{key: v}), device, fault)
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
    return {"key": key, "runs": runs, **classify_sweep(runs)}

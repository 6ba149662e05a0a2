"""The smoke-train summary on the terminal: one table of measures, one per culprit set."""

from __future__ import annotations

from typing import Any


def rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(measure, value) of a summary.json: the terminal's table and the report's."""
    pre = summary["preflight"]
    g = summary.get("generation") or {}
    m = summary["model"]
    probe = summary["probe"]
    out = [
        ("model", m["model"]),
        ("adapter", f"{m['tensors']} tensors, {m['dtypes']}"),
        ("device / dtype", f"{summary['device']} / {summary['dtype']}"),
        ("prompt template", m.get("template", "project")),
        (
            "data (train / validation / test)",
            "{train} / {validation} / {test}".format(**summary["data"]),
        ),
        ("items / trainable", f"{pre['items']} / {pre['trainable']}"),
        ("zero supervision", str(len(pre["zero_supervision"]))),
        ("truncated target", str(len(pre["truncated_target"]))),
        ("items seen / skipped", f"{summary['items_seen']} / {summary['items_skipped']}"),
        ("steps (optimizer)", f"{summary['steps']} ({summary['optimizer_steps']})"),
        (
            "loss (training sample)",
            f"{summary['eval_loss_before']:.4f} -> {summary['eval_loss_after']:.4f}",
        ),
        ("held-out loss after", f"{summary['held_out_loss_after']:.4f}"),
        ("outliers (robust z > 3.5)", str(len(summary["outliers"]))),
        ("tokens/s", str(summary["tokens_per_s"])),
        ("adapter saved", str(summary["adapter_saved"])),
    ]
    if summary.get("peak_gpu_memory_gib") is not None:
        out.append(("peak GPU memory (GiB)", str(summary["peak_gpu_memory_gib"])))
    if "model" in g:
        out.append(
            (
                "changed-region similarity (validation)",
                f"{g['model']} (base model {g['base_model']}, copy-before {g['copy_before']})",
            )
        )
    out.append(("gate", f"{summary['gate']}: {summary['gate_reason']}"))
    if summary.get("fault"):
        out.append(("fault injection (TEST ONLY)", summary["fault"]))
    if probe["k"] or probe["culprits"]:
        cost = probe["cost"]
        out.append(("culprit sets", str(probe["culprits"])))
        out.append(("found by", str(probe["found_by"])))
        out.append(
            (
                "probe cost",
                f"{cost['passes']} forward+backward passes "
                f"({cost['passes_per_item']} per curated item)",
            )
        )
    if summary["sweep"]:
        out.append(("sweep", f"{summary['sweep']['class']}: {summary['sweep']['reason']}"))
    out.append(("reason", summary["reason"]))
    return out


def print_summary(summary: dict[str, Any]) -> None:
    from rich.table import Table

    from pipeline.console import console

    t = Table(title=f"smoke-train: {summary['verdict']} (gate: {summary['gate']})")
    t.add_column("measure")
    t.add_column("value")
    for r in rows(summary):
        t.add_row(*r)
    console.print(t)
    for c in summary.get("culprit_tables", []):
        title = f"non-finite set ({c['found_by']}): {', '.join(c['ids'])}"
        ct = Table(title=title)
        ct.add_column("condition")
        ct.add_column("grad_norm")
        for r in c.get("table", []):
            ct.add_row(r["condition"], r["grad_norm"])
        if "note" in c:
            ct.add_row("re-run", c["note"])
        console.print(ct)

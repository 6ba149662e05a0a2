"""`editcurate report RUN_DIR`: report.md, report.html (self-contained), report.json, plots/.

Everything is recomputed from the run's Parquet outputs and manifests, so the report can be
rebuilt at any time and cannot drift from the data. report.json holds the figures; the md and
html are two renderings of the same figures (render.py). The figures of each section come from
their own module: overview (header, funnel, distributions), filtering (drop rules), dedup,
sampling (shapes and the sampling policies), kept (a seeded sample of the exported items).
Every path in the report is run-relative.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import polars as pl

from pipeline import storage
from pipeline.export.split import sharing_change
from pipeline.memory import release
from pipeline.parts import remove, scan_output
from pipeline.report.common import (
    NONE,
    ReportFailed,
    export_files,
    relativize,
    shown_value,
    tally,
)
from pipeline.report.dedup import dedup
from pipeline.report.filtering import filter_rules
from pipeline.report.kept import KEPT_SAMPLE, kept_sample
from pipeline.report.overview import (
    TOP,
    distributions,
    funnel,
    header,
    item_measures,
    with_measures,
)
from pipeline.report.recommend import recommend
from pipeline.report.render import env, render_html, render_md
from pipeline.report.sampling import (
    _collisions,
    read_shapes,
    sampling,
    shape_scopes,
    shapes,
    shapes_file,
    stage_order,
)
from pipeline.runs import read_manifest, stale_stages, write_bytes, write_json, write_text
from pipeline.stage import NAMES, SPLITS
from pipeline.storage import Location
from pipeline.train.summary import rows as summary_rows

__all__ = [
    "ReportFailed",
    "_collisions",
    "_env",
    "build",
    "sampling",
    "with_measures",
    "write_report",
]

# (anchor, title, sub-sections (anchor, title)): the table of contents and the section order.
TOC: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("header", "Header and funnel", (("funnel", "Funnel"),)),
    ("filter", "Filter drop rules", (("flags", "Flagged items (kept)"),)),
    ("distributions", "Distributions", ()),
    (
        "dedup",
        "Dedup",
        (
            ("largest-clusters", "Largest clusters"),
            ("oversized-buckets", "Oversized buckets"),
            ("borderline", "Borderline pairs"),
        ),
    ),
    ("shapes", "Shapes", ()),
    ("sampling", "Sampling options", ()),
    ("recommendation", "Recommendation", ()),
    ("splits", "Splits", ()),
    ("kept", "Kept sample", ()),
    ("smoke", "Smoke train", ()),
)
SECTIONS = (
    "header",
    "funnel",
    "filter",
    "distributions",
    "dedup",
    "shapes",
    "sampling",
    "recommendation",
    "splits",
    "kept",
    "smoke",
)


_env = env  # the name the single-module report had


SPLIT_BY = ("repo", "source", "language")  # the per-split breakdowns, one table each


def by_split(run_dir: Location, top: int = TOP) -> dict[str, list[dict[str, Any]]]:
    """{column: [{value, train, validation, test, total}]} over the exported items: the `top`
    values by total, then "(other)"; a null or blank value is NONE."""
    files = export_files(run_dir)
    if not files:
        return {c: [] for c in SPLIT_BY}
    out: dict[str, list[dict[str, Any]]] = {}
    for col in SPLIT_BY:
        # each split's rows counted per raw value as they are read; only values become text
        per = []
        for sp, f in files.items():
            lf = scan_output(f)
            if col not in lf.collect_schema().names():
                lf = lf.with_columns(pl.lit(NONE).alias(col))  # a value per row
            per.append(tally(lf, col).with_columns(split=pl.lit(sp)))
        df = pl.concat(per).select(shown_value(col).alias(col), "split", "items")
        n = df.group_by(col, "split").agg(pl.col("items").sum().alias("n"))
        wide = n.pivot("split", index=col, values="n")
        wide = wide.with_columns(
            *(
                pl.col(sp).fill_null(0) if sp in wide.columns else pl.lit(0).alias(sp)
                for sp in SPLITS
            )
        ).with_columns(total=pl.sum_horizontal(*SPLITS))
        wide = wide.sort(["total", col], descending=[True, False]).rename({col: "value"})
        rows = wide.select("value", *SPLITS, "total").to_dicts()
        if len(rows) > top:
            rest = {k: sum(r[k] for r in rows[top:]) for k in (*SPLITS, "total")}
            rows = rows[:top] + [{"value": "(other)", **rest}]
        out[col] = rows
    return out


def splits(run_dir: Location) -> dict[str, Any]:
    """The export stage's split table: items and groups per split, and groups that leak."""
    m = read_manifest(run_dir / "export")
    if not m:
        return {"present": False, "note": "export stage not run"}
    c = m["counts"]
    n = c["items_in"] or 1
    rows = [
        {
            "split": sp,
            "items": c[sp],
            "share": round(100.0 * c[sp] / n, 2),
            "groups": c[f"groups_{sp}"],
        }
        for sp in SPLITS
    ]
    return {
        "present": True,
        "rule": m.get("split_rule", ""),
        "rows": rows,
        "cross_split": m.get("cross_split", {}),
        "cross_split_groups": c["cross_split_groups"],
        # read from the export manifest, never re-counted here (verify re-counts it)
        "sharing_change": sharing_change(c, m),
        "names": list(SPLITS),
        "by": by_split(run_dir),
    }


def smoke(run_dir: Location, plot_dir: Location) -> dict[str, Any]:
    """smoke-train's summary as the terminal shows it (one table of measures, one table per
    non-finite set with the ids bisection found) and its loss and gradient plot, copied into
    the report's plots."""
    p = run_dir / "smoke" / "summary.json"
    if not p.exists():
        return {"present": False, "note": "smoke stage not run"}
    s = json.loads(p.read_text())
    plot = run_dir / "smoke" / "loss_grad.png"
    if plot.exists():
        if not storage.is_remote(plot_dir):
            plot_dir.mkdir(parents=True, exist_ok=True)
        write_bytes(plot_dir / plot.name, plot.read_bytes())
    return {
        "present": True,
        "verdict": s.get("verdict"),
        "reason": s.get("reason", ""),
        "rows": [{"measure": k, "value": v} for k, v in summary_rows(s)],
        "culprits": [
            {
                "ids": c.get("ids", []),
                "found_by": c.get("found_by", ""),
                "table": c.get("table", []),
            }
            for c in s.get("culprit_tables", [])
        ],
        "culprit_ids": sorted({i for ids in s.get("probe", {}).get("culprits", []) for i in ids}),
        "plot": plot.name if plot.exists() else None,
    }


def build(
    run_dir: Location,
    scope: str = "repo",
    batch: int = 16,
    seed: int = 0,
    window: int | None = None,
    kept: int = KEPT_SAMPLE,
    verified: tuple[list[str], list[str]] | None = None,
) -> dict[str, Any]:
    """All figures of the report (what report.json holds); plots go to run_dir/report/plots.

    window: the config's shapes.window, used for the spread row only when the shapes manifest
    does not record the window the stage ran with. kept: items in the kept sample (drawn with
    the export's seed, not `seed`, which orders the sampling options' batches). verified: what
    verify_run just said of the run, where the caller ran it (overview.funnel)."""
    stale = stale_stages(run_dir)
    if stale:  # its outputs are older than what should have made them: never reported
        first, why = next(iter(stale.items()))
        raise ReportFailed(
            f"report: stage {', '.join(stale)} stale ({first}: {why}); run `editcurate run` "
            "to bring it up to date"
        )
    manifests = {s: m for s in NAMES if (m := read_manifest(run_dir / s))}
    for s in ("ingest", "filter", "dedup"):
        if s not in manifests:
            raise ReportFailed(
                f"report: no {s} output in {run_dir / s}; run `editcurate run` first"
            )
    scopes = shape_scopes(run_dir)
    if scopes and scope not in scopes:
        have = ", ".join(sorted(scopes))
        raise ReportFailed(f"report: no shape scope {scope!r} in shapes.parquet (has: {have})")
    out = run_dir / "report" / "plots"
    remove(out)  # no stale plot from an earlier report

    # one section at a time, each handing back what it freed before the next: what a
    # section reads at once stays as freed pages otherwise, and the peaks stack (1.48 ->
    # 1.28 GiB at 10M items)
    def section(f: Callable[..., Any], *a: Any) -> Any:
        got = f(*a)
        release()
        return got

    meta: dict[str, Any] = {"header": header(run_dir, manifests), "splits": splits(run_dir)}
    meta["smoke"] = smoke(run_dir, out)
    data = {
        "filter": section(filter_rules, run_dir, manifests["filter"]),
        "dedup": section(dedup, run_dir, manifests["dedup"], out),
        "kept": section(kept_sample, run_dir, kept),
    }
    shp = read_shapes(run_dir)
    kept_items = run_dir / "dedup" / "kept.parquet"
    stage = stage_order(run_dir, batch, window) if shp is not None else None
    meta["funnel"] = section(funnel, run_dir, manifests, shp, verified)
    # no text: a corpus's code is read as a stream
    data["distributions"] = section(distributions, item_measures(kept_items), out)
    texts = scan_output(shapes_file(run_dir))
    data["shapes"] = section(shapes, shp, scan_output(kept_items), texts)
    samp = section(sampling, shp, scan_output(kept_items), scope, batch, seed, stage)
    data["sampling"] = samp
    w = (stage or {}).get("window") or window or batch
    data["recommendation"] = section(recommend, samp, shp, meta["smoke"], w)
    fig = {
        "sections": list(SECTIONS),
        "toc": [
            {"id": a, "n": n, "title": t, "sub": [{"id": x, "title": y} for x, y in sub]}
            for n, (a, t, sub) in enumerate(TOC, 1)
        ],
        **relativize(meta, run_dir, wide=True),
        **relativize(data, run_dir),
    }
    return {k: fig[k] for k in ("sections", "toc", *SECTIONS)}


def write_report(run_dir: Location, **kw: Any) -> dict[str, Location]:
    """Builds the figures and writes report.json, report.md, report.html; returns their paths."""
    fig = build(run_dir, **kw)
    d = run_dir / "report"
    plot_dir = d / "plots"
    write_json(d / "report.json", fig)
    write_text(d / "report.md", render_md(fig))
    images = {p.name: base64.b64encode(p.read_bytes()).decode() for p in plot_dir.glob("*.png")}
    write_text(d / "report.html", render_html(fig, images))
    return {"json": d / "report.json", "md": d / "report.md", "html": d / "report.html"}

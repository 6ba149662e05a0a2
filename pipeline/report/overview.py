"""Header, funnel and distributions: what went in, what each stage took out and why, and the
shape of what is left. Token counts use the code-aware tokenizer `\\w+|[^\\w\\s]` (the one
dedup shingles with), over comment + before + after + context."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import storage
from pipeline.filter import measures
from pipeline.parts import Parts, as_frame, scan_output
from pipeline.report import plots
from pipeline.report.common import counts, ranked, stats, tally
from pipeline.report.sampling import Shapes
from pipeline.runs import package_versions
from pipeline.schema import TOKEN_PATTERN
from pipeline.stage import SPLITS
from pipeline.storage import Location
from pipeline.verify import verify_run

TOP = 15  # rows in by-repo / by-language tables


def _reason_head(col: str) -> pl.Expr:
    return pl.col(col).str.split(":").list.first().str.strip_chars()


MEASURED = ["language", "repo", "author_is_bot"]  # read beside the text measured
MEASURES = ("tokens", "comment_chars", "lines_changed")  # held per item (their quantiles)
TALLIED = ("language", "repo", "file_type", "bot")  # counted per value as read


def _tokens(s: pl.Series) -> pl.Series:
    """TOKEN_PATTERN's matches per text, compiled where it can be (filter/measures.py);
    missing text stays missing."""
    counts = pl.Series(s.name, measures.tokens(s.fill_null("")), pl.Int64)
    return (
        counts
        if not s.has_nulls()
        else pl.select(pl.when(s.is_null()).then(None).otherwise(counts)).to_series()
    )


def with_measures(items: pl.LazyFrame) -> pl.LazyFrame:
    """Adds tokens, comment_chars, lines_changed, file_type, bot (the distribution columns)."""
    text = pl.concat_str(["comment", "before", "after", "context"], separator="\n")
    name = pl.col("path").str.split("/").list.last()
    ext = name.str.extract(r"(\.[^.]+)$", 1)
    return items.with_columns(
        tokens=text.map_batches(_tokens, return_dtype=pl.Int64, is_elementwise=True),
        comment_chars=pl.col("comment").str.len_chars().cast(pl.Int64),
        lines_changed=(pl.col("lines_removed") + pl.col("lines_added")).cast(pl.Int64),
        file_type=pl.when(ext.is_not_null())
        .then(ext.str.to_lowercase())
        .when(name == "")
        .then(pl.lit("(no path)"))
        .otherwise(name),
        bot=pl.when(pl.col("author_is_bot")).then(pl.lit("bot")).otherwise(pl.lit("human")),
    )


MEASURE_BATCH = 1 << 16  # rows of text measured at once
# what with_measures reads
MEASURE_INPUTS = ("comment", "before", "after", "context", "path", "lines_removed", "lines_added")


@dataclass
class Measures:
    """What the distributions section needs of the kept items: MEASURES per item, and a
    tally (value, items) of each TALLIED column, never a text per item."""

    values: pl.DataFrame
    tallies: dict[str, pl.DataFrame]


TALLY_MERGE = 64  # batches whose tallies are added up at once (a repo per item otherwise)


def item_measures(path: Location) -> Measures:
    """The kept items' Measures, never their text: the text is read MEASURE_BATCH rows at a
    time (a corpus's code need not fit in memory; polars' streaming engine held most of it at
    once, 700 MiB for 741k items)."""
    parts = Parts(path)
    read = [c for c in parts.schema_arrow.names if c in {*MEASURED, *MEASURE_INPUTS}]
    cols = [pl.col(c).cast(pl.Int32) for c in MEASURES] + list(TALLIED)
    empty = as_frame(parts.schema_arrow.empty_table().select(read))
    first = with_measures(empty.lazy()).select(cols).collect()  # the types, with no rows
    values = [first.select(MEASURES)]
    tallies = {c: tally(first, c) for c in TALLIED}
    for k, b in enumerate(parts.iter_batches(MEASURE_BATCH, read, exact=False), 1):
        f = with_measures(as_frame(b).lazy()).select(cols).collect()
        values.append(f.select(MEASURES))
        for c in TALLIED:
            t = pl.concat([tallies[c], tally(f, c)])
            tallies[c] = t.group_by(c).agg(pl.col("items").sum()) if k % TALLY_MERGE == 0 else t
    return Measures(pl.concat(values, rechunk=True), tallies)


def header(run_dir: Location, manifests: dict[str, dict]) -> dict[str, Any]:
    ing = manifests["ingest"]
    srcs = ing.get("conservation", {}).get("sources", {})
    sources = [
        {
            "name": name,
            "kind": srcs.get(name, {}).get("kind", ""),
            "records": srcs.get(name, {}).get("records"),
            "fingerprint": fp,
        }
        for name, fp in sorted(ing.get("inputs", {}).items())
    ]
    versions = package_versions()
    for extra in ("jinja2", "matplotlib"):
        try:
            versions[extra] = metadata.version(extra)
        except metadata.PackageNotFoundError:
            versions[extra] = "not installed"
    return {
        "run": run_dir.resolve().name,
        "why": why_command(run_dir),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "sources": sources,
        "config_fingerprints": sorted(
            {m.get("config_fingerprint", "") for m in manifests.values()}
        ),
        "stages": [
            {
                "stage": s,
                "fingerprint": m.get("fingerprint", ""),
                "config_fingerprint": m.get("config_fingerprint", ""),
                "started_at": m.get("started_at", ""),
            }
            for s, m in manifests.items()
        ],
        "versions": versions,
    }


def funnel(
    run_dir: Location,
    manifests: dict[str, dict],
    shp: Shapes | None,
    verified: tuple[list[str], list[str]] | None = None,
) -> dict[str, Any]:
    """Items per stage and per reason; conservation re-checked with verify_run, unless the
    caller has just run it (`verified`: its problems and checks passed; `run` verifies before
    it reports, and verifying hashes every output again: 3 s at 1M items). `shp`: the shapes
    rows (sampling.read_shapes)."""
    stages: list[dict[str, Any]] = []
    reasons: list[dict[str, Any]] = []
    ic = manifests["ingest"]["counts"]
    stages.append(
        {
            "stage": "ingest",
            "in": ic["records_in"],
            "out": ic["items_out"],
            "unit_in": "records",
            "left": ic["records_in"] - ic["errors_out"] - ic["skipped_out"],
        }
    )
    errs = scan_output(run_dir / "ingest" / "errors.parquet")
    e = errs.select("severity", head=_reason_head("reason")).group_by("severity", "head").len("n")
    for r in e.sort(["n", "head"], descending=[True, False]).collect().iter_rows(named=True):
        reasons.append(
            {"stage": "ingest", "reason": f"{r['severity']}: {r['head']}", "items": r["n"]}
        )
    if "filter" in manifests:
        fc = manifests["filter"]["counts"]
        stages.append({"stage": "filter", "in": fc["items_in"], "out": fc["kept"]})
        rej = scan_output(run_dir / "filter" / "rejected.parquet")
        for r in counts(rej, "rule"):
            reasons.append({"stage": "filter", "reason": f"rule {r['value']}", "items": r["items"]})
    if "dedup" in manifests:
        dc = manifests["dedup"]["counts"]
        stages.append({"stage": "dedup", "in": dc["items_in"], "out": dc["kept"]})
        rem = scan_output(run_dir / "dedup" / "removed.parquet")
        names = {
            "near": "near-duplicate",
            "same_content": "exact duplicate (same content)",
            "same_id": "exact duplicate (same id)",
            "near_indexed": "near-duplicate of an earlier run's item",
            "same_content_indexed": "exact duplicate of an earlier run's item (same content)",
            "same_id_indexed": "exact duplicate of an earlier run's item (same id)",
        }
        for r in counts(rem, "kind"):
            reasons.append(
                {"stage": "dedup", "reason": names.get(r["value"], r["value"]), "items": r["items"]}
            )
    if "decontaminate" in manifests:
        xc = manifests["decontaminate"]["counts"]
        stages.append({"stage": "decontaminate", "in": xc["items_in"], "out": xc["kept"]})
        rem = scan_output(run_dir / "decontaminate" / "removed.parquet")
        for r in counts(rem, "benchmark_source"):
            reasons.append(
                {
                    "stage": "decontaminate",
                    "reason": f"duplicates an item of benchmark {r['value']}",
                    "items": r["items"],
                }
            )
    sh = run_dir / "shapes"
    if "shapes" in manifests and (sh / "kept.parquet").exists():
        kept = scan_output(sh / "kept.parquet").select(pl.len()).collect().item()
        rem = scan_output(sh / "removed.parquet")
        removed = rem.select(pl.len()).collect().item()
        stages.append({"stage": "shapes", "in": kept + removed, "out": kept})
        have = rem.collect_schema().names()
        col = next((c for c in ("reason", "kind", "scope") if c in have), None)
        if col:
            for r in counts(rem, col):
                reasons.append(
                    {
                        "stage": "shapes",
                        "reason": f"shape group ({r['value']})",
                        "items": r["items"],
                    }
                )
        elif removed:
            reasons.append({"stage": "shapes", "reason": "shape group", "items": removed})
    if shp is not None:
        policy = manifests.get("shapes", {}).get("policy", "annotate")
        shared = (
            shp.lazy().filter(pl.col("group_size") > 1).group_by("scope").len("n").sort("scope")
        ).collect()
        for r in shared.iter_rows(named=True):
            reasons.append(
                {
                    "stage": "shapes",
                    "items": r["n"],
                    "reason": f"share a shape group at scope {r['scope']} (policy {policy})",
                }
            )
    if "export" in manifests:  # every item it reads is in one split
        ec = manifests["export"]["counts"]
        out = sum(ec.get(s, 0) for s in SPLITS)
        stages.append({"stage": "export", "in": ec["items_in"], "out": out})
    for s in stages:
        s["removed"] = s["in"] - s["out"] if s["stage"] != "ingest" else s["in"] - s["left"]
    problems, passed = verified if verified is not None else verify_run(run_dir)
    return {
        "stages": stages,
        "reasons": reasons,
        "empty": empty_reason(stages, reasons),
        "conservation": {"ok": not problems, "problems": problems, "passed": passed},
    }


def empty_reason(stages: list[dict[str, Any]], reasons: list[dict[str, Any]]) -> str | None:
    """Why the curated corpus is empty (None when it is not): the stage that removed the last
    items and its largest reasons."""
    if not stages or stages[-1]["out"] > 0:
        return None
    last = next(s for s in stages if s["out"] == 0)
    if last["stage"] == "ingest" and last["in"] == 0:
        return "The curated corpus is empty: the sources held no records."
    why = [r for r in reasons if r["stage"] == last["stage"]][:3]
    because = "; ".join(f"{r['reason']}: {r['items']}" for r in why) or "no reason recorded"
    what = "record" if last["stage"] == "ingest" else "item"
    return (
        f"The curated corpus is empty: {last['stage']} removed every {what} it received "
        f"({last['in']}): {because}."
    )


def why_command(run_dir: Location) -> str:
    """`editcurate why RUN_DIR`, the run folder as the user reaches it from where the report
    was built (cwd-relative, else under ~), never the machine's absolute folder: RUN_DIR then."""
    if storage.is_remote(run_dir):
        return f"editcurate why {run_dir}"
    here, home, run = Path.cwd().resolve(), Path.home().resolve(), run_dir.resolve()
    if run.is_relative_to(here):
        where = str(run.relative_to(here)) or "."
    elif home != Path("/") and run.is_relative_to(home):
        where = "~/" + str(run.relative_to(home))
    else:
        return "editcurate why RUN_DIR"
    return "editcurate why " + (
        shlex.quote(where) if not where.startswith("~/") else "~/" + shlex.quote(where[2:])
    )


def distributions(measured: Measures, out: Location) -> dict[str, Any]:
    """The distributions of item_measures' Measures."""
    m = measured.values
    d: dict[str, Any] = {"items": m.height, "tokenizer": TOKEN_PATTERN}
    for col in MEASURES:
        d[col] = stats(m[col])
    d["plots"] = {}
    if m.height:
        for col, label in (
            ("tokens", "tokens per item (comment+before+after+context)"),
            ("comment_chars", "comment length (characters)"),
            ("lines_changed", "lines changed (removed + added)"),
        ):
            vals = m[col].to_numpy()  # an array: a list costs 36 bytes an item
            mx = int(m[col].max())  # type: ignore[arg-type]
            bins = [b - 0.5 for b in range(mx + 2)] if col == "lines_changed" and mx <= 80 else 30
            d["plots"][col] = plots.hist(
                vals,
                out / f"{col}.png",
                label,
                label,
                bins=bins,
                vline=d[col]["median"],
                log_y=col == "lines_changed",
                integer_x=True,
            )
    for col, key in (
        ("language", "by_language"),
        ("repo", "by_repo"),
        ("file_type", "by_file_type"),
        ("bot", "bot_vs_human"),
    ):
        d[key] = ranked(measured.tallies[col], col, TOP)
        if len(d[key]) > 1:  # one value is one full bar: the table says it
            top = [r for r in d[key] if r["value"] != "(other)"]
            d["plots"][key] = plots.bars(
                [r["value"] for r in top],
                [r["items"] for r in top],
                out / f"{key}.png",
                key.replace("_", " "),
                "items",
            )
    return d

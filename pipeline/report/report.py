"""`editcurate report RUN_DIR`: report.md, report.html (self-contained), report.json, plots/.

Everything is recomputed from the run's Parquet outputs and manifests, so the report can be
rebuilt at any time and cannot drift from the data. report.json holds the figures; the md and
html are two renderings of the same figures. Token counts use the code-aware tokenizer
`\\w+|[^\\w\\s]` (the one dedup shingles with), over comment + before + after + context.
"""

from __future__ import annotations

import base64
import difflib
import json
import shutil
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from jinja2 import Environment, FileSystemLoader, select_autoescape

from pipeline.report import plots
from pipeline.runs import StageFailed, package_versions, read_manifest, write_json
from pipeline.verify import verify_run

TOKEN_RE = r"\w+|[^\w\s]"
SECTIONS = (
    "header",
    "funnel",
    "distributions",
    "dedup",
    "shapes",
    "sampling",
    "splits",
    "smoke",
)
TEMPLATES = Path(__file__).parent / "templates"
TOP = 15  # rows in by-repo / by-language tables
CAPS = (1, 2, 4)


class ReportFailed(StageFailed):
    """report cannot run: the run folder lacks the stages it reads."""


def _pct(a: float, b: float) -> float:
    return round(100.0 * a / b, 2) if b else 0.0


def _reason_head(col: str) -> pl.Expr:
    return pl.col(col).str.split(":").list.first().str.strip_chars()


def _counts(df: pl.DataFrame, col: str, top: int | None = None) -> list[dict[str, Any]]:
    """[{value, items, share}] sorted by items desc then value, nulls shown as "(none)"."""
    if df.is_empty():
        return []
    c = (
        df.select(pl.col(col).cast(pl.String).fill_null("(none)").alias("value"))
        .group_by("value")
        .len("items")
        .sort(["items", "value"], descending=[True, False])
    )
    n = df.height
    rows = [{**r, "share": _pct(r["items"], n)} for r in c.iter_rows(named=True)]
    if top is not None and len(rows) > top:
        rest = sum(r["items"] for r in rows[top:])
        rows = rows[:top] + [{"value": "(other)", "items": rest, "share": _pct(rest, n)}]
    return rows


def _stats(s: pl.Series) -> dict[str, Any]:
    if s.len() == 0:
        return {"n": 0, "median": 0, "p95": 0, "max": 0, "mean": 0}
    return {
        "n": s.len(),
        "median": float(s.median()),
        "p95": float(s.quantile(0.95, interpolation="nearest")),
        "max": int(s.max()),
        "mean": round(float(s.mean()), 2),
    }


def with_measures(items: pl.DataFrame) -> pl.DataFrame:
    """Adds tokens, comment_chars, lines_changed, file_type, bot (the distribution columns)."""
    text = pl.concat_str(["comment", "before", "after", "context"], separator="\n")
    name = pl.col("path").str.split("/").list.last()
    ext = name.str.extract(r"(\.[^.]+)$", 1)
    return items.with_columns(
        tokens=text.str.count_matches(TOKEN_RE).cast(pl.Int64),
        comment_chars=pl.col("comment").str.len_chars().cast(pl.Int64),
        lines_changed=(pl.col("lines_removed") + pl.col("lines_added")).cast(pl.Int64),
        file_type=pl.when(ext.is_not_null())
        .then(ext.str.to_lowercase())
        .when(name == "")
        .then(pl.lit("(no path)"))
        .otherwise(name),
        bot=pl.when(pl.col("author_is_bot")).then(pl.lit("bot")).otherwise(pl.lit("human")),
    )


def _read(p: Path, columns: list[str] | None = None) -> pl.DataFrame | None:
    return pl.read_parquet(p, columns=columns) if p.exists() else None


# ---------------------------------------------------------------- sections


def header(run_dir: Path, manifests: dict[str, dict]) -> dict[str, Any]:
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
        "run": run_dir.name,
        "run_dir": str(run_dir),
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


def funnel(run_dir: Path, manifests: dict[str, dict]) -> dict[str, Any]:
    """Items per stage and per reason; conservation re-checked with verify_run."""
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
    errs = pl.read_parquet(run_dir / "ingest" / "errors.parquet", columns=["severity", "reason"])
    e = errs.with_columns(head=_reason_head("reason")).group_by("severity", "head").len("n")
    for r in e.sort(["n", "head"], descending=[True, False]).iter_rows(named=True):
        reasons.append(
            {"stage": "ingest", "reason": f"{r['severity']}: {r['head']}", "items": r["n"]}
        )
    if "filter" in manifests:
        fc = manifests["filter"]["counts"]
        stages.append({"stage": "filter", "in": fc["items_in"], "out": fc["kept"]})
        rej = pl.read_parquet(run_dir / "filter" / "rejected.parquet", columns=["rule"])
        for r in _counts(rej, "rule"):
            reasons.append({"stage": "filter", "reason": f"rule {r['value']}", "items": r["items"]})
    if "dedup" in manifests:
        dc = manifests["dedup"]["counts"]
        stages.append({"stage": "dedup", "in": dc["items_in"], "out": dc["kept"]})
        rem = pl.read_parquet(run_dir / "dedup" / "removed.parquet", columns=["kind"])
        names = {
            "near": "near-duplicate",
            "same_content": "exact duplicate (same content)",
            "same_id": "exact duplicate (same id)",
        }
        for r in _counts(rem, "kind"):
            reasons.append(
                {"stage": "dedup", "reason": names.get(r["value"], r["value"]), "items": r["items"]}
            )
    sh = run_dir / "shapes"
    if "shapes" in manifests and (sh / "kept.parquet").exists():
        kept = pl.scan_parquet(sh / "kept.parquet").select(pl.len()).collect().item()
        rem = pl.read_parquet(sh / "removed.parquet")
        stages.append({"stage": "shapes", "in": kept + rem.height, "out": kept})
        col = next((c for c in ("reason", "kind", "scope") if c in rem.columns), None)
        if col:
            for r in _counts(rem, col):
                reasons.append(
                    {
                        "stage": "shapes",
                        "reason": f"shape group ({r['value']})",
                        "items": r["items"],
                    }
                )
        elif rem.height:
            reasons.append({"stage": "shapes", "reason": "shape group", "items": rem.height})
    shp = read_shapes(run_dir)
    if shp is not None:
        shared = shp.filter(pl.col("group_size") > 1).group_by("scope").len("n").sort("scope")
        for r in shared.iter_rows(named=True):
            reasons.append(
                {
                    "stage": "shapes",
                    "items": r["n"],
                    "reason": f"share a shape group at scope {r['scope']} (annotated)",
                }
            )
    for s in stages:
        s["removed"] = s["in"] - s["out"] if s["stage"] != "ingest" else s["in"] - s["left"]
    problems, passed = verify_run(run_dir)
    return {
        "stages": stages,
        "reasons": reasons,
        "conservation": {"ok": not problems, "problems": problems, "passed": passed},
    }


def distributions(items: pl.DataFrame, out: Path) -> dict[str, Any]:
    m = with_measures(items)
    d: dict[str, Any] = {"items": m.height, "tokenizer": TOKEN_RE}
    for col in ("tokens", "comment_chars", "lines_changed"):
        d[col] = _stats(m[col])
    d["plots"] = {}
    if m.height:
        for col, label in (
            ("tokens", "tokens per item (comment+before+after+context)"),
            ("comment_chars", "comment length (characters)"),
            ("lines_changed", "lines changed (removed + added)"),
        ):
            vals = m[col].to_list()
            mx = max(vals)
            bins = [b - 0.5 for b in range(mx + 2)] if col == "lines_changed" and mx <= 80 else 30
            d["plots"][col] = plots.hist(
                vals,
                out / f"{col}.png",
                label,
                label,
                bins=bins,
                vline=d[col]["median"],
                log_y=col == "lines_changed",
            )
    for col, key in (
        ("language", "by_language"),
        ("repo", "by_repo"),
        ("file_type", "by_file_type"),
        ("bot", "bot_vs_human"),
    ):
        d[key] = _counts(m, col, TOP)
        if d[key]:
            top = [r for r in d[key] if r["value"] != "(other)"]
            d["plots"][key] = plots.bars(
                [r["value"] for r in top],
                [r["items"] for r in top],
                out / f"{key}.png",
                key.replace("_", " "),
                "items",
            )
    return d


def _diff(before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.split("\n"), after.split("\n"), "before", "after", lineterm="", n=2
    )
    return "\n".join(lines) or "(no change)"


def _member(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "repo": row["repo"],
        "path": row["path"],
        "comment": " ".join(row["comment"].split())[:300],
        "diff": _diff(row["before"], row["after"]),
    }


def dedup(run_dir: Path, manifest: dict, out: Path) -> dict[str, Any]:
    d = run_dir / "dedup"
    threshold = float(manifest.get("dedup_config", {}).get("threshold", 0.8))
    cols = ["id", "repo", "path", "before", "after", "comment"]
    pool = (
        pl.concat(
            [pl.read_parquet(d / f, columns=cols) for f in ("kept.parquet", "removed.parquet")]
        )
        .unique("id")
        .sort("id")
    )
    byid = {r["id"]: r for r in pool.iter_rows(named=True)}
    clusters = pl.read_parquet(d / "clusters.parquet")
    edges = pl.read_parquet(d / "edges.parquet")
    sizes = clusters.group_by("cluster_id").agg(pl.col("size").first()).sort("cluster_id")
    hist = sizes.group_by("size").len("clusters").sort("size")
    r: dict[str, Any] = {
        "threshold": threshold,
        "clusters": sizes.height,
        "cluster_sizes": [dict(x) for x in hist.iter_rows(named=True)],
        "edges": edges.height,
        "edges_at_threshold": int((edges["exact_j"] >= threshold).sum()),
        "edges_below": int((edges["exact_j"] < threshold).sum()),
        "plots": {},
    }
    if sizes.height:
        mx = int(sizes["size"].max())
        r["plots"]["cluster_sizes"] = plots.hist(
            sizes["size"].to_list(),
            out / "cluster_sizes.png",
            "cluster size (items)",
            "items in cluster",
            bins=[b + 0.5 for b in range(1, mx + 1)],
            log_y=True,
        )
    if edges.height:
        ej = edges["exact_j"]
        r["plots"]["jaccard"] = plots.jaccard(
            ej.filter(ej >= threshold).to_list(),
            ej.filter(ej < threshold).to_list(),
            threshold,
            out / "jaccard.png",
        )
    sweep = run_dir / "tune" / "sweep.csv"
    r["tune"] = None
    if sweep.exists():
        t = pl.read_csv(sweep)
        if "ngram" in t.columns:
            t = t.filter(pl.col("ngram") == t["ngram"].min())
        r["tune"] = [dict(x) for x in t.iter_rows(named=True)]
        r["plots"]["tune"] = plots.curve(
            t["threshold"].to_list(),
            {c: t[c].to_list() for c in ("pairs", "clusters", "items_removed")},
            out / "tune.png",
            "tune: duplicates at each threshold",
            "threshold",
            threshold,
        )
    largest = sizes.sort(["size", "cluster_id"], descending=[True, False]).head(10)
    r["largest"] = []
    for c in largest.iter_rows(named=True):
        mem = clusters.filter(pl.col("cluster_id") == c["cluster_id"]).sort(
            ["is_keeper", "j_to_keeper", "id"], descending=[True, True, False]
        )
        shown = [byid[i] for i in mem["id"].head(2).to_list() if i in byid]
        r["largest"].append(
            {
                "cluster_id": c["cluster_id"],
                "size": c["size"],
                "members": [_member(x) for x in shown],
            }
        )
    ob = _read(d / "oversized_buckets.parquet")
    r["oversized"] = (
        []
        if ob is None
        else [
            {"band": x["band"], "size": x["size"], "sample_ids": ", ".join(x["sample_ids"][:5])}
            for x in ob.sort(["size", "band"], descending=[True, False])
            .head(20)
            .iter_rows(named=True)
        ]
    )
    below = (
        edges.filter(pl.col("exact_j") < threshold)
        .sort(["exact_j", "a", "b"], descending=[True, False, False])
        .head(5)
    )
    r["borderline"] = [
        {
            "exact_j": round(x["exact_j"], 4),
            "est_j": round(x["est_j"], 4),
            "a": _member(byid[x["a"]]),
            "b": _member(byid[x["b"]]),
        }
        for x in below.iter_rows(named=True)
        if x["a"] in byid and x["b"] in byid
    ]
    return r


def read_shapes(run_dir: Path) -> pl.DataFrame | None:
    p = run_dir / "shapes" / "shapes.parquet"
    return pl.read_parquet(p) if p.exists() else None


def shapes(shp: pl.DataFrame | None, items: pl.DataFrame) -> dict[str, Any]:
    if shp is None:
        return {"present": False, "note": "shapes stage not run"}
    byid = {
        r["id"]: r
        for r in items.select("id", "repo", "path", "before", "after", "comment")
        .unique("id")
        .iter_rows(named=True)
    }
    per_scope = []
    largest = []
    order = {"change": 0, "repo": 1, "corpus": 2}
    for scope in sorted(shp["scope"].unique().to_list(), key=lambda x: (order.get(x, 9), x)):
        s = shp.filter(pl.col("scope") == scope)
        g = s.group_by("group_id").agg(
            pl.len().alias("n"),
            pl.col("shape_text").first(),
            pl.col("id").sort().head(2).alias("ids"),
            pl.col("digit_only").any().alias("digit_only"),
        )
        multi = g.filter(pl.col("n") > 1)
        per_scope.append(
            {
                "scope": scope,
                "items": s.height,
                "groups": g.height,
                "groups_2plus": multi.height,
                "items_sharing": int(multi["n"].sum() or 0),
                "share_sharing": _pct(int(multi["n"].sum() or 0), s.height),
                "digit_only_items": int(s["digit_only"].sum()),
                "digit_only_share": _pct(int(s["digit_only"].sum()), s.height),
            }
        )
        top = multi.sort(["n", "group_id"], descending=[True, False]).head(5)
        for x in top.iter_rows(named=True):
            largest.append(
                {
                    "scope": scope,
                    "group_id": str(x["group_id"]),
                    "size": x["n"],
                    "digit_only": bool(x["digit_only"]),
                    "shape_text": (x["shape_text"] or "")[:300],
                    "examples": [_member(byid[i]) for i in x["ids"] if i in byid],
                }
            )
    return {"present": True, "per_scope": per_scope, "largest": largest}


def _collisions(groups: np.ndarray, batch: int) -> int:
    """Batches (consecutive runs of `batch` items) holding two items of one group."""
    n = 0
    for k in range(0, len(groups), batch):
        b = groups[k : k + batch]
        n += int(len(np.unique(b)) < len(b))
    return n


def sampling(
    shp: pl.DataFrame | None,
    items: pl.DataFrame,
    scope: str = "repo",
    batch: int = 16,
    seed: int = 0,
) -> dict[str, Any]:
    """Each policy simulated over dedup's kept items with the shape groups at `scope`.

    cap k keeps k items per group (lowest ids, so the choice is order-independent); spread keeps
    all and orders them round-robin across groups. Collisions: batches of `batch` consecutive
    items (micro-batch 1 x accumulation 16 = one optimizer step) with two members of one group,
    under a seeded random order (spread: its own order).
    """
    if shp is None:
        return {"present": False, "note": "shapes stage not run"}
    g = shp.filter(pl.col("scope") == scope).select("id", pl.col("group_id").cast(pl.String))
    base = items.select("id", "language", "repo", "author_is_bot").join(
        g.unique("id"), on="id", how="left"
    )
    base = base.with_columns(pl.col("group_id").fill_null("solo:" + pl.col("id")))
    base = base.sort("id").with_columns(rank=pl.int_range(pl.len()).over("group_id"))
    rng = np.random.default_rng(seed)
    langs = [r["value"] for r in _counts(base, "language", 6) if r["value"] != "(other)"]
    repos = [r["value"] for r in _counts(base, "repo", 6) if r["value"] != "(other)"]
    policies = (
        [("no shape dedup", base)]
        + [(f"cap k={k}", base.filter(pl.col("rank") < k)) for k in CAPS]
        + [("spread", base)]
    )
    rows = []
    for name, df in policies:
        if name == "spread":
            key = pl.Series(rng.random(df.height))
            order = df.with_columns(r=key).sort(["rank", "r"])
            groups = order["group_id"].to_numpy()
        else:
            groups = df["group_id"].to_numpy()[rng.permutation(df.height)]
        row = {
            "policy": name,
            "items": df.height,
            "share_of_corpus": _pct(df.height, base.height),
            "bot_share": _pct(int(df["author_is_bot"].fill_null(False).sum()), df.height),
            "batches": -(-df.height // batch) if df.height else 0,
            "batches_with_shape_twins": _collisions(groups, batch),
            "language_kept": {
                v: _pct(
                    df.filter(pl.col("language") == v).height,
                    base.filter(pl.col("language") == v).height,
                )
                for v in langs
            },
            "repo_kept": {
                v: _pct(
                    df.filter(pl.col("repo") == v).height, base.filter(pl.col("repo") == v).height
                )
                for v in repos
            },
        }
        rows.append(row)
    return {
        "present": True,
        "scope": scope,
        "batch": batch,
        "seed": seed,
        "languages": langs,
        "repos": repos,
        "policies": rows,
    }


def splits(run_dir: Path) -> dict[str, Any]:
    """The export stage's split table: items and groups per split, and groups that leak."""
    m = read_manifest(run_dir / "export")
    if not m:
        return {"present": False, "note": "export stage not run"}
    c = m["counts"]
    n = c["items_in"] or 1
    rows = [
        {"split": sp, "items": c[sp], "share": _pct(c[sp], n), "groups": c[f"groups_{sp}"]}
        for sp in ("train", "validation", "test")
    ]
    return {
        "present": True,
        "rule": m.get("split_rule", ""),
        "rows": rows,
        "cross_split": m.get("cross_split", {}),
        "cross_split_groups": c["cross_split_groups"],
    }


def smoke(run_dir: Path) -> dict[str, Any]:
    p = run_dir / "smoke" / "summary.json"
    if not p.exists():
        return {"present": False, "note": "smoke stage not run"}
    s = json.loads(p.read_text())
    c = run_dir / "smoke" / "culprits.json"
    return {
        "present": True,
        "verdict": s.get("verdict"),
        "skipped_steps": s.get("skipped_steps"),
        "summary": s,
        "culprits": json.loads(c.read_text()) if c.exists() else None,
    }


# ---------------------------------------------------------------- build and render


def build(run_dir: Path, scope: str = "repo", batch: int = 16, seed: int = 0) -> dict[str, Any]:
    """All figures of the report (what report.json holds); plots go to run_dir/report/plots."""
    manifests = {
        s: m for s in ("ingest", "filter", "dedup", "shapes") if (m := read_manifest(run_dir / s))
    }
    for s in ("ingest", "filter", "dedup"):
        if s not in manifests:
            raise ReportFailed(
                f"report: no {s} output in {run_dir / s}; run `editcurate run` first"
            )
    shp = read_shapes(run_dir)
    if shp is not None and scope not in set(shp["scope"].unique()):
        have = ", ".join(sorted(shp["scope"].unique()))
        raise ReportFailed(f"report: no shape scope {scope!r} in shapes.parquet (has: {have})")
    out = run_dir / "report" / "plots"
    shutil.rmtree(out, ignore_errors=True)  # no stale plot from an earlier report
    items = pl.read_parquet(run_dir / "dedup" / "kept.parquet")
    return {
        "sections": list(SECTIONS),
        "header": header(run_dir, manifests),
        "funnel": funnel(run_dir, manifests),
        "distributions": distributions(items, out),
        "dedup": dedup(run_dir, manifests["dedup"], out),
        "shapes": shapes(shp, items),
        "sampling": sampling(shp, items, scope, batch, seed),
        "splits": splits(run_dir),
        "smoke": smoke(run_dir),
    }


def _env(autoescape: bool) -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=select_autoescape(["html"]) if autoescape else False,
        keep_trailing_newline=True,
    )
    env.filters["cell"] = lambda v: str(v).replace("|", "\\|").replace("\n", " ")
    return env


def write_report(run_dir: Path, **kw: Any) -> dict[str, Path]:
    """Builds the figures and writes report.json, report.md, report.html; returns their paths."""
    fig = build(run_dir, **kw)
    d = run_dir / "report"
    plot_dir = d / "plots"
    write_json(d / "report.json", fig)
    (d / "report.md").write_text(_env(False).get_template("report.md.j2").render(r=fig))
    images = {p.name: base64.b64encode(p.read_bytes()).decode() for p in plot_dir.glob("*.png")}
    html = _env(True).get_template("report.html.j2").render(r=fig, images=images)
    (d / "report.html").write_text(html)
    return {"json": d / "report.json", "md": d / "report.md", "html": d / "report.html"}

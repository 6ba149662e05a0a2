"""The export stage: shapes/kept.parquet -> train / validation / test, Parquet and a HF dataset.

Splits go by whole group, never by item. An item's group is the connected component of:
its id (exact duplicates share one), its dedup component (the connected component of
near-duplicate edges, wider than the star that chose its keeper), its shape group at
`export.scope`, its normalised edit (shapes' corpus-wide `edit` scope: the same before and
after once digits, versions, hashes and whitespace are normalised, in any file or repository)
and, with split_by = "repo", its repository. So a version bump in validation never has its
twin in train, and no normalised edit appears in two splits.

Split rules (export.split_by):
- ratio: groups in a seeded order (sha256 of seed and the group's smallest id) are laid end
  to end and cut at the ratios; a group goes where its midpoint falls, so each split's size is
  within half a group of its ratio, and large groups are as likely as small ones to be held out.
- repo: the same, with every repository one group.
- time: a group with any item created at or after `export.after` goes to test, whole; the
  rest are dealt to train and validation by their ratios. Items without a date count as before.

Outputs in RUN_DIR/export/: train/validation/test.parquet (input columns + export_group, and
prompt/completion with format = "sft"), hf/ (datasets.DatasetDict.save_to_disk), README.md.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, cast

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from rich.table import Table
from rich.text import Text

from pipeline.config import (
    EXPORT_FORMATS,
    EXPORT_SCOPES,
    SPLIT_BYS,
    Config,
    ExportConfig,
    iso_cutoff,
)
from pipeline.console import console
from pipeline.dedup import clusters as C
from pipeline.report.render import md_cell_code as code_cell
from pipeline.report.render import md_text
from pipeline.runs import (
    StageFailed,
    StageRun,
    code_version,
    input_fingerprint,
    require_output,
    stage_fingerprint,
    write_parquet,
)
from pipeline.template import render
from pipeline.verify import cross_split_groups

STAGE = "export"
SPLITS = ("train", "validation", "test")
SPLIT_BY = SPLIT_BYS  # the config's vocabulary (pipeline/config/models.py)
SCOPES = EXPORT_SCOPES
EDIT_SCOPE = "edit"  # shapes' corpus-wide normalised-edit groups: always kept in one split
FORMATS = EXPORT_FORMATS
INPUTS = {
    "shapes/kept.parquet": ("shapes", "kept.parquet"),
    "shapes/shapes.parquet": ("shapes", "shapes.parquet"),
    "dedup/clusters.parquet": ("dedup", "clusters.parquet"),
}


class ExportFailed(StageFailed):
    """The export stage cannot run: no shapes output (its config is checked at load)."""


def cutoff(after: str) -> datetime:
    t = iso_cutoff(after)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


# ------------------------------------------------------------------------ pure part


def _component_col(clusters: pl.DataFrame) -> str:
    """Dedup's connected component (runs before stars had none: the cluster)."""
    return "component_id" if "component_id" in clusters.columns else "cluster_id"


def groupings(
    items: pl.DataFrame, clusters: pl.DataFrame, shapes: pl.DataFrame, e: ExportConfig
) -> list[tuple[str, pl.DataFrame]]:
    """(name, id/key frame) of every relation that must not cross a split."""
    out = [("id", items.select("id", pl.col("id").alias("key")))]
    comp = _component_col(clusters)
    out.append(
        ("dedup component", clusters.select("id", pl.col(comp).cast(pl.String).alias("key")))
    )
    scopes = [e.scope] if e.scope not in ("none", EDIT_SCOPE) else []
    for scope in [*scopes, EDIT_SCOPE]:
        s = shapes.filter(pl.col("scope") == scope)
        out.append(
            (
                f"shape group ({scope})" if scope != EDIT_SCOPE else "normalised edit",
                s.select("id", pl.col("group_id").cast(pl.String).alias("key")),
            )
        )
    if e.split_by == "repo":
        out.append(("repo", items.select("id", pl.col("repo").alias("key"))))
    return out


def group_ids(ids: list[str], keyed: list[pl.DataFrame]) -> np.ndarray:
    """Component label of each of the sorted unique `ids` under all groupings: the index of
    the component's smallest id."""
    nodes = pl.DataFrame({"id": ids}, schema={"id": pl.String}).with_row_index("node")
    a, b = [], []
    for k in keyed:
        j = k.unique().join(nodes, on="id", how="inner")
        j = j.with_columns(first=pl.col("node").min().over("key"))
        a.append(j["first"].to_numpy().astype(np.int64))
        b.append(j["node"].to_numpy().astype(np.int64))
    ea = np.concatenate(a) if a else np.empty(0, np.int64)
    eb = np.concatenate(b) if b else np.empty(0, np.int64)
    return C.components(len(ids), ea, eb)


def _seeded(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}\0{key}".encode()).hexdigest()


def deal(sizes: list[int], keys: list[str], ratios: list[float], seed: int) -> list[int]:
    """Split index per group: groups laid end to end in a seeded order; a group goes to the
    split whose share of that line holds the group's midpoint. The order is random, so group
    size does not bias where a group goes; each boundary is off by at most half a group."""
    order = sorted(range(len(sizes)), key=lambda g: (_seeded(seed, keys[g]), keys[g]))
    total = sum(sizes) or 1
    bounds = np.cumsum(ratios) / sum(ratios)
    out = [0] * len(sizes)
    done = 0
    for g in order:
        mid = (done + sizes[g] / 2) / total
        out[g] = min(int(np.searchsorted(bounds, mid, side="right")), len(ratios) - 1)
        done += sizes[g]
    return out


def assign_splits(
    items: pl.DataFrame, clusters: pl.DataFrame, shapes: pl.DataFrame, e: ExportConfig
) -> pl.DataFrame:
    """id, export_group, split for each unique id of `items` (sorted by id)."""
    ids = sorted(set(items["id"].to_list()))
    keyed = [k for _, k in groupings(items, clusters, shapes, e)]
    label = group_ids(ids, keyed)
    df = pl.DataFrame(
        {"id": ids, "export_group": label.astype(np.int64)},
        schema={"id": pl.String, "export_group": pl.Int64},
    )
    g = df.group_by("export_group").agg(pl.len().alias("n"), pl.col("id").min().alias("key"))
    ratios = list(e.ratios)
    g = g.with_columns(late=pl.lit(False))
    if e.split_by == "time":
        t = items.select("id", "created_at").join(df, on="id")
        late = t.group_by("export_group").agg(
            (pl.col("created_at") >= cutoff(e.after)).fill_null(False).any().alias("late")
        )
        g = g.drop("late").join(late, on="export_group", how="left").fill_null(False)
        ratios = [ratios[0], ratios[1], 0.0]
        if ratios[0] + ratios[1] == 0:
            ratios = [1.0, 0.0, 0.0]
    g = g.sort("export_group")
    early = g.filter(~pl.col("late"))
    dealt = deal(early["n"].to_list(), early["key"].to_list(), ratios, e.seed)
    split = pl.concat(
        [
            early.select("export_group").with_columns(split=pl.Series(dealt, dtype=pl.Int64)),
            g.filter(pl.col("late")).select("export_group").with_columns(split=pl.lit(2, pl.Int64)),
        ]
    )
    names = pl.Series(SPLITS)
    split = split.with_columns(split=pl.col("split").map_elements(lambda i: names[i], pl.String))
    return df.join(split, on="export_group", how="left").sort("id")


def leakage(
    assigned: pl.DataFrame,
    items: pl.DataFrame,
    clusters: pl.DataFrame,
    shapes: pl.DataFrame,
    e: ExportConfig,
) -> dict[str, int]:
    """Groups spanning two or more splits, per grouping (all zero when the export is sound)."""
    splits = items.select("id").join(assigned.select("id", "split"), on="id")
    return {
        name: cross_split_groups(splits, k) for name, k in groupings(items, clusters, shapes, e)
    }


# ------------------------------------------------------------------------ stage I/O


def _path(cfg: Config, rel: str) -> Path:
    return cfg.run_dir / rel


def prepare(cfg: Config) -> StageRun:
    for rel, (stage, _) in INPUTS.items():
        require_output(_path(cfg, rel), stage, STAGE, ExportFailed)
    return StageRun(
        run_dir=cfg.run_dir,
        stage=STAGE,
        fingerprint=stage_fingerprint(STAGE, cfg.fingerprint(STAGE), code_version(STAGE)),
        config_fingerprint=cfg.fingerprint(),
        inputs={rel: input_fingerprint(_path(cfg, rel)) for rel in INPUTS},
    )


def _with_sft(t: pa.Table) -> pa.Table:
    cols = [t[c].to_pylist() for c in ("path", "comment", "context", "before", "after")]
    pc = [render(*row) for row in zip(*cols, strict=True)]
    t = t.append_column("prompt", pa.array([p for p, _ in pc], pa.string()))
    return t.append_column("completion", pa.array([c for _, c in pc], pa.string()))


def run(cfg: Config, sr: StageRun) -> dict[str, Any]:
    e = cfg.export
    sr.begin()
    table = pq.read_table(_path(cfg, "shapes/kept.parquet"))
    # a pa.Table always converts to a DataFrame (pyarrow is untyped, so the overload can't tell)
    items = cast(pl.DataFrame, pl.from_arrow(table))
    clusters = pl.read_parquet(_path(cfg, "dedup/clusters.parquet"))
    shapes = pl.read_parquet(
        _path(cfg, "shapes/shapes.parquet"), columns=["id", "scope", "group_id"]
    )
    assigned = assign_splits(items, clusters, shapes, e)
    cross = leakage(assigned, items, clusters, shapes, e)
    full = items.with_row_index("_row").join(assigned, on="id", how="left")
    full = full.sort(["id", "source", "source_ref", "_row"])
    counts: dict[str, Any] = {
        "items_in": items.height,
        "groups": assigned["export_group"].n_unique(),
    }
    tables = {}
    for name in SPLITS:
        rows = full.filter(pl.col("split") == name)
        t = table.take(pa.array(rows["_row"].to_numpy(), pa.int64()))
        t = t.append_column("export_group", pa.array(rows["export_group"].to_numpy(), pa.int64()))
        if e.format == "sft":
            t = _with_sft(t)
        write_parquet(t, sr.dir / f"{name}.parquet", sr.meta)
        sr.record_output(f"{name}.parquet", "terminal")
        tables[name] = t
        counts[name] = t.num_rows
        counts[f"groups_{name}"] = rows["export_group"].n_unique()
    counts["cross_split_groups"] = sum(cross.values())
    by_source = (
        full.group_by("source", "split").len().sort("source", "split").to_dicts()
        if items.height
        else []
    )
    extra = {
        "conservation": {
            "kind": "ids",
            "input": "../shapes/kept.parquet",
            "outputs": [f"{s}.parquet" for s in SPLITS],
        },
        "leakage": {
            "splits": {s: f"{s}.parquet" for s in SPLITS},
            "groupings": _manifest_groupings(e, _component_col(clusters)),
        },
        "split_by": e.split_by,
        "split_rule": split_rule(e),
        "ratios": list(e.ratios),
        "cross_split": cross,
        "by_source": by_source,
        "format": e.format,
    }
    save_hf(tables, sr.dir / "hf")
    sr.record_output("hf/dataset_dict.json", "aux")
    write_card(sr.dir / "README.md", counts, extra, cfg, sr)
    sr.record_output("README.md", "aux")
    sr.finish(counts, extra)
    return counts


def _manifest_groupings(e: ExportConfig, component: str) -> list[dict[str, str]]:
    out = [
        {"name": "id", "column": "id"},
        {"name": "dedup component", "input": "../dedup/clusters.parquet", "key": component},
    ]
    scopes = [e.scope] if e.scope not in ("none", EDIT_SCOPE) else []
    for scope in [*scopes, EDIT_SCOPE]:
        out.append(
            {
                "name": f"shape group ({scope})" if scope != EDIT_SCOPE else "normalised edit",
                "input": "../shapes/shapes.parquet",
                "key": "group_id",
                "scope": scope,
            }
        )
    if e.split_by == "repo":
        out.append({"name": "repo", "column": "repo"})
    return out


def split_rule(e: ExportConfig) -> str:
    shape = f", shape groups at scope {e.scope}" if e.scope not in ("none", EDIT_SCOPE) else ""
    whole = f"dedup components{shape}, normalised edits"
    r = "/".join(f"{x:g}" for x in e.ratios)
    if e.split_by == "time":
        return (
            f"time: groups with an item created at or after {e.after} -> test; the rest "
            f"train/validation by {e.ratios[0]:g}/{e.ratios[1]:g}, seed {e.seed}; whole {whole}"
        )
    by = "whole repositories" if e.split_by == "repo" else "whole groups"
    return f"{e.split_by}: {by} dealt by ratio {r} (train/validation/test), seed {e.seed}; " + (
        f"whole {whole}"
    )


def save_hf(tables: dict[str, pa.Table], dest: Path) -> None:
    """datasets.DatasetDict.save_to_disk into a temp folder renamed over `dest`."""
    import datasets
    from datasets.table import InMemoryTable

    dd = datasets.DatasetDict({k: datasets.Dataset(InMemoryTable(t)) for k, t in tables.items()})
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    datasets.disable_progress_bars()  # the stage prints its own summary
    try:
        # an empty split still gets its one (empty) shard: with none, load_from_disk fails
        dd.save_to_disk(str(tmp), num_shards={k: 1 for k, t in tables.items() if not t.num_rows})
    finally:
        datasets.enable_progress_bars()
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)


def write_card(
    path: Path, counts: dict[str, Any], extra: dict[str, Any], cfg: Config, sr: StageRun
) -> None:
    """The dataset card: counts, the split rule, sources and fingerprints."""
    n = max(counts["items_in"], 1)
    lines = [
        f"# editcurate export: {md_text(cfg.run.name)}",
        "",
        "Code-review edits (before -> after with the review comment), curated by editcurate",
        "(ingest, filter, dedup, shapes) and split leakage-free by whole group.",
        "",
        "## Splits",
        "",
        "| split | items | share | groups |",
        "|---|---:|---:|---:|",
    ]
    for s in SPLITS:
        lines.append(
            f"| {s} | {counts[s]} | {100 * counts[s] / n:.2f}% | {counts[f'groups_{s}']} |"
        )
    lines += [
        "",
        f"Split rule: {extra['split_rule']}.",
        f"Groups spanning two splits: {counts['cross_split_groups']}.",
        f"Format: {extra['format']}"
        + (
            " (prompt/completion from pipeline/template.py `render`)."
            if extra["format"] == "sft"
            else "."
        ),
        "",
        "## Sources",
        "",
        "| source | split | items |",
        "|---|---|---:|",
        *(f"| {code_cell(r['source'])} | {r['split']} | {r['len']} |" for r in extra["by_source"]),
        "",
        "## Provenance",
        "",
        f"- config fingerprint: `{sr.config_fingerprint}`",
        f"- export stage fingerprint: `{sr.fingerprint}`",
        *(f"- input `{k}`: `{v}`" for k, v in sorted(sr.inputs.items())),
        "",
        'Load with `datasets.load_from_disk("hf")` or',
        '`load_dataset("parquet", data_files={"train": "train.parquet", ...})`.',
        "",
    ]
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(lines))
    os.replace(tmp, path)


def print_summary(m: dict[str, Any] | None) -> None:
    """The split table, the rule, and the cross-split count."""
    if not m:
        return
    c = m["counts"]
    n = max(c["items_in"], 1)
    t = Table(title="export: splits", title_justify="left")
    for col in ("split", "items", "share", "target", "groups"):
        t.add_column(col, justify="left" if col == "split" else "right")
    for s, r in zip(SPLITS, m["ratios"], strict=True):
        t.add_row(s, str(c[s]), f"{100 * c[s] / n:.2f}%", f"{100 * r:.2f}%", str(c[f"groups_{s}"]))
    console.print(t)
    console.print(Text(f"export rule: {m['split_rule']}"))
    dev = max(abs(100 * c[s] / n - 100 * r) for s, r in zip(SPLITS, m["ratios"], strict=True))
    ratio = m.get("split_by") == "ratio" and c["items_in"] > 0
    off = f"; max deviation from ratios {dev:.2f} pp" if ratio else ""
    console.print(
        f"export: {c['items_in']} items in {c['groups']} groups -> "
        + ", ".join(f"{s} {c[s]} ({100 * c[s] / n:.2f}%)" for s in SPLITS)
        + f"{off}; cross-split groups {c['cross_split_groups']} "
        + "("
        + ", ".join(f"{k} {v}" for k, v in m["cross_split"].items())
        + ")"
    )

"""`explain()`: each row's path through the stages, with its cluster, shape groups and split."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

import polars as pl

from pipeline.stage import NAMES, SPLITS
from pipeline.storage import Location
from pipeline.why.groups import clusters, export_group_sizes, near_pairs, shape_groups
from pipeline.why.lookup import (
    ROW_KEY,
    item_fields,
    item_view,
    pick,
    read_stages,
    resolve,
    scan,
)

AUX = ("dedup/clusters", "shapes/shapes")  # keyed by id alone
BENCH = ["benchmark_source", "benchmark_ref", "j", "kind"]  # decontaminate/removed
Key = tuple[str, str, str]


def _plain(v: Any) -> Any:
    """JSON-ready values: datetimes as ISO text."""
    if isinstance(v, (datetime, date)):
        return v.isoformat()
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _rows_by_key(df: pl.DataFrame | None) -> dict[Key, dict[str, Any]]:
    if df is None:
        return {}
    return {(r["id"], r["source"], r["source_ref"]): r for r in df.iter_rows(named=True)}


def _collect(frames: dict[str, pl.LazyFrame | None]) -> dict[str, pl.DataFrame | None]:
    names = [k for k, v in frames.items() if v is not None]
    got = pl.collect_all([frames[k] for k in names]) if names else []  # type: ignore[misc]
    out: dict[str, pl.DataFrame | None] = dict.fromkeys(frames)
    out.update(zip(names, got, strict=True))
    return out


def explain(run_dir: Location, queries: list[str]) -> list[dict[str, Any]]:
    """One JSON-ready dict per query: the item, each row's path through the stages, its dedup
    cluster, shape groups and split. Stages that did not run are said so, never an error."""
    results = resolve(run_dir, queries)
    ids = sorted({r["id"] for r in results if r["status"] == "found"})
    if not ids:
        for r in results:
            r["run"] = str(run_dir)
        return results
    states, manifests = read_stages(run_dir)

    def rows_of(stage: str, name: str, cols: list[str]) -> pl.LazyFrame | None:
        if states[stage] != "done":
            return None
        lf = scan(run_dir, stage, name)
        return None if lf is None else pick(lf, ids, cols)

    frames: dict[str, pl.LazyFrame | None] = {
        "filter/kept": rows_of("filter", "kept", [*ROW_KEY, "flags"]),
        "filter/rejected": rows_of(
            "filter", "rejected", [*ROW_KEY, "rule", "reason", "rules", "flags"]
        ),
        "dedup/kept": rows_of("dedup", "kept", ROW_KEY),
        "dedup/removed": rows_of("dedup", "removed", [*ROW_KEY, "keeper_id", "j", "kind"]),
        "dedup/clusters": rows_of(
            "dedup",
            "clusters",
            ["id", "cluster_id", "size", "component_id", "is_keeper", "keeper_id", "j_to_keeper"]
            + ["kind", "exact_of"],
        ),
        "decontaminate/kept": rows_of("decontaminate", "kept", ROW_KEY),
        "decontaminate/removed": rows_of("decontaminate", "removed", [*ROW_KEY, *BENCH]),
        "shapes/kept": rows_of("shapes", "kept", [*ROW_KEY, "batch_order"]),
        "shapes/removed": rows_of(
            "shapes", "removed", [*ROW_KEY, "reason", "scope", "group_id", "keeper_id"]
        ),
        "shapes/shapes": rows_of(
            "shapes",
            "shapes",
            ["id", "scope", "shape_key", "shape_text", "digit_only", "group_id", "group_size"],
        ),
    }
    for s in SPLITS:
        frames[f"export/{s}"] = rows_of("export", s, [*ROW_KEY, "export_group"])
    got = _collect(frames)
    items = item_view(run_dir, ids)

    cluster, cluster_of = clusters(run_dir, got["dedup/clusters"])
    near: dict[str, dict[str, Any]] = {}
    if states["dedup"] == "done":
        near = near_pairs(run_dir, ids, manifests["dedup"], cluster_of)
    groups = shape_groups(run_dir, got["shapes/shapes"], manifests["shapes"])
    export_sizes = export_group_sizes(run_dir, got) if states["export"] == "done" else {}

    keepers = keeper_views(run_dir, got["dedup/removed"])

    by_id: dict[str, list[dict[str, Any]]] = {}
    if items is not None:
        for row in items.sort(["source", "source_ref"]).iter_rows(named=True):
            by_id.setdefault(row["id"], []).append(row)
    lookup = {k: _rows_by_key(v) for k, v in got.items() if k not in AUX}
    for r in results:
        r["run"] = str(run_dir)
        if r["status"] != "found":
            continue
        rows = by_id.get(r["id"], [])
        r["item"] = item_fields(rows[0]) if rows else {}
        keys = [(r["id"], x["source"], x["source_ref"]) for x in rows]
        if not rows:  # no ingest table: rows from whichever stage holds the id
            keys = sorted({k for t in lookup.values() for k in t if k[0] == r["id"]})
        r["rows"] = [
            _trail(key, x, states, lookup, export_sizes)
            for key, x in zip(keys, rows or [{}] * len(keys), strict=True)
        ]
        for row in r["rows"]:
            _with_keeper(r["id"], row["stages"].get("dedup", {}), keepers)
        r["dedup"] = {"stage": states["dedup"], **cluster.get(r["id"], {})}
        if r["id"] in near:
            r["dedup"]["near_pairs"] = near[r["id"]]
        r["shapes"] = {
            "stage": states["shapes"],
            "policy": manifests["shapes"].get("policy"),
            "scope": manifests["shapes"].get("scope"),
            "groups": groups.get(r["id"], []),
        }
    return [_plain(r) for r in results]


def keeper_views(run_dir: Location, removed: pl.DataFrame | None) -> dict[str, dict[str, Any]]:
    """The keepers of the dedup-removed rows asked about (other ids than their own): each
    keeper's item as shown (repo, path, one-line comment, before and after)."""
    if removed is None or removed.height == 0 or "keeper_id" not in removed.columns:
        return {}
    ids = removed.filter(pl.col("keeper_id").is_not_null() & (pl.col("keeper_id") != pl.col("id")))
    wanted = sorted(set(ids["keeper_id"].to_list()))
    view = item_view(run_dir, wanted) if wanted else None
    out: dict[str, dict[str, Any]] = {}
    if view is not None:
        for row in view.sort(["source", "source_ref"]).iter_rows(named=True):
            out.setdefault(row["id"], {"id": row["id"], **item_fields(row)})
    return out


def _with_keeper(item_id: str, d: dict[str, Any], keepers: dict[str, dict[str, Any]]) -> None:
    """A removed row's dedup decision gets its keeper's text (`keeper`), to read beside the
    item's own; a keeper that is no item of this run (an earlier run's) is said so."""
    k = d.get("keeper_id")
    if d.get("status") != "removed" or k is None or k == item_id:
        return
    if k in keepers:
        d["keeper"] = keepers[k]
    else:
        d["keeper_note"] = "the keeper is no item of this run (an earlier run's item)"


def _trail(
    key: Key,
    item: dict[str, Any],
    states: dict[str, str],
    t: dict[str, dict[Key, dict[str, Any]]],
    export_sizes: dict[int, int],
) -> dict[str, Any]:
    """One row's decisions, stage by stage, and where it ended up."""
    _, source, ref = key
    stages: dict[str, dict[str, Any]] = {}
    row = {
        "source": source,
        "source_ref": ref,
        "author": item.get("author"),
        "created_at": item.get("created_at"),
        "stages": stages,
    }
    stopped: str | None = None  # the stage the row left the pipeline at, or did not reach
    outcome = ""
    for st in NAMES:
        if st == "decontaminate" and states[st] == "not run":
            continue  # a run made before the stage existed
        if stopped is not None:
            stages[st] = {"status": "not reached", "stopped_at": stopped}
            continue
        if states[st] != "done":
            stages[st] = {"status": states[st]}
            stopped, outcome = st, outcome or "ingested"
            outcome = f"{outcome}; {st} {states[st]}"
            continue
        d: dict[str, Any] = {"status": "missing"}
        if st == "ingest":
            d, outcome = {"status": "item"}, "ingested"
        elif st == "filter":
            if key in t["filter/kept"]:
                d = {"status": "kept", "flags": t["filter/kept"][key].get("flags") or []}
                outcome = "kept by filter"
            elif key in t["filter/rejected"]:
                x = t["filter/rejected"][key]
                d = {"status": "rejected", **{k: x.get(k) for k in ("rule", "reason", "rules")}}
                d["flags"] = x.get("flags") or []
                outcome = f"rejected by filter (rule {x.get('rule')})"
        elif st == "dedup":
            if key in t["dedup/kept"]:
                d, outcome = {"status": "kept"}, "kept by dedup"
            elif key in t["dedup/removed"]:
                x = t["dedup/removed"][key]
                d = {"status": "removed", **{k: x.get(k) for k in ("kind", "keeper_id", "j")}}
                outcome = f"removed by dedup ({x.get('kind')} duplicate of {x.get('keeper_id')})"
        elif st == "decontaminate":
            if key in t["decontaminate/kept"]:
                d, outcome = {"status": "kept"}, "kept by decontaminate"
            elif key in t["decontaminate/removed"]:
                x = t["decontaminate/removed"][key]
                d = {"status": "removed", **{k: x.get(k) for k in BENCH}}
                outcome = (
                    f"removed by decontaminate ({x.get('kind')} of benchmark "
                    f"{x.get('benchmark_source')} {x.get('benchmark_ref')})"
                )
        elif st == "shapes":
            if key in t["shapes/kept"]:
                d, outcome = {"status": "kept"}, "kept by shapes"
                if t["shapes/kept"][key].get("batch_order") is not None:
                    d["batch_order"] = t["shapes/kept"][key]["batch_order"]
            elif key in t["shapes/removed"]:
                x = t["shapes/removed"][key]
                d = {"status": "removed"}
                d |= {k: x.get(k) for k in ("reason", "scope", "group_id", "keeper_id")}
                outcome = f"removed by shapes ({x.get('reason')}, keeper {x.get('keeper_id')})"
        else:  # export
            for s in SPLITS:
                if key in t[f"export/{s}"]:
                    g = t[f"export/{s}"][key].get("export_group")
                    d = {"status": s, "split": s, "export_group": g}
                    if g is not None and g in export_sizes:
                        d["export_group_size"] = export_sizes[g]
                    outcome = f"{s} split"
                    break
        if d["status"] == "missing":
            d["note"] = "in no output of this stage: run `editcurate verify`"
            outcome = f"missing from {st}"
        stages[st] = d
        if d["status"] in ("rejected", "removed", "missing"):
            stopped = st
    row["outcome"] = outcome
    return row

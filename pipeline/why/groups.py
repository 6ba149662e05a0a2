"""What an item is grouped with: its dedup cluster, near pairs, shape groups, export group."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.config import SHAPE_SCOPES
from pipeline.schema import with_change_j
from pipeline.stage import SPLITS
from pipeline.storage import Location
from pipeline.why.lookup import MAX_LISTED, columns, scan


def clusters(
    run_dir: Location, picked: pl.DataFrame | None
) -> tuple[dict[str, dict[str, Any]], dict[str, set[str]]]:
    """Per id in a dedup cluster: its cluster (id, size, component, keeper, members listed),
    and every member id of that cluster."""
    if picked is None or picked.height == 0:
        return {}, {}
    lf = scan(run_dir, "dedup", "clusters")
    assert lf is not None
    cids = picked["cluster_id"].unique().to_list()
    members = (
        lf.filter(pl.col("cluster_id").is_in(cids))
        .group_by("cluster_id", "id", "is_keeper", "kind", "j_to_keeper")
        .agg(pl.len().alias("rows"))
        .collect()
        .sort(
            ["cluster_id", "is_keeper", "j_to_keeper", "id", "kind"],
            descending=[False, True, True, False, False],
        )
    )
    listed: dict[int, list[dict[str, Any]]] = {}
    for m in members.iter_rows(named=True):
        listed.setdefault(m["cluster_id"], []).append(
            {k: m[k] for k in ("id", "kind", "j_to_keeper", "rows")}
        )
    out: dict[str, dict[str, Any]] = {}
    every_id: dict[str, set[str]] = {}
    for c in picked.sort("is_keeper", descending=True).iter_rows(named=True):
        if c["id"] in out:
            continue
        every = listed.get(c["cluster_id"], [])
        d = {
            "cluster_id": c["cluster_id"],
            "size": c["size"],
            "keeper_id": c["keeper_id"],
            "exact_of": c.get("exact_of"),
            "members": every[:MAX_LISTED],
            "members_not_listed": max(0, len(every) - MAX_LISTED),
        }
        if c.get("component_id") is not None:
            d["component_id"] = c["component_id"]
        out[c["id"]] = {"cluster": d}
        every_id[c["id"]] = {m["id"] for m in every}
    return out, every_id


def near_pairs(
    run_dir: Location, ids: list[str], manifest: dict[str, Any], cluster_of: dict[str, set[str]]
) -> dict[str, dict[str, Any]]:
    """Per id: how many verified pairs (edges.parquet, down to dedup's edge_floor) join it to
    its own cluster, and those that lead outside it (other id, exact J, change J, best
    first)."""
    lf = scan(run_dir, "dedup", "edges")
    if lf is None:
        return {}
    lf = with_change_j(lf.filter(pl.col("a").is_in(ids) | pl.col("b").is_in(ids)))
    e = lf.select("a", "b", "exact_j", "change_j").collect()
    both = pl.concat(
        [
            e.select(pl.col("a").alias("id"), pl.col("b").alias("other"), "exact_j", "change_j"),
            e.select(pl.col("b").alias("id"), pl.col("a").alias("other"), "exact_j", "change_j"),
        ]
    ).filter(pl.col("id").is_in(ids))
    dc = manifest.get("dedup_config") or {}
    threshold, change_threshold = dc.get("threshold"), dc.get("change_threshold", 0.0)
    out: dict[str, dict[str, Any]] = {}
    for (i,), g in both.sort(["exact_j", "other"], descending=[True, False]).group_by(
        "id", maintain_order=True
    ):
        inside = g["other"].is_in(sorted(cluster_of.get(str(i), set())))
        outside = g.filter(~inside)
        out[str(i)] = {
            "threshold": threshold,
            "change_threshold": change_threshold,
            "in_cluster": int(inside.sum()),
            "outside": outside.head(MAX_LISTED).select("other", "exact_j", "change_j").to_dicts(),
            "outside_not_listed": max(0, outside.height - MAX_LISTED),
        }
    return out


def _caps(manifest: dict[str, Any]) -> dict[str, int] | None:
    """cap_digit_only / cap_other from the shapes manifest, where it records them."""
    for d in (manifest, manifest.get("shapes_config") or {}, manifest.get("config") or {}):
        if isinstance(d, dict) and "cap_digit_only" in d and "cap_other" in d:
            return {"digit_only": int(d["cap_digit_only"]), "other": int(d["cap_other"])}
    return None


def _removed_per_group(
    run_dir: Location, shapes: pl.DataFrame, policy: Any, pscope: Any
) -> dict[int, int]:
    """Items the cap policy removed, per group (at the policy's scope) of the ids asked about."""
    rem = scan(run_dir, "shapes", "removed") if policy == "cap" else None
    if rem is None or pscope is None:
        return {}
    gids = shapes.filter(pl.col("scope") == pscope)["group_id"].to_list()
    n = (
        rem.filter((pl.col("scope") == pscope) & pl.col("group_id").is_in(gids))
        .group_by("group_id")
        .agg(pl.len().alias("n"))
        .collect()
    )
    return dict(n.iter_rows())


def shape_groups(
    run_dir: Location, shapes: pl.DataFrame | None, manifest: dict[str, Any]
) -> dict[str, list[dict[str, Any]]]:
    """Per id: its group at every scope (size, key, members) and, at the policy's scope,
    the cap and whether the group is over it."""
    if shapes is None or shapes.height == 0:
        return {}
    policy, pscope = manifest.get("policy"), manifest.get("scope")
    caps = _caps(manifest)
    lf = scan(run_dir, "shapes", "shapes")
    assert lf is not None
    multi = shapes.filter(pl.col("group_size") > 1).select("scope", "group_id").unique()
    members: dict[tuple[str, int], list[str]] = {}
    if multi.height:
        m = (
            lf.filter(pl.col("group_id").is_in(multi["group_id"].to_list()))
            .select("scope", "group_id", "id")
            .collect()
            .join(multi, on=["scope", "group_id"])
            .sort("scope", "group_id", "id")
        )
        for (sc, gid), part in m.group_by("scope", "group_id", maintain_order=True):
            members[(str(sc), int(gid))] = part["id"].to_list()
    removed_in = _removed_per_group(run_dir, shapes, policy, pscope)
    order = {s: i for i, s in enumerate(SHAPE_SCOPES)}
    out: dict[str, list[dict[str, Any]]] = {}
    rows = shapes.sort(pl.col("scope").replace_strict(order, default=9), "group_id")
    for s in rows.iter_rows(named=True):
        every = members.get((s["scope"], s["group_id"]), [s["id"]])
        g: dict[str, Any] = {
            "scope": s["scope"],
            "group_id": s["group_id"],
            "group_size": s["group_size"],
            "shape_key": s["shape_key"],
            "shape_text": s["shape_text"],
            "digit_only": s["digit_only"],
            "members": every[:MAX_LISTED],
            "members_not_listed": max(0, len(every) - MAX_LISTED),
            "policy_scope": s["scope"] == pscope,
        }
        if s["scope"] == pscope:
            if policy == "cap":
                n_removed = removed_in.get(s["group_id"], 0)
                if caps is not None:
                    cap = caps["digit_only" if s["digit_only"] else "other"]
                    g["cap"], g["cap_from"] = cap, "manifest"
                elif n_removed:
                    cap = s["group_size"] - n_removed
                    g["cap"], g["cap_from"] = cap, "removed count"
                else:
                    cap = None
                g["removed_in_group"] = n_removed
                g["over_cap"] = s["group_size"] > cap if cap is not None else False
            else:
                g["over_cap"] = None  # annotate / spread keep every item
        out.setdefault(s["id"], []).append(g)
    return out


def export_group_sizes(run_dir: Location, got: dict[str, pl.DataFrame | None]) -> dict[int, int]:
    """Items per export group of the rows asked about, over all three splits."""
    gids = sorted(
        {
            g
            for s in SPLITS
            if (df := got[f"export/{s}"]) is not None
            for g in df["export_group"].to_list()
            if g is not None
        }
    )
    if not gids:
        return {}
    sizes: dict[int, int] = {}
    for s in SPLITS:
        lf = scan(run_dir, "export", s)
        if lf is None or "export_group" not in columns(lf):
            continue
        n = (
            lf.filter(pl.col("export_group").is_in(gids))
            .group_by("export_group")
            .agg(pl.len().alias("n"))
            .collect()
        )
        for g, k in n.iter_rows():
            sizes[g] = sizes.get(g, 0) + k
    return sizes

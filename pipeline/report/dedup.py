"""The dedup section: cluster sizes, the pairs on both sides of the threshold (false merges sit
just above it, missed duplicates just below), and the largest clusters member by member with
each member's exact Jaccard to its keeper. Every item shown is labelled keeper, removed or
kept, and a removed item of a pair whose keeper is not the pair's other item is shown with
that keeper's text beside it."""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline import storage
from pipeline.parts import scan_output
from pipeline.report import plots
from pipeline.report.common import ITEM_COLS, Rows, member, read
from pipeline.schema import with_change_j
from pipeline.storage import Location

BORDERLINE = 5  # pairs shown on each side of the threshold
LARGEST = 5  # clusters shown
MEMBERS = 8  # members shown per cluster


def threshold_of(manifest: dict[str, Any]) -> float:
    """The Jaccard threshold dedup ran with (dedup_config, else the LSH bands), else 0.8."""
    for key in ("dedup_config", "bands"):
        t = (manifest.get(key) or {}).get("threshold")
        if t is not None:
            return float(t)
    return 0.8


def change_threshold_of(manifest: dict[str, Any]) -> float:
    """The change threshold dedup ran with; 0 (no change check) for a run from before it."""
    return float((manifest.get("dedup_config") or {}).get("change_threshold", 0.0))


def borderline(
    edges: Rows, threshold: float, n: int = BORDERLINE
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(below, above): the n pairs nearest under the threshold (highest exact_j first) and the n
    pairs at or just above it (lowest exact_j first); ties by (a, b)."""
    e = edges.lazy()
    below = (
        e.filter(pl.col("exact_j") < threshold)
        .sort(["exact_j", "a", "b"], descending=[True, False, False])
        .head(n)
    )
    above = e.filter(pl.col("exact_j") >= threshold).sort(["exact_j", "a", "b"]).head(n)
    return below.collect(), above.collect()


def largest_clusters(
    clusters: Rows, n: int = LARGEST, members: int = MEMBERS
) -> list[dict[str, Any]]:
    """The n largest clusters (ties: lowest cluster_id): [{cluster_id, size, component_id,
    members: [{id, is_keeper, kind, j}]}], keeper first, then by j descending, then id.
    Only a row per cluster, and the shown clusters' rows, are held."""
    lf = clusters.lazy()
    has_comp = "component_id" in lf.collect_schema().names()
    agg = [pl.col("size").first()] + ([pl.col("component_id").first()] if has_comp else [])
    sizes = lf.group_by("cluster_id").agg(agg)
    top = sizes.sort(["size", "cluster_id"], descending=[True, False]).head(n).collect()
    if top.is_empty():
        return []
    rows = lf.filter(pl.col("cluster_id").is_in(top["cluster_id"].implode())).collect()
    out = []
    for c in top.iter_rows(named=True):
        mem = rows.filter(pl.col("cluster_id") == c["cluster_id"]).sort(
            ["is_keeper", "j_to_keeper", "id"], descending=[True, True, False]
        )
        out.append(
            {
                "cluster_id": c["cluster_id"],
                "size": c["size"],
                "component_id": c.get("component_id"),
                "shown": min(members, mem.height),
                "members": [
                    {
                        "id": m["id"],
                        "is_keeper": bool(m["is_keeper"]),
                        "kind": m["kind"],
                        "j": round(float(m["j_to_keeper"]), 4),
                    }
                    for m in mem.head(members).iter_rows(named=True)
                ],
            }
        )
    return out


def roles(d: Location, clusters: Rows, ids: set[str]) -> dict[str, dict[str, Any]]:
    """Per id: what dedup did with it. {role: keeper (kept, with duplicates removed) | kept
    (no duplicate) | removed, keeper_id, kind, j (to the keeper)}. An id with one row kept
    and an exact twin removed counts as kept."""
    want = sorted(ids)
    kept = set(
        scan_output(d / "kept.parquet")
        .select("id")
        .filter(pl.col("id").is_in(want))
        .collect()["id"]
        .to_list()
    )
    keepers = set(
        clusters.lazy()
        .filter(pl.col("id").is_in(want) & pl.col("is_keeper") & (pl.col("size") > 1))
        .select("id")
        .collect()["id"]
        .to_list()
    )
    rem = (
        scan_output(d / "removed.parquet")
        .filter(pl.col("id").is_in(want))
        .select("id", "keeper_id", "kind", "j")
        .collect()
        .sort("id", "keeper_id", "kind")
        .unique("id", keep="first", maintain_order=True)
    )
    out: dict[str, dict[str, Any]] = {}
    for r in rem.iter_rows(named=True):
        j = None if r["j"] is None else round(float(r["j"]), 4)
        out[r["id"]] = {"role": "removed", "keeper_id": r["keeper_id"], "kind": r["kind"], "j": j}
    for i in kept:
        out[i] = {"role": "keeper" if i in keepers else "kept", "keeper_id": i, "kind": None}
    return out


def role_label(role: dict[str, Any] | None, other: str | None = None) -> str:
    """The label an item of a pair is shown under: keeper, removed (and whose duplicate), kept."""
    if not role:
        return "Not in dedup's outputs"
    if role["role"] == "keeper":
        return "Keeper (kept; its duplicates were removed)"
    if role["role"] == "kept":
        return "Kept (no duplicate at the threshold)"
    j = "" if role.get("j") is None else f", J {role['j']} to it"
    if role["keeper_id"] == other:
        return f"Removed: {role['kind']} duplicate of the other item of this pair{j}"
    return f"Removed: {role['kind']} duplicate of keeper {role['keeper_id']}{j} (shown below)"


def _side(
    i: str, other: str, byid: dict[str, dict], role_of: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """One item of a pair: the item, its role and label, and, for a removed item whose keeper
    is not the other item of the pair, its keeper (shown beside it)."""
    role = role_of.get(i)
    side = {**member(byid[i]), "role": (role or {}).get("role"), "label": role_label(role, other)}
    k = (role or {}).get("keeper_id")
    if side["role"] == "removed" and k not in (i, other):
        side["keeper"] = member(byid[k]) if k in byid else None
        side["keeper_id"] = k
    return side


def _pairs(
    df: pl.DataFrame,
    byid: dict[str, dict],
    cluster_of: dict[str, int],
    role_of: dict[str, dict[str, Any]],
) -> list[dict[str, Any]]:
    out = []
    for x in df.iter_rows(named=True):
        if x["a"] not in byid or x["b"] not in byid:
            continue
        ca, cb = cluster_of.get(x["a"]), cluster_of.get(x["b"])
        out.append(
            {
                "exact_j": round(x["exact_j"], 4),
                "change_j": round(x["change_j"], 4),
                "est_j": round(x["est_j"], 4),
                "same_cluster": ca is not None and ca == cb,
                "a": _side(x["a"], x["b"], byid, role_of),
                "b": _side(x["b"], x["a"], byid, role_of),
            }
        )
        a, b = out[-1]["a"], out[-1]["b"]
        if a.get("keeper") and b.get("keeper_id") == a.get("keeper_id"):
            b["keeper"], b["keeper_above"] = None, True  # one keeper: shown once, after a
    return out


def dedup(run_dir: Location, manifest: dict, out: Location) -> dict[str, Any]:
    d = run_dir / "dedup"
    threshold = threshold_of(manifest)
    # scans: only figures, the shown pairs and clusters, and each pair's J are held
    clusters = scan_output(d / "clusters.parquet")
    edges = with_change_j(scan_output(d / "edges.parquet"))
    same = pl.col("change_j") >= change_threshold_of(manifest)
    at = pl.col("exact_j") >= threshold
    figs = edges.select(
        edges=pl.len(),
        below=(~at).sum(),  # whatever their change
        other=(~same & at).sum(),
        at_threshold=(same & at).sum(),
    ).collect()
    other = (
        edges.filter(~same & at)
        .sort(["exact_j", "a", "b"], descending=[True, False, False])
        .head(BORDERLINE)
        .collect()
    )
    edges = edges.filter(same)  # the pairs that make the same change: duplicates by J alone
    below, above = borderline(edges, threshold)
    largest = largest_clusters(clusters)
    wanted = set(below["a"]) | set(below["b"]) | set(above["a"]) | set(above["b"])
    wanted |= set(other["a"]) | set(other["b"])
    wanted |= {m["id"] for c in largest for m in c["members"]}
    role_of = roles(d, clusters, wanted)
    # a removed item of a pair is shown beside its keeper, wherever that keeper is
    wanted |= {
        r["keeper_id"] for r in role_of.values() if r["role"] == "removed" and r["keeper_id"]
    }
    pool = pl.concat(
        [
            scan_output(d / f).select(ITEM_COLS).filter(pl.col("id").is_in(list(wanted)))
            for f in ("kept.parquet", "removed.parquet")
        ]
    )
    byid = {r["id"]: r for r in pool.collect().unique("id").iter_rows(named=True)}
    shown = (  # the pairs' items only
        clusters.filter(pl.col("id").is_in(list(wanted))).select("id", "cluster_id").collect()
    )
    cluster_of = dict(zip(shown["id"].to_list(), shown["cluster_id"].to_list(), strict=True))
    has_comp = "component_id" in clusters.collect_schema().names()
    sizes = (  # a keeper alone in its star removes nothing: no cluster
        clusters.group_by("cluster_id")
        .agg(pl.col("size").first())
        .sort("cluster_id")
        .filter(pl.col("size") > 1)
        .collect()
    )
    hist = sizes.group_by("size").len("clusters").sort("size")
    components = clusters.select(pl.col("component_id").n_unique()) if has_comp else None
    r: dict[str, Any] = {
        "threshold": threshold,
        "clusters": sizes.height,
        "components": int(components.collect().item()) if components is not None else None,
        "cluster_sizes": [dict(x) for x in hist.iter_rows(named=True)],
        "edges": int(figs["edges"].item()),
        "edges_at_threshold": int(figs["at_threshold"].item()),
        "edges_below": int(figs["below"].item()),
        "edges_other_change": int(figs["other"].item()),
        "plots": {},
    }
    if sizes.height:
        mx = int(sizes["size"].max())  # type: ignore[arg-type]
        r["plots"]["cluster_sizes"] = plots.hist(
            sizes["size"].to_numpy(),
            out / "cluster_sizes.png",
            "dedup clusters by size",
            "items in the cluster (keeper and removed)",
            bins=[b + 0.5 for b in range(1, mx + 1)],
            log_y=True,
            ylabel="clusters",
            integer_x=True,
        )
    ej = edges.select("exact_j").collect()["exact_j"]  # 8 bytes a pair
    if ej.len():
        r["plots"]["jaccard"] = plots.jaccard(
            ej.filter(ej >= threshold).to_numpy(),
            ej.filter(ej < threshold).to_numpy(),
            threshold,
            out / "jaccard.png",
        )
    r["tune"] = None
    sweep = run_dir / "tune" / "sweep.csv"
    if sweep.exists():
        with storage.open_read(sweep) as f:
            t = pl.read_csv(f)
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
    for c in largest:
        c["members"] = [{**m, **member(byid[m["id"]])} for m in c["members"] if m["id"] in byid]
        k = 0
        for m in c["members"]:
            if m["is_keeper"]:
                m["label"] = "Keeper (kept)"
            else:
                k += 1
                m["label"] = f"Removed {k}: {m['kind']} duplicate of the keeper, J {m['j']}"
    r["largest"] = largest
    r["largest_shown"] = {"clusters": LARGEST, "members": MEMBERS}
    ob = read(d / "oversized_buckets.parquet")
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
    r["borderline_below"] = _pairs(below, byid, cluster_of, role_of)
    r["borderline_above"] = _pairs(above, byid, cluster_of, role_of)
    r["other_change"] = _pairs(other, byid, cluster_of, role_of)
    return r

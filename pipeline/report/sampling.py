"""Shapes and sampling: the shape groups, and what each sampling policy would keep.

No shape dedup and cap k are order-independent and simulated here over dedup's kept items.
Spread is an order, so the report never invents one: it reads `batch_order` from the shapes
stage's kept.parquet, and says the policy was not run when that column is absent.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from pipeline.config import SHAPE_SCOPES
from pipeline.parts import scan_output
from pipeline.report.common import ITEM_COLS, Rows, counts, id_ranges, member, pct, shown_value
from pipeline.runs import committed, read_manifest
from pipeline.storage import Location

CAPS = (1, 2, 4)
NOT_RUN = "not run; rerun shapes with policy = spread"


# what the report needs of every shapes.parquet row; a group's shape text is looked up only
# for the groups shown (it is most of the file's size)
SHAPE_COLS = ["id", "scope", "digit_only", "group_id", "group_size"]


def shapes_file(run_dir: Location) -> Location:
    return run_dir / "shapes" / "shapes.parquet"


# shapes.parquet's rows (SHAPE_COLS): read by scope where they are used (4 rows an item;
# one scope's at a time in memory), or a frame given whole (tests)
Shapes = Rows


def read_shapes(run_dir: Location) -> pl.LazyFrame | None:
    p = shapes_file(run_dir)
    return scan_output(p).select(SHAPE_COLS) if committed(p.parent, p.name) else None


def shape_scopes(run_dir: Location) -> set[str] | None:
    """The scopes shapes.parquet holds (None: no shapes output), without reading its rows."""
    p = shapes_file(run_dir)
    if not committed(p.parent, p.name):
        return None
    return set(scan_output(p).select(pl.col("scope").unique()).collect()["scope"].to_list())


def shapes(
    shp: Shapes | None, items: pl.LazyFrame, texts: pl.LazyFrame | None = None
) -> dict[str, Any]:
    """The shape groups per scope (`shp`: read_shapes), and the largest with their shape text
    and examples looked up in `texts` (shapes.parquet) and `items` (scans: only the rows
    shown are read)."""
    if shp is None:
        return {"present": False, "note": "shapes stage not run"}
    per_scope = []
    largest = []
    order = {s: i for i, s in enumerate(SHAPE_SCOPES)}
    scopes = shp.lazy().select(pl.col("scope").unique()).collect()["scope"].to_list()
    for scope in sorted(scopes, key=lambda x: (order.get(x, 9), x)):
        # the scope's rows grouped as they are read: only a row per group is held
        s = shp.lazy().filter(pl.col("scope") == scope)
        g = (
            s.group_by("group_id")
            .agg(
                pl.len().alias("n"),
                pl.col("digit_only").any(),
                pl.col("digit_only").sum().alias("digit_only_sum"),
            )
            .collect()
        )
        items_in = int(g["n"].sum() or 0)
        multi = g.filter(pl.col("n") > 1).drop("digit_only_sum")
        sharing = int(multi["n"].sum() or 0)
        digit = int(g["digit_only_sum"].sum() or 0)
        per_scope.append(
            {
                "scope": scope,
                "items": items_in,
                "groups": g.height,
                "groups_2plus": multi.height,
                "items_sharing": sharing,
                "share_sharing": pct(sharing, items_in),
                "digit_only_items": digit,
                "digit_only_share": pct(digit, items_in),
            }
        )
        top = multi.sort(["n", "group_id"], descending=[True, False]).head(5)
        del g, multi
        firsts = (
            s.filter(pl.col("group_id").is_in(top["group_id"].implode()))
            .group_by("group_id")
            .agg(pl.col("id").sort().head(2).alias("ids"))
            .collect()
        )
        top = top.join(firsts, on="group_id", how="left", maintain_order="left")
        text = _first_texts(texts, scope, top["group_id"]) if texts is not None else {}
        for x in top.iter_rows(named=True):
            largest.append(
                {
                    "scope": scope,
                    "group_id": str(x["group_id"]),
                    "size": x["n"],
                    "digit_only": bool(x["digit_only"]),
                    "shape_text": (text.get(x["group_id"]) or "")[:300],
                    "ids": x["ids"],
                }
            )
    wanted = {i for g in largest for i in g["ids"]}
    byid = {
        r["id"]: r
        for r in items.filter(pl.col("id").is_in(list(wanted)))
        .select(ITEM_COLS)
        .unique("id")
        .collect()
        .iter_rows(named=True)
    }
    for grp in largest:
        grp["examples"] = [member(byid[i]) for i in grp.pop("ids") if i in byid]
    return {"present": True, "per_scope": per_scope, "largest": largest}


def _collisions(groups: np.ndarray, batch: int) -> int:
    """Batches (consecutive runs of `batch` items) holding two items of one group (`groups`:
    a group per item, in order; best as codes 0 .. n - 1)."""
    if len(groups) == 0:
        return 0
    if groups.dtype.kind not in "iu":  # labels: their codes
        groups = np.unique(groups, return_inverse=True)[1].reshape(-1)
    span = int(groups.max()) + 1  # codes are 0 .. span - 1: (batch, code) as one sortable int
    key = np.arange(len(groups), dtype=np.int64) // batch * span + groups.astype(np.int64)
    key.sort()
    twins = key[1:] == key[:-1]
    return len(np.unique(key[1:][twins] // span))


def _ranks(groups: pl.Series) -> pl.Series:
    """Each item's place in its group (`groups`: a label per item, in id order; no nulls):
    0 for its lowest id. By one stable sort of the labels (a window over() held several
    times the frame at 7M items)."""
    g = groups.to_numpy()
    order = np.argsort(g, kind="stable")  # each group's items together, in id order
    g = g[order]
    at = np.arange(len(g), dtype=np.int64)
    first = np.ones(len(g), dtype=bool)
    first[1:] = g[1:] != g[:-1]
    start = np.maximum.accumulate(np.where(first, at, 0))  # where each item's group starts
    rank = np.empty(len(g), dtype=np.uint32)
    rank[order] = at - start
    return pl.Series("rank", rank)


def _solo(column: str, last: Any) -> pl.Expr:
    """`column` with each null a label of its own, past `last` (the largest label, or None)."""
    first = (int(last) if last is not None else -1) + 1
    labels = first + pl.int_range(pl.len(), dtype=pl.Int64)
    return pl.when(pl.col(column).is_null()).then(labels).otherwise(pl.col(column)).alias(column)


def window_collisions(order: pl.DataFrame, window: int) -> int:
    """Windows (positions batch_order // window) holding two items of one group_id."""
    if order.is_empty():
        return 0
    w = order.select((pl.col("batch_order") // window).alias("w"), "group_id")
    per = w.group_by("w").agg(pl.len().alias("n"), pl.col("group_id").n_unique().alias("g"))
    return int((per["n"] > per["g"]).sum())


def _window(m: dict[str, Any]) -> int | None:
    """The spread window the shapes stage recorded, wherever its manifest keeps it."""
    for src in (m, m.get("shapes_config") or {}, m.get("config") or {}, m.get("counts") or {}):
        if isinstance(src.get("window"), int):
            return int(src["window"])
    return None


def _first_texts(texts: pl.LazyFrame, scope: str, groups: pl.Series) -> dict[int, str | None]:
    """{group_id: the shape text of its first row in the file} for `groups` of `scope`."""
    sel = texts.filter((pl.col("scope") == scope) & pl.col("group_id").is_in(groups.implode()))
    got = sel.group_by("group_id", maintain_order=True).agg(pl.col("shape_text").first())
    return dict(got.collect().iter_rows())


def stage_order(run_dir: Location, batch: int, window: int | None = None) -> dict[str, Any]:
    """What the shapes stage did for spread: {policy, window, window_note, order (id,
    batch_order: a scan of shapes/kept.parquet) or None, scope, conflicts}. The window is the
    one the shapes manifest records, else `window` (the config's shapes.window, when the
    caller has the config), else `batch` (the shapes default equals the report's)."""
    m = read_manifest(run_dir / "shapes") or {}
    kept = run_dir / "shapes" / "kept.parquet"
    info: dict[str, Any] = {
        "policy": m.get("policy"),
        "scope": m.get("scope"),
        "conflicts": (m.get("counts") or {}).get("spread_conflicts"),
        "order": None,
        "window": None,
        "window_note": "",
    }
    if kept.exists() and "batch_order" in scan_output(kept).collect_schema().names():
        info["order"] = scan_output(kept).select("id", "batch_order")
        w = _window(m)
        if w:
            info["window"], info["window_note"] = w, "from shapes/manifest.json"
        elif window:
            info["window"], info["window_note"] = window, "shapes.window of the config"
        else:
            info["window"] = batch
            info["window_note"] = "not recorded in shapes/manifest.json: the report's batch"
    return info


def _per_item(
    shp: Shapes, items: Rows, scope: str, order: Rows | None
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """Every kept item in id order (language and repo as shown, categorical; author_is_bot;
    group_id at `scope`, null where the item is in no group), and, given the shapes stage's
    `order` (id, batch_order), each of its rows' (batch_order, group_id). Matched a range of
    ids at a time, so only one range's ids are ever held as text (at 10M items, holding them
    all was most of the report's peak)."""
    n = items.lazy().select(pl.len()).collect().item()
    rows, spread = [], []
    for cut in id_ranges(n):
        mine = (
            items.lazy()
            .filter(cut)
            .select(
                "id",
                shown_value("language").cast(pl.Categorical).alias("language"),
                shown_value("repo").cast(pl.Categorical).alias("repo"),
                "author_is_bot",
            )
        )
        groups = shp.lazy().filter((pl.col("scope") == scope) & cut).select("id", "group_id")
        got = (
            mine.sort("id")
            .join(groups.unique("id"), on="id", how="left", maintain_order="left")
            .collect()
        )
        if order is not None:
            o = order.lazy().filter(cut).select("id", "batch_order")
            o = o.join(got.lazy().select("id", "group_id"), on="id", how="left")
            spread.append(o.select("batch_order", "group_id").collect())
        rows.append(got.drop("id"))
    return pl.concat(rows), (pl.concat(spread) if order is not None else None)


def sampling(
    shp: Shapes | None,
    items: Rows,
    scope: str = "repo",
    batch: int = 16,
    seed: int = 0,
    stage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Each policy over dedup's kept items with the shape groups at `scope`.

    cap k keeps k items per group (lowest ids, so the choice is order-independent); no shape
    dedup and cap k are counted under a seeded random order. Collisions: batches of `batch`
    consecutive items (micro-batch 1 x accumulation 16 = one optimizer step) with two members
    of one group. Spread keeps every item in the order the shapes stage wrote (`stage`, from
    stage_order): its windows of `window` items are counted; without that order, it says so.
    """
    if shp is None:
        return {"present": False, "note": "shapes stage not run"}
    st = stage or {}
    base, order = _per_item(shp, items, scope, st.get("order"))
    # an item in no group is a group of its own: a label past every group's (labels only name
    # groups here, so numbers, not text)
    last = shp.lazy().filter(pl.col("scope") == scope).select(pl.col("group_id").max())
    base = base.with_columns(_solo("group_id", last.collect().item()))
    # a group's label is its code in the collision count (only equal labels matter there)
    base = base.rename({"group_id": "code"}).with_columns(rank=_ranks(base["group_id"]))
    last_label = base["code"].max()
    rng = np.random.default_rng(seed)
    langs = [r["value"] for r in counts(base, "language", 6) if r["value"] != "(other)"]
    repos = [r["value"] for r in counts(base, "repo", 6) if r["value"] != "(other)"]
    of_lang = {v: int((base["language"] == v).sum()) for v in langs}
    of_repo = {v: int((base["repo"] == v).sum()) for v in repos}
    # (name, its cap): one policy's items made at a time (each is a copy of most of them)
    policies = [("no shape dedup", None), *((f"cap k={k}", k) for k in CAPS), ("spread", None)]
    rows = []
    for name, cap in policies:
        df = base if cap is None else base.filter(pl.col("rank") < cap)
        row: dict[str, Any] = {
            "policy": name,
            "items": df.height,
            "share_of_corpus": pct(df.height, base.height),
            "bot_share": pct(int(df["author_is_bot"].fill_null(False).sum()), df.height),
            "batch": batch,
            "batches": -(-df.height // batch) if df.height else 0,
            "order": "seeded random",
            "note": "",
        }
        if name != "spread":
            groups = df["code"].to_numpy()[rng.permutation(df.height)]
            row["batches_with_shape_twins"] = _collisions(groups, batch)
        elif order is None:
            ran = st.get("policy")
            row.update(order=None, batches=None, batches_with_shape_twins=None, note=NOT_RUN)
            if ran:
                row["note"] += f" (the shapes stage ran with policy = {ran})"
        else:
            w = int(st["window"])
            order = order.with_columns(_solo("group_id", last_label))
            row.update(
                items=order.height,
                share_of_corpus=pct(order.height, base.height),
                batch=w,
                batches=-(-order.height // w) if order.height else 0,
                batches_with_shape_twins=window_collisions(order, w),
                order="shapes/kept.parquet batch_order",
                window_note=st.get("window_note", ""),
                stage_scope=st.get("scope"),
                stage_conflicts=st.get("conflicts"),
            )
            notes = [f"window {w} ({st.get('window_note', '')})"]
            if st.get("conflicts") is not None:
                notes.append(f"the stage counted {st['conflicts']} conflicts")
            if st.get("scope") and st["scope"] != scope:
                notes.append(f"the stage spread groups at scope {st['scope']}")
            row["note"] = "; ".join(notes)
        row["language_kept"] = {v: pct(int((df["language"] == v).sum()), of_lang[v]) for v in langs}
        row["repo_kept"] = {v: pct(int((df["repo"] == v).sum()), of_repo[v]) for v in repos}
        rows.append(row)
    spread = rows[-1]
    return {
        "present": True,
        "scope": scope,
        "batch": batch,
        "seed": seed,
        "spread_ran": spread["batches_with_shape_twins"] is not None,
        "languages": langs,
        "repos": repos,
        "policies": rows,
    }

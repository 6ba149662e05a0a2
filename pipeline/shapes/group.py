"""Shape groups at four scopes, and what the cap and spread policies do with them.

Items are grouped by (where, digit_only [, nearest context line], shape): `change` groups the
same edit shape within one change, `repo` within one repository, `corpus` anywhere. The path
is not part of "where" by default: the same edit made in two files of one commit is one group
(`path_in_key = true` restores per-file groups, and file-name groups at corpus scope). The
`edit` scope groups the same whole normalised edit (before and after, digits, versions,
hashes and whitespace normalised) across the whole corpus; export keeps each in one split.

Cost: the line diff is difflib per item and line normalisation is Python `re` over the
distinct changed lines (cached), roughly 20-50 us per item; the edit key, grouping, ranking and
ordering are polars.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from pipeline.config import SHAPE_POLICIES, SHAPE_SCOPES, ShapesConfig
from pipeline.dedup import clusters as C
from pipeline.shapes.normalise import _COUNTS, edit_key_expr, edit_shape_refs, nearest_context_line

SCOPES = SHAPE_SCOPES  # the config's vocabulary (pipeline/config/models.py)
POLICIES = SHAPE_POLICIES


def _where(scope: str, path_in_key: bool) -> pl.Expr:
    """The part of a group key that says where the edit was made."""
    if scope == "edit":
        return pl.lit("")
    if scope == "corpus":
        return pl.col("path").str.split("/").list.last() if path_in_key else pl.lit("")
    cols = ["repo", "change"] if scope == "change" else ["repo"]
    return pl.concat_str([*cols, *(["path"] if path_in_key else [])], separator="\0")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shape_columns(df: pl.DataFrame, context_key: bool = False) -> pl.DataFrame:
    """_row, shape_text, digit_only, _ctx (nearest context line and, for a digit-only edit,
    the references its shape stopped naming: context_key tells bumps apart) and _edit."""
    counts = [df[c].fill_null(0) if c in df.columns else [0] * df.height for c in _COUNTS]
    shapes = [
        edit_shape_refs(b, a, r, d)
        for b, a, r, d in zip(df["before"], df["after"], *counts, strict=True)
    ]
    if context_key:
        ctx = [
            nearest_context_line(c) + ("\x1e" + s[2] if s[2] else "")
            for c, s in zip(df["context"], shapes, strict=True)
        ]
    else:
        ctx = [""] * df.height
    edit = df.select(
        pl.concat_str([edit_key_expr("before"), edit_key_expr("after")], separator="\x1f")
    ).to_series()
    return pl.DataFrame(
        {
            "_row": np.arange(df.height, dtype=np.int64),
            "shape_text": [s[0] for s in shapes],
            "digit_only": [s[1] for s in shapes],
            "_ctx": ctx,
            "_edit": edit,
        },
        schema={
            "_row": pl.Int64,
            "shape_text": pl.String,
            "digit_only": pl.Boolean,
            "_ctx": pl.String,
            "_edit": pl.String,
        },
    )


def group_shapes(df: pl.DataFrame, s: ShapesConfig) -> pl.DataFrame:
    """SHAPES_SCHEMA rows (+ `_row`) for every item at every scope, sorted (scope, group, id)."""
    base = pl.concat(
        [df.select("id", "repo", "change", "path"), shape_columns(df, s.context_key)],
        how="horizontal",
    )
    base = base.with_columns(
        _shape=pl.concat_str(
            [pl.col("digit_only").cast(pl.String), pl.col("_ctx"), pl.col("shape_text")],
            separator="\x1f",
        )
    )
    parts = []
    for scope in SCOPES:
        # grouped on the key columns; the key's text and its sha are made once per group,
        # not once per item (at 1M items the per-item strings cost gigabytes)
        what = "_edit" if scope == "edit" else "_shape"
        part = base.with_columns(scope=pl.lit(scope), _where=_where(scope, s.path_in_key))
        keys = part.select("_where", what).unique()
        text = pl.concat_str([pl.lit(scope), "_where", what], separator="\x1f")
        keys = keys.with_columns(
            shape_key=text.map_elements(_sha, return_dtype=pl.String), _text=text
        ).sort("shape_key", "_text")
        keys = keys.drop("_text").with_row_index("group_id")
        keys = keys.with_columns(pl.col("group_id").cast(pl.Int64))
        part = part.join(keys, on=["_where", what], how="left")
        part = part.select(
            "id", "scope", "shape_key", "shape_text", "digit_only", "group_id", "_row"
        )
        parts.append(part.with_columns(group_size=pl.len().over("group_id").cast(pl.Int64)))
    out = pl.concat(parts).sort(["scope", "group_id", "id", "_row"])
    return out.select(
        "id", "scope", "shape_key", "shape_text", "digit_only", "group_id", "group_size", "_row"
    )


def cap_groups(
    df: pl.DataFrame, shapes: pl.DataFrame, s: ShapesConfig, keeper: list[str]
) -> pl.DataFrame:
    """Rows removed by `cap` at s.scope: _row, scope, group_id, keeper_id (input row order).

    Within a group, items are ranked as dedup ranks its keepers; the first k stay.
    """
    g = shapes.filter(pl.col("scope") == s.scope).select("_row", "group_id", "digit_only")
    ranked = C.best_first(
        df.with_row_index("_row").with_columns(pl.col("_row").cast(pl.Int64)).join(g, on="_row"),
        "group_id",
        keeper,
    )
    ranked = ranked.with_columns(
        _k=pl.int_range(pl.len()).over("group_id"),
        keeper_id=pl.col("id").first().over("group_id"),
        _cap=pl.when(pl.col("digit_only")).then(s.cap_digit_only).otherwise(s.cap_other),
    )
    return (
        ranked.filter(pl.col("_k") >= pl.col("_cap"))
        .sort("_row")
        .select("_row", pl.lit(s.scope).alias("scope"), "group_id", "keeper_id")
    )


def spread_order(
    df: pl.DataFrame, shapes: pl.DataFrame, scope: str, window: int, seed: int
) -> tuple[np.ndarray, int]:
    """(batch_order per input row, conflicts): a seeded order in which members of one group
    at `scope` never share an aligned window of `window` positions, where that is possible.

    Items are sorted by (group size, largest first; seeded hash of group; seeded hash of
    item), then dealt row by row over the B = ceil(n / window) windows, so any run of up to
    B - 1 consecutive items of that list lands in distinct windows, and the largest group
    (first, on a full row) gets B. A larger group must collide: each item sharing a window
    with an earlier member of its group counts as one conflict.
    """
    n = df.height
    if n == 0:
        return np.empty(0, np.int64), 0
    g = shapes.filter(pl.col("scope") == scope).select("_row", "shape_key", "group_size")
    ids = df.select("id", "source", "source_ref").with_row_index("_row")
    t = ids.with_columns(pl.col("_row").cast(pl.Int64)).join(g, on="_row")
    t = t.with_columns(
        _gh=pl.col("shape_key").map_elements(lambda k: _sha(f"{seed}\0{k}"), pl.String),
        _ih=pl.concat_str(["id", "source", "source_ref"], separator="\0").map_elements(
            lambda k: _sha(f"{seed}\0{k}"), pl.String
        ),
    ).sort(
        ["group_size", "_gh", "shape_key", "_ih", "_row"],
        descending=[True, False, False, False, False],
    )
    nb = -(-n // window)
    last = n - (nb - 1) * window  # slots in the last window
    slots = [(b, r) for r in range(window) for b in range(nb) if b < nb - 1 or r < last]
    pos = np.array([b * window + r for b, r in slots], dtype=np.int64)
    order = np.empty(n, np.int64)
    order[t["_row"].to_numpy()] = pos
    win = pl.DataFrame({"k": t["shape_key"], "w": pos // window})
    conflicts = int(win.height - win.unique().height)
    return order, conflicts


@dataclass
class ShapesResult:
    shapes: pl.DataFrame  # SHAPES_SCHEMA + _row
    annotations: pl.DataFrame  # per input row: group columns to add to kept (annotate)
    removed: pl.DataFrame  # _row, scope, group_id, keeper_id
    batch_order: np.ndarray | None  # spread only
    counts: dict[str, Any]
    largest: list[dict[str, Any]]
    by_size: dict[str, dict[str, int]]


def _size_bucket(n: int) -> str:
    for hi, label in ((1, "1"), (2, "2"), (4, "3-4"), (9, "5-9"), (49, "10-49")):
        if n <= hi:
            return label
    return "50+"


def find_shapes(df: pl.DataFrame, s: ShapesConfig, keeper: list[str]) -> ShapesResult:
    """Shapes, groups and the policy's outcome for the items df (item columns)."""
    shapes = group_shapes(df, s)
    wide = pl.DataFrame({"_row": np.arange(df.height, dtype=np.int64)})
    for scope in SCOPES:
        part = shapes.filter(pl.col("scope") == scope).select(
            "_row",
            pl.col("group_id").alias(f"shape_group_{scope}"),
            pl.col("group_size").alias(f"shape_size_{scope}"),
        )
        wide = wide.join(part, on="_row", how="left")
    digit = shapes.filter(pl.col("scope") == "change").select("_row", "digit_only")
    wide = wide.join(digit.rename({"digit_only": "shape_digit_only"}), on="_row").sort("_row")

    removed = pl.DataFrame(
        schema={"_row": pl.Int64, "scope": pl.String, "group_id": pl.Int64, "keeper_id": pl.String}
    )
    order, conflicts = None, 0
    if s.policy == "cap":
        removed = cap_groups(df, shapes, s, keeper)
    elif s.policy == "spread":
        order, conflicts = spread_order(df, shapes, s.scope, s.window, s.seed)

    by_size: dict[str, dict[str, int]] = {}
    for scope in SCOPES:
        sizes = shapes.filter(pl.col("scope") == scope).group_by("group_id").agg(pl.len())
        hist: dict[str, int] = {}
        for k in sizes["len"].to_list():
            hist[_size_bucket(k)] = hist.get(_size_bucket(k), 0) + 1
        by_size[scope] = hist
    top = (
        shapes.filter((pl.col("scope") == s.scope) & (pl.col("group_size") > 1))
        .sort(["group_size", "group_id", "id"], descending=[True, False, False])
        .unique("group_id", keep="first", maintain_order=True)
        .head(10)
    )
    largest = []
    for r in top.iter_rows(named=True):
        item = df.row(r["_row"], named=True)
        largest.append(
            {
                "group_id": r["group_id"],
                "size": r["group_size"],
                "digit_only": r["digit_only"],
                "path": item["path"],
                "repo": item["repo"],
                "shape_text": r["shape_text"][:200],
                "comment": item["comment"][:80],
            }
        )
    n = df.height
    n_digit = int(wide["shape_digit_only"].sum()) if n else 0
    counts: dict[str, Any] = {
        "items_in": n,
        "kept": n - removed.height,
        "removed": removed.height,
        "digit_only": n_digit,
        "digit_only_share": round(n_digit / n, 4) if n else 0.0,
        "spread_conflicts": conflicts,
    }
    for scope in SCOPES:
        sc = shapes.filter((pl.col("scope") == scope) & (pl.col("group_size") > 1))
        counts[f"groups_{scope}"] = int(sc["group_id"].n_unique())
        counts[f"grouped_items_{scope}"] = sc.height
    return ShapesResult(shapes, wide, removed, order, counts, largest, by_size)


# ------------------------------------------------------------------------ stage I/O

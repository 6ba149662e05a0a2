"""The export stage: shapes/kept.parquet -> train / validation / test, Parquet and a HF dataset.

Splits go by whole group, never by item. An item's group is the connected component of:
its id (exact duplicates share one), its dedup component (the connected component of
near-duplicate edges, wider than the star that chose its keeper), its shape group at
`export.scope`, its normalised edit (shapes' corpus-wide `edit` scope: the same before and
after once digits, versions, hashes and whitespace are normalised, in any file or repository)
and, with split_by = "repo", its repository (with "change", its change: every hunk of one
commit or pull request); repository and change keys are taken in Unicode NFC, as dedup's and
shapes' keys are (pipeline/nfc.py), so an item and its NFD twin share every group. So a
version bump in validation never has its twin in train, and no normalised edit appears in two
splits.

Split rules (export.split_by):
- ratio: groups in a seeded order (sha256 of seed and the group's smallest id) are laid end
  to end and cut at the ratios; a group goes where its midpoint falls, so each split's size is
  within half a group of its ratio, and large groups are as likely as small ones to be held out.
- repo: the same, with every repository one group.
- change: the same, with every change (repo and change; items with no change alone) one group:
  the hunks of a commit share its comment and often its text.
- time: a group with any item created at or after `export.after` goes to test, whole; the
  rest are dealt to train and validation by their ratios. Items without a date count as before.

"change" is the default. Under ratio and time a change may span splits (under time, the hunks
of a change are dealt to train and validation apart); the export counts the held-out items
that share a change with train (verify.held_out_sharing_change) into its manifest, and the
dataset card and the report warn with that figure (`sharing_change`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
import polars as pl

from pipeline.config import ExportConfig, iso_cutoff
from pipeline.nfc import nfc_columns
from pipeline.schema import CHANGE_COLUMNS
from pipeline.shapes.sha import sha256_128
from pipeline.verify import (
    SHARING,
    column_keys,
    cross_split_groups,
    held_out_sharing_change,
    ids_in_several_splits,
)

EDIT_SCOPE = "edit"  # shapes' corpus-wide normalised-edit groups: always kept in one split


def cutoff(after: str) -> datetime:
    t = iso_cutoff(after)
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


# ------------------------------------------------------------------------ pure part


def component_col(columns: Sequence[str]) -> str:
    """Dedup's connected component among clusters.parquet's `columns` (runs before stars
    had none: the cluster)."""
    return "component_id" if "component_id" in columns else "cluster_id"


def groupings(
    items: pl.DataFrame, clusters: pl.DataFrame, shapes: pl.DataFrame, e: ExportConfig
) -> list[tuple[str, pl.DataFrame]]:
    """(name, id/key frame) of every relation that must not cross a split (keys in their
    own type: 10M integers cast to text would be a copy of every id's size)."""
    out = [("id", items.select("id", pl.col("id").alias("key")))]
    comp = component_col(clusters.columns)
    out.append(("dedup component", clusters.select("id", pl.col(comp).alias("key"))))
    scopes = [e.scope] if e.scope not in ("none", EDIT_SCOPE) else []
    for scope in [*scopes, EDIT_SCOPE]:
        s = shapes.filter(pl.col("scope") == scope)
        out.append(
            (
                f"shape group ({scope})" if scope != EDIT_SCOPE else "normalised edit",
                s.select("id", pl.col("group_id").alias("key")),
            )
        )
    if e.split_by == "repo":
        out.append(("repo", nfc_columns(items, ["repo"]).select("id", pl.col("repo").alias("key"))))
    if e.split_by == "change":
        out.append(("change", column_keys(items, CHANGE_COLUMNS)))
    return out


def seeded(seed: int, keys: pl.Series) -> np.ndarray:
    """The first 64 bits (big-endian) of sha256(f"{seed}\0{key}") per key: a seeded order
    that no library version can change."""
    return (
        sha256_128(f"{seed}\0" + keys.cast(pl.String))[0] if len(keys) else np.zeros(0, np.uint64)
    )


def deal_order(sizes: np.ndarray, order: np.ndarray, ratios: list[float]) -> np.ndarray:
    """Split index per group: the groups laid end to end in `order`; a group goes to the
    split whose share of that line holds the group's midpoint, so each boundary is off by
    at most half a group."""
    n = np.asarray(sizes, dtype=np.int64)
    total = int(n.sum()) or 1
    laid = n[order]
    mid = laid / 2  # then + the items laid before each group, / all: in place (10M groups)
    mid += np.cumsum(laid) - laid
    del laid
    mid /= total
    bounds = np.cumsum(ratios) / sum(ratios)
    at = np.searchsorted(bounds, mid, side="right")
    del mid
    np.minimum(at, len(ratios) - 1, out=at)
    out = np.empty(len(n), dtype=np.int64)
    out[order] = at
    return out


def deal(
    sizes: Sequence[int] | np.ndarray,
    keys: Sequence[str] | pl.Series,
    ratios: list[float],
    seed: int,
) -> np.ndarray:
    """deal_order with the groups in a seeded order of their keys (ties: by key): the order
    is random, so group size does not bias where a group goes."""
    k = pl.Series(keys, dtype=pl.String)
    order = np.lexsort((k.rank("ordinal").to_numpy(), seeded(seed, k)))
    return deal_order(np.asarray(sizes, dtype=np.int64), order, ratios)


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
        name: ids_in_several_splits(splits) if name == "id" else cross_split_groups(splits, k)
        for name, k in groupings(items, clusters, shapes, e)
    }


# ------------------------------------------------------------------------ stage I/O


def manifest_groupings(e: ExportConfig, component: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
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
    if e.split_by == "change":
        out.append({"name": "change", "columns": list(CHANGE_COLUMNS)})
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
    by = {"repo": "whole repositories", "change": "whole changes"}.get(e.split_by, "whole groups")
    return f"{e.split_by}: {by} dealt by ratio {r} (train/validation/test), seed {e.seed}; " + (
        f"whole {whole}"
    )


# ------------------------------------------------------------------------ changes across splits

WHOLE_CHANGES = ("change", "repo")  # split rules that keep every change in one split


def sharing_by_source(items: pl.DataFrame, split_of: pl.DataFrame) -> pl.DataFrame:
    """source, held_out, sharing_change (verify.held_out_sharing_change) of the export."""
    splits = items.select("id", "source", *CHANGE_COLUMNS).join(
        split_of.select("id", "split"), on="id", how="inner"
    )
    return held_out_sharing_change(splits)


def sharing_change(counts: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """What the card and the report say about held-out items sharing a change with train,
    from the export manifest's counts and extra: {recorded, sharing, held_out, split_by,
    whole (the rule keeps changes whole), by_source, warning (text, or None)}."""
    split_by = str(extra.get("split_by", "?"))
    whole = split_by in WHOLE_CHANGES
    out: dict[str, Any] = {"split_by": split_by, "whole": whole, "recorded": SHARING in counts}
    if not out["recorded"]:
        out["note"] = "not recorded (the export ran before it counted them)"
        out["warning"] = None
        return out
    n, held = int(counts[SHARING]), int(counts.get("validation", 0)) + int(counts.get("test", 0))
    by = list((extra.get("sharing_change") or {}).get("by_source", []))
    out |= {"sharing": n, "held_out": held, "by_source": by, "warning": None}
    if n:
        worst = sorted((r for r in by if r["sharing_change"]), key=lambda r: -r["sharing_change"])
        per = ", ".join(f"{r['source']} {r['sharing_change']} of {r['held_out']}" for r in worst)
        out["warning"] = (
            f"{n} of {held} validation and test items share a change (repo and commit or pull "
            f"request) with train items: hunks of one commit, with its comment and often its "
            f"text, are on both sides of the split (split_by = {split_by!r} lets a change span "
            f"splits; split_by = 'change', the default, keeps every change whole). "
            f"By source: {per}."
        )
        out["note"] = ""
    elif whole:
        out["note"] = f"0 of {held} (split_by = {split_by!r} keeps every change in one split)"
    else:
        out["note"] = (
            f"0 of {held} in this run, though split_by = {split_by!r} does not keep changes whole"
        )
    return out

"""Shape groups at four scopes, and what the cap and spread policies do with them.

Items are grouped by (where, digit_only [, nearest context line], shape): `change` groups the
same edit shape within one change, `repo` within one repository, `corpus` anywhere. The path
is not part of "where" by default: the same edit made in two files of one commit is one group
(`path_in_key = true` restores per-file groups, and file-name groups at corpus scope). The
`edit` scope groups the same whole normalised edit (before and after, digits, versions,
hashes and whitespace normalised) across the whole corpus; export keeps each in one split.

Everything here works on the compact rows of columns.key_frame (one per item: shape text,
digit flag, per scope the 128-bit sha256 of the group key), never on the items' text. A group
is one distinct key; groups are numbered in key order (the hex shape_key, then the next 64
bits where two keys share it), sizes and ranks are numpy and polars over those rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from pipeline.config import SHAPE_SCOPES, ShapesConfig
from pipeline.dedup.clusters import rank_exprs, sort_best
from pipeline.shapes.columns import key_frame, rank_columns
from pipeline.shapes.sha import hex16, sha256_128

CHUNK = 1 << 16  # shapes rows per written part: bounded memory, not too many row groups
# (rows) -> their path, repo and comment, in that order: for the largest groups' examples
Fetch = Callable[[list[int]], pl.DataFrame]


def _groups(hi: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(group id, group size) per row: one group per distinct (hi, lo), numbered in order."""
    n = len(hi)
    order = np.argsort(hi, kind="stable")
    sh, sl = hi[order], lo[order]
    if ((sh[1:] == sh[:-1]) & (sl[1:] != sl[:-1])).any():  # two keys share 64 bits: rare
        order = np.lexsort((lo, hi))
        sh, sl = hi[order], lo[order]
    new = np.ones(n, bool)
    new[1:] = (sh[1:] != sh[:-1]) | (sl[1:] != sl[:-1])
    ranked = np.cumsum(new, dtype=np.int64) - 1
    gid = np.empty(n, np.int64)
    gid[order] = ranked
    return gid, np.bincount(ranked, minlength=1)[gid].astype(np.int64)


def number_groups(keys: pl.DataFrame) -> pl.DataFrame:
    """keys plus `group_<scope>` and `size_<scope>` for every scope, less the `_l_<scope>`
    words (they only tell groups apart)."""
    cols = []
    for scope in SHAPE_SCOPES:
        gid, size = _groups(keys[f"_k_{scope}"].to_numpy(), keys[f"_l_{scope}"].to_numpy())
        cols += [pl.Series(f"group_{scope}", gid), pl.Series(f"size_{scope}", size)]
    return keys.drop(f"_l_{scope}" for scope in SHAPE_SCOPES).with_columns(cols)


def _size_bucket(n: int) -> str:
    for hi, label in ((1, "1"), (2, "2"), (4, "3-4"), (9, "5-9"), (49, "10-49")):
        if n <= hi:
            return label
    return "50+"


@dataclass
class ShapesResult:
    keys: pl.DataFrame  # key_frame rows (input order) + group_<scope>, size_<scope>
    removed: pl.DataFrame  # _row, scope, group_id, keeper_id
    batch_order: np.ndarray | None  # spread only
    counts: dict[str, Any]
    largest: list[dict[str, Any]]
    by_size: dict[str, dict[str, int]]
    _id_rank: np.ndarray | None = field(default=None, repr=False)

    @property
    def annotations(self) -> pl.DataFrame:
        """Per input row: the group columns annotate adds to kept (described for the dataset
        card in schema.SCOPED_COLUMN_DOCS and COLUMN_DOCS)."""
        cols = [pl.col("_row")]
        for scope in SHAPE_SCOPES:
            cols += [
                pl.col(f"group_{scope}").alias(f"shape_group_{scope}"),
                pl.col(f"size_{scope}").alias(f"shape_size_{scope}"),
            ]
        return self.keys.select(*cols, pl.col("digit_only").alias("shape_digit_only"))

    def id_rank(self) -> np.ndarray:
        """Each row's place in (id, _row) order: shapes rows sort by it within a group."""
        if self._id_rank is None:
            order = self.keys.select(pl.arg_sort_by("id", "_row")).to_series().to_numpy()
            self._id_rank = np.empty(len(order), np.int64)
            self._id_rank[order] = np.arange(len(order))
        return self._id_rank

    def shape_parts(self, chunk: int = 0) -> Iterator[pl.DataFrame]:
        """SHAPES_SCHEMA rows (+ `_row`) for every item at every scope, sorted (scope, group,
        id), a part at a time."""
        rank, chunk = self.id_rank(), chunk or CHUNK
        cols = ["id", "shape_text", "digit_only", "_row"]
        for scope in sorted(SHAPE_SCOPES):
            gid = self.keys[f"group_{scope}"].to_numpy()
            order = np.lexsort((rank, gid))
            for start in range(0, max(len(order), 1), chunk):
                at = order[start : start + chunk]
                part = self.keys.select(*cols, f"_k_{scope}", f"group_{scope}", f"size_{scope}")
                part = part[at]
                yield part.select(
                    "id",
                    pl.lit(scope).alias("scope"),
                    pl.Series("shape_key", hex16(part[f"_k_{scope}"].to_numpy()), pl.String),
                    "shape_text",
                    "digit_only",
                    pl.col(f"group_{scope}").alias("group_id"),
                    pl.col(f"size_{scope}").alias("group_size"),
                    "_row",
                )

    @property
    def shapes(self) -> pl.DataFrame:
        """All of shape_parts in one frame (tests and small runs)."""
        return pl.concat(list(self.shape_parts()))


def cap_groups(keys: pl.DataFrame, s: ShapesConfig, keeper: list[str]) -> pl.DataFrame:
    """Rows removed by `cap` at s.scope: _row, scope, group_id, keeper_id (input row order).

    Within a group, items are ranked as dedup ranks its keepers; the first k stay.
    """
    _, desc = rank_exprs(keeper)
    aliased = {f"_rank{k}": pl.col(name) for k, name in rank_columns(keeper)}
    ranks = [
        aliased.get(f"_rank{k}", pl.col(f"_rank{k}")).alias(f"_rank{k}") for k in range(len(desc))
    ]
    group = pl.col(f"group_{s.scope}").alias("group_id")
    g = keys.select("_row", "id", "digit_only", group, *ranks)
    # keys are in input order and sort_best keeps ties in order: the earlier row ranks first
    ranked = sort_best(g, "group_id", desc)
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


def spread_positions(
    key: np.ndarray, size: np.ndarray, ih: np.ndarray, window: int, seed: int
) -> tuple[np.ndarray, int]:
    """(batch_order per row, conflicts) from each row's group key (64-bit shape_key), group
    size and seeded item hash: see spread_order."""
    n = len(key)
    if n == 0:
        return np.empty(0, np.int64), 0
    uniq, inv = np.unique(key, return_inverse=True)
    named = pl.Series(hex16(uniq), dtype=pl.String)
    gh = sha256_128(f"{seed}\0" + named)[0][inv.reshape(-1)]
    t = np.lexsort((np.arange(n), ih, key, gh, -size))
    nb = -(-n // window)
    last = n - (nb - 1) * window  # slots in the last window
    r, b = np.repeat(np.arange(window), nb), np.tile(np.arange(nb), window)
    pos = (b * window + r)[(b < nb - 1) | (r < last)]
    order = np.empty(n, np.int64)
    order[t] = pos
    win = pl.DataFrame({"k": key[t], "w": pos // window})
    return order, int(n - win.unique().height)


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
    g = shapes.filter(pl.col("scope") == scope).sort("_row")
    key = np.frombuffer(bytes.fromhex("".join(g["shape_key"].to_list())), ">u8")
    ih = df.select(pl.concat_str([pl.lit(str(seed)), "id", "source", "source_ref"], separator="\0"))
    return spread_positions(
        key.astype(np.uint64),
        g["group_size"].to_numpy(),
        sha256_128(ih.to_series())[0],
        window,
        seed,
    )


def _largest(res: ShapesResult, scope: str, fetch: Fetch) -> list[dict[str, Any]]:
    """The ten largest groups at scope (size > 1), each by its first member in id order."""
    k = res.keys
    gid, size = k[f"group_{scope}"].to_numpy(), k[f"size_{scope}"].to_numpy()
    t = np.lexsort((res.id_rank(), gid, -size))
    t = t[size[t] > 1]
    firsts = t[np.r_[True, gid[t][1:] != gid[t][:-1]]][:10] if len(t) else t
    items = fetch([int(x) for x in k["_row"].to_numpy()[firsts]])
    out = []
    for r, item in zip(firsts, items.iter_rows(named=True), strict=True):
        out.append(
            {
                "group_id": int(gid[r]),
                "size": int(size[r]),
                "digit_only": bool(k["digit_only"][int(r)]),
                "path": item["path"],
                "repo": item["repo"],
                "shape_text": k["shape_text"][int(r)][:200],
                "comment": item["comment"][:80],
            }
        )
    return out


def analyse(keys: pl.DataFrame, s: ShapesConfig, keeper: list[str], fetch: Fetch) -> ShapesResult:
    """Groups, the policy's outcome and the figures, from the key_frame rows of every item."""
    keys = number_groups(keys)
    n = keys.height
    removed = pl.DataFrame(
        schema={"_row": pl.Int64, "scope": pl.String, "group_id": pl.Int64, "keeper_id": pl.String}
    )
    order, conflicts = None, 0
    if s.policy == "cap":
        removed = cap_groups(keys, s, keeper)
    elif s.policy == "spread":
        order, conflicts = spread_positions(
            keys[f"_k_{s.scope}"].to_numpy(),
            keys[f"size_{s.scope}"].to_numpy(),
            keys["_ih"].to_numpy(),
            s.window,
            s.seed,
        )
    n_digit = int(keys["digit_only"].sum()) if n else 0
    counts: dict[str, Any] = {
        "items_in": n,
        "kept": n - removed.height,
        "removed": removed.height,
        "digit_only": n_digit,
        "digit_only_share": round(n_digit / n, 4) if n else 0.0,
        "spread_conflicts": conflicts,
    }
    by_size: dict[str, dict[str, int]] = {}
    for scope in SHAPE_SCOPES:
        sizes = np.bincount(keys[f"group_{scope}"].to_numpy()) if n else np.zeros(0, np.int64)
        hist: dict[str, int] = {}
        for k, c in zip(*np.unique(sizes, return_counts=True), strict=True):
            hist[_size_bucket(int(k))] = hist.get(_size_bucket(int(k)), 0) + int(c)
        by_size[scope] = hist
        counts[f"groups_{scope}"] = int((sizes > 1).sum())
        counts[f"grouped_items_{scope}"] = int(sizes[sizes > 1].sum())
    res = ShapesResult(keys, removed, order, counts, [], by_size)
    res.largest = _largest(res, s.scope, fetch)
    return res


def find_shapes(df: pl.DataFrame, s: ShapesConfig, keeper: list[str]) -> ShapesResult:
    """Shapes, groups and the policy's outcome for the items df (item columns)."""
    keys = key_frame(df, s, keeper if s.policy == "cap" else None)
    return analyse(keys, s, keeper, lambda rows: df[rows].select("path", "repo", "comment"))


def group_shapes(df: pl.DataFrame, s: ShapesConfig) -> pl.DataFrame:
    """SHAPES_SCHEMA rows (+ `_row`) for every item at every scope, sorted (scope, group, id)."""
    keys = number_groups(key_frame(df, s.model_copy(update={"policy": "annotate"})))
    return ShapesResult(keys, pl.DataFrame(), None, {}, [], {}).shapes

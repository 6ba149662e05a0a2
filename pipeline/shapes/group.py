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

A group is whole within one range of its key's first 64 bits, so each scope is worked a range
at a time (`scope_range`; the stage's ranges are executors.by_range's, on Ray a task each),
the numbering continued from the ranges before; `Gathered` keeps what the driver needs of
each range. `analyse` runs every scope as one range, in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config import SHAPE_SCOPES, ShapesConfig
from pipeline.dedup.clusters import rank_exprs, sort_best
from pipeline.executors.side import arrays
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


def _size_bucket(n: int) -> str:
    for hi, label in ((1, "1"), (2, "2"), (4, "3-4"), (9, "5-9"), (49, "10-49")):
        if n <= hi:
            return label
    return "50+"


SHAPES = "shapes.parquet"  # the output scope_range makes: SHAPES_SCHEMA rows
SCOPES = sorted(SHAPE_SCOPES)  # the order scopes are worked in, and shapes.parquet's
# annotate's other output of scope_range: per row (`_row`) the group columns kept gets
NOTES = "notes"


def notes_schema(scope: str | None = None) -> pa.Schema:
    """The group columns annotate adds to kept, in kept's order (described for the dataset
    card in schema.SCOPED_COLUMN_DOCS and COLUMN_DOCS); with `scope`, that scope's alone,
    which scope_range makes (the digit flag with the first scope worked in)."""
    fields = []
    for sc in SHAPE_SCOPES if scope is None else [scope]:
        fields += [pa.field(f"shape_{c}_{sc}", pa.int64()) for c in ("group", "size")]
    if scope is None or scope == SCOPES[0]:
        fields.append(pa.field("shape_digit_only", pa.bool_()))
    return pa.schema(fields)


def scope_columns(scope: str, s: ShapesConfig, keeper: list[str], have: list[str]) -> list[str]:
    """The key_frame columns scope_range reads at `scope` (of those the frame has)."""
    want = ["_row", "id", "digit_only", "shape_text", f"_k_{scope}", f"_l_{scope}"]
    if scope == s.scope and s.policy == "cap":
        want += [c for c in have if c.startswith("_rank")]
    if scope == s.scope and s.policy == "spread":
        want.append("_ih")
    return [c for c in have if c in want]


def scope_range(frame: pl.DataFrame, p: int, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """One key range of one scope's groups (executors.by_range: a group is whole in the
    range of its key, the ranges in key order): the groups numbered from `offsets[p]` (the
    groups of the ranges before), the shapes rows sorted (group, id, row), and what the
    driver gathers (Gathered.add): group sizes, the largest groups, cap's removed rows, the
    per-row groups spread needs; for annotate, its rows' group columns as an output (NOTES),
    which the executor joins back to the rows. ctx: (scope, config, keeper, offsets, with
    `_row` in the shapes rows)."""
    scope, s, keeper, offsets, with_rows = ctx
    hi = frame[f"_k_{scope}"].to_numpy()
    local, size = _groups(hi, frame[f"_l_{scope}"].to_numpy())
    sizes, per = np.unique(np.bincount(local), return_counts=True) if len(local) else ((), ())
    g = frame.with_columns(
        pl.Series("_g", local + offsets[p], pl.Int64), pl.Series("_size", size, pl.Int64)
    )
    order = g.select(pl.arg_sort_by("_g", "id", "_row")).to_series()
    want = ["id", "shape_text", "digit_only", "_g", "_size", "_row", f"_k_{scope}"]
    rows = g.select(want)[order]  # one copy: of what the shapes rows hold
    res: dict[str, Any] = {
        "sizes": {int(k): int(c) for k, c in zip(sizes, per, strict=True)},
        "digit_only": int(frame["digit_only"].sum()),
    }
    if scope == s.scope:
        firsts = rows.filter((pl.col("_g") != pl.col("_g").shift(1)).fill_null(True))
        big = firsts.filter(pl.col("_size") > 1)
        res["largest"] = _top_ten(big.select("_g", "_size", "digit_only", "_row", "shape_text"))
        if s.policy == "cap":
            res["removed"] = cap_groups(g.rename({"_g": f"group_{scope}"}), s, keeper)
        if s.policy == "spread":
            res |= {"key": hi, "ih": frame["_ih"].to_numpy()}
    outs: dict[str, Any] = {}
    if s.policy == "spread" and scope == s.scope:
        res |= {"rows": frame["_row"].to_numpy(), "size": size}
    if s.policy == "annotate":  # back to the rows by the executor (batches' side)
        cols = notes_schema(scope).names
        outs[NOTES] = g.select(
            "_row",
            pl.col("_g").alias(cols[0]),
            pl.col("_size").alias(cols[1]),
            *([pl.col("digit_only").alias(cols[2])] if len(cols) > 2 else []),
        )
    out = rows.select(
        "id",
        pl.lit(scope).alias("scope"),
        pl.Series("shape_key", hex16(rows[f"_k_{scope}"].to_numpy()), pl.String),
        "shape_text",
        "digit_only",
        pl.col("_g").alias("group_id"),
        pl.col("_size").alias("group_size"),
        *(["_row"] if with_rows else []),
    )
    return res, {SHAPES: out, **outs}


def _top_ten(groups: pl.DataFrame) -> pl.DataFrame:
    """The ten largest of groups (a row each: _g, _size, ...), larger first, then by number."""
    return groups.sort(["_size", "_g"], descending=[True, False]).head(10)


def group_count(frame: pl.DataFrame, p: int, ctx: Any) -> tuple[int, dict[str, Any]]:
    """How many groups one key range of scope `ctx` holds (by_range): the offsets of the
    ranges after it."""
    k = frame.select(pl.struct(f"_k_{ctx}", f"_l_{ctx}").n_unique()).item() if frame.height else 0
    return int(k), {}


@dataclass
class ShapesResult:
    removed: pl.DataFrame  # _row, scope, group_id, keeper_id (input row order)
    batch_order: np.ndarray | None  # spread only
    counts: dict[str, Any]
    largest: list[dict[str, Any]]
    by_size: dict[str, dict[str, int]]
    shape_rows: list[pl.DataFrame] = field(default_factory=list)  # analyse only
    # analyse only, under annotate: `_row` and the group columns kept gets (notes_schema)
    annotations: pl.DataFrame | None = None

    @property
    def shapes(self) -> pl.DataFrame:
        """SHAPES_SCHEMA rows (+ `_row`) for every item at every scope, sorted (scope,
        group, id): what analyse made (tests and small runs)."""
        return pl.concat(self.shape_rows)


class Gathered:
    """What the driver keeps of the scopes' key ranges (scope_range's results), for the
    policy and the figures: per range its group sizes and largest groups; cap's removed
    rows; per input row the groups spread orders by. Of the
    items' text only the ten largest groups' shapes and cap's keeper ids reach it; the
    other ids and shapes stay in the ranges."""

    def __init__(self, n: int, s: ShapesConfig, keeper: list[str]):
        self.n, self.s, self.keeper = n, s, keeper
        self.sizes: dict[str, dict[int, int]] = {scope: {} for scope in SHAPE_SCOPES}
        self.largest: pl.DataFrame | None = None  # the ten largest groups so far
        self.removed: list[pl.DataFrame] = []
        self.digit_only = 0
        self.per_row: dict[str, np.ndarray] = {}
        if s.policy == "spread":
            self.per_row |= {
                "key": np.zeros(n, np.uint64),
                "size": np.zeros(n, np.int64),
                "ih": np.zeros(n, np.uint64),
            }

    def ctx(self, scope: str, offsets: list[int], with_rows: bool = False) -> tuple[Any, ...]:
        return scope, self.s, self.keeper, offsets, with_rows

    def add(self, scope: str, res: dict[str, Any]) -> None:
        for k, c in res["sizes"].items():
            self.sizes[scope][k] = self.sizes[scope].get(k, 0) + c
        if scope == SCOPES[0]:  # every scope sees every row: count once
            self.digit_only += res["digit_only"]
        if "largest" in res:  # the ten largest so far, not ten a range
            self.largest = _top_ten(
                pl.concat([x for x in (self.largest, res["largest"]) if x is not None])
            )
        self.removed += [res["removed"]] if "removed" in res else []
        if self.s.policy == "spread" and scope == self.s.scope:
            for k in ("key", "size", "ih"):
                self.per_row[k][res["rows"]] = res[k]

    def result(self, fetch: Fetch) -> ShapesResult:
        s, n = self.s, self.n
        removed = (
            pl.concat(self.removed).sort("_row")
            if self.removed
            else pl.DataFrame(
                schema={
                    "_row": pl.Int64,
                    "scope": pl.String,
                    "group_id": pl.Int64,
                    "keeper_id": pl.String,
                }
            )
        )
        order, conflicts = None, 0
        if s.policy == "spread":
            r = self.per_row
            order, conflicts = spread_positions(r["key"], r["size"], r["ih"], s.window, s.seed)
        counts: dict[str, Any] = {
            "items_in": n,
            "kept": n - removed.height,
            "removed": removed.height,
            "digit_only": self.digit_only,
            "digit_only_share": round(self.digit_only / n, 4) if n else 0.0,
            "spread_conflicts": conflicts,
        }
        by_size: dict[str, dict[str, int]] = {}
        for scope in SHAPE_SCOPES:
            hist: dict[str, int] = {}
            for k in sorted(self.sizes[scope]):
                hist[_size_bucket(k)] = hist.get(_size_bucket(k), 0) + self.sizes[scope][k]
            by_size[scope] = hist
            big = {k: c for k, c in self.sizes[scope].items() if k > 1}
            counts[f"groups_{scope}"] = sum(big.values())
            counts[f"grouped_items_{scope}"] = sum(k * c for k, c in big.items())
        return ShapesResult(removed, order, counts, self._largest(fetch), by_size)

    def _largest(self, fetch: Fetch) -> list[dict[str, Any]]:
        """The ten largest groups at the policy's scope (size > 1), each by its first
        member in id order."""
        top = self.largest
        if top is None:
            return []
        items = fetch([int(r) for r in top["_row"]])
        out = []
        for g, item in zip(top.iter_rows(named=True), items.iter_rows(named=True), strict=True):
            out.append(
                {
                    "group_id": int(g["_g"]),
                    "size": int(g["_size"]),
                    "digit_only": bool(g["digit_only"]),
                    "path": item["path"],
                    "repo": item["repo"],
                    "shape_text": g["shape_text"][:200],
                    "comment": item["comment"][:80],
                }
            )
        return out


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


def analyse(keys: pl.DataFrame, s: ShapesConfig, keeper: list[str], fetch: Fetch) -> ShapesResult:
    """Groups, the policy's outcome, the figures and the shapes rows (`shape_rows`, with
    `_row`), from the key_frame rows of every item: every scope in one key range, as a
    local run's stage makes them."""
    gathered = Gathered(keys.height, s, keeper)
    rows, notes = [], []
    for scope in SCOPES:
        cols = scope_columns(scope, s, keeper, keys.columns)
        res, outs = scope_range(keys.select(cols), 0, gathered.ctx(scope, [0], with_rows=True))
        gathered.add(scope, res)
        rows.append(outs[SHAPES])
        notes += [outs[NOTES]] if NOTES in outs else []
    out = gathered.result(fetch)
    out.shape_rows = rows
    if notes:  # as the executor joins them to kept's rows (executors/side.py)
        laid = arrays(notes, 0, keys.height, notes_schema())
        out.annotations = pl.DataFrame(
            {"_row": np.arange(keys.height, dtype=np.int64)}
            | dict(zip(notes_schema().names, laid, strict=True))
        )
    return out


def find_shapes(df: pl.DataFrame, s: ShapesConfig, keeper: list[str]) -> ShapesResult:
    """Shapes, groups and the policy's outcome for the items df (item columns)."""
    keys = key_frame(df, s, keeper if s.policy == "cap" else None)
    return analyse(keys, s, keeper, lambda rows: df[rows].select("path", "repo", "comment"))


def group_shapes(df: pl.DataFrame, s: ShapesConfig) -> pl.DataFrame:
    """SHAPES_SCHEMA rows (+ `_row`) for every item at every scope, sorted (scope, group, id)."""
    s = s.model_copy(update={"policy": "annotate"})
    return find_shapes(df, s, []).shapes

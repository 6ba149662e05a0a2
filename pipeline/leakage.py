"""The export's leakage check as partitioned work: from the split files and the groupings'
inputs that the export manifest names, the groups with items in two or more splits and the
held-out rows that share a change with train, counted a key range at a time
(executors.by_range), so that on Ray the driver holds none of the rows.

The counts are verify's (ids_in_several_splits, cross_split_groups, held_out_sharing_change
define them on frames, verify.leakage_in_memory over the split files read whole): the
runner's check after export counts them here on Ray. (In one process the frames take less
memory than the member rows, so verify and a local run keep them.)

1. members, a batch at a time: each split file's rows (id and split), their keys of the
   groupings named by columns (repo; a change's repo and change, when both are known) and,
   for the sharing count, their change; each grouping input's (id, key) rows (dedup's
   components, a scope's shape groups), whose split is not yet known.
2. by range of the id's hash: an id's rows meet, so ids in two or more splits are counted and
   each input row takes the split (or splits) of its id; the keyed rows stay with the workers.
3. by range of the key's hash: the keys of each grouping whose rows are in two or more splits,
   and the held-out rows of a change that has a train row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config import Config
from pipeline.keys import arrow_schema, key_hash, text_key, unsigned
from pipeline.parts import as_frame, num_rows
from pipeline.schema import CHANGE_COLUMNS, known
from pipeline.shapes.sha import sha256_128
from pipeline.storage import Location, under

ROWS = -1  # a split file's row: its id and split
SHARE = -2  # a split file's row's change (repo and change, both known), for the sharing count
UNKNOWN = -1  # the split of an input's row, until its id's rows give it
MEMBERS = "members"
KEYED = "keyed"
BATCH = 50_000

_U64 = pl.UInt64
_MEMBER: dict[str, Any] = {"_o": _U64, "id": pl.String, "kind": pl.Int8, "k1": _U64}
_MEMBER |= {"k2": _U64, "split": pl.Int8, "source": pl.String}
_KEYED: dict[str, Any] = {"_h": _U64, "kind": pl.Int8, "k1": _U64, "k2": _U64}
_KEYED |= {"_o": _U64, "split": pl.Int8, "source": pl.String}


def _members(ids: pl.Series, kind: int, k1: Any, k2: Any, split: int, source: Any) -> pl.DataFrame:
    n = len(ids)
    o = sha256_128(ids)[0] if n else np.zeros(0, np.uint64)  # where an id's rows meet
    cols = {"_o": o, "id": ids, "kind": np.full(n, kind, np.int8), "k1": k1, "k2": k2}
    cols |= {"split": np.full(n, split, np.int8), "source": source}
    return pl.DataFrame(cols, schema=_MEMBER)


def split_batch(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Members of one batch of split `code`'s rows: the rows, their keys of the column
    groupings (kind: the grouping's index) and, with `sharing`, their changes."""
    code, groupings, sharing = ctx
    f = as_frame(batch)
    none = pl.Series([None] * f.height, dtype=pl.String)
    zero = np.zeros(f.height, np.uint64)
    out = [_members(f["id"], ROWS, zero, zero, code, none)]
    for kind, g in enumerate(groupings):
        cols = [g["column"]] if g.get("column", "id") != "id" else g.get("columns")
        if cols:
            k = f.filter(known(cols)) if "columns" in g else f  # a repo key may be empty
            out.append(_members(k["id"], kind, *text_key(k, cols), code, none[: k.height]))
    if sharing:
        k = f.filter(known(CHANGE_COLUMNS))
        out.append(_members(k["id"], SHARE, *text_key(k, CHANGE_COLUMNS), code, k["source"]))
    return {MEMBERS: pl.concat(out)}, {}


def input_batch(batch: pa.RecordBatch, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Members of one batch of a grouping's input: (id, key) rows, of one scope where the
    grouping names one; their split comes from their id's rows (pass 2)."""
    kind, g = ctx
    f = as_frame(batch)
    if "scope" in g:
        f = f.filter(pl.col("scope") == g["scope"])
    zero = np.zeros(f.height, np.uint64)
    none = pl.Series([None] * f.height, dtype=pl.String)
    return {MEMBERS: _members(f["id"], kind, unsigned(f[g["key"]]), zero, UNKNOWN, none)}, {}


def joined(frame: pl.DataFrame, p: int, ctx: Any) -> tuple[int, dict[str, Any]]:
    """An id range: its ids with rows in two or more splits, and every member with its split
    (an input's row, once per split of its id), keyed by the key's hash."""
    rows = frame.filter(pl.col("kind") == ROWS).select("id", "split").unique()
    twice = rows.group_by("id").agg(pl.col("split").n_unique() > 1)["split"].sum()
    members = frame.filter(pl.col("kind") != ROWS)
    have = members.filter(pl.col("split") != UNKNOWN)
    found = members.filter(pl.col("split") == UNKNOWN).drop("split").join(rows, on="id")
    keyed = pl.concat([have, found.select(have.columns)])
    h = key_hash(keyed["kind"], keyed["k1"], keyed["k2"])
    keyed = keyed.select(pl.Series("_h", h, _U64), *list(_KEYED)[1:])
    return int(twice), {KEYED: keyed}


def spanning(
    frame: pl.DataFrame, ident: str, change: int, train: int
) -> tuple[dict[int, int], dict[str, int]]:
    """Keyed rows (kind, k1, k2, split, source and `ident`, an id's identity) -> per kind
    (>= 0), the keys whose rows are in two or more splits, a key of one id left to the id
    count (as cross_split_groups does); and per source, the held-out rows of kind `change`
    whose key has a row in split `train` (held_out_sharing_change). Export's own checks
    (export/assign.py) and the leakage check count with it."""
    key = ["kind", "k1", "k2"]
    groups = frame.filter(pl.col("kind") >= 0)
    per = groups.group_by(key).agg(pl.col("split").n_unique() > 1, pl.col(ident).n_unique() > 1)
    cross = per.filter(pl.col("split") & pl.col(ident)).group_by("kind").len()
    rows = frame.filter(pl.col("kind") == change)
    trained = (pl.col("split") == train).any().over(key)
    shared = rows.filter(trained & (pl.col("split") != train)).group_by("source").len()
    return (
        dict(zip(cross["kind"].to_list(), cross["len"].to_list(), strict=True)),
        dict(zip(shared["source"].to_list(), shared["len"].to_list(), strict=True)),
    )


def crossed(frame: pl.DataFrame, p: int, ctx: Any) -> tuple[tuple[dict[int, int], int], dict]:
    """A key range: per grouping (its index), the keys with rows in two or more splits; and
    the held-out rows of a change that has a train row (split `ctx`)."""
    (train,) = ctx
    cross, shared = spanning(frame, "_o", SHARE, train)  # `_o`: the id's hash
    return (cross, sum(shared.values())), {}


def leakage_counts(
    cfg: Config, d: Location, leak: dict[str, Any], sharing: bool
) -> tuple[list[int], int]:
    """Per grouping of the export manifest's `leak`, the groups with items in two or more
    splits; and the held-out rows sharing a change with train (counted with `sharing`)."""
    from pipeline.executors import batches, by_range, range_count

    files = {name: under(d, f) for name, f in leak["splits"].items()}
    groupings = list(leak.get("groupings", []))
    names = list(files)
    train = names.index("train") if "train" in names else UNKNOWN
    columns = {"id", "source", *CHANGE_COLUMNS}
    columns |= {g["column"] for g in groupings if "column" in g}
    columns |= {c for g in groupings for c in g.get("columns", [])}
    held = {MEMBERS: arrow_schema(_MEMBER)}
    pieces: list[Any] = []
    rows = 0
    for code, path in enumerate(files.values()):
        rows += num_rows(path)
        ctx = (code, groupings, sharing)
        cols = sorted(columns)
        for outs, _, _ in batches(cfg, path, split_batch, ctx, BATCH, cols, held=held):
            pieces += [outs[MEMBERS]] if MEMBERS in outs else []
    for kind, g in enumerate(groupings):
        if "input" in g:
            cols = ["id", g["key"], *(["scope"] if "scope" in g else [])]
            src = under(d, g["input"])
            for outs, _, _ in batches(cfg, src, input_batch, (kind, g), BATCH, cols, held=held):
                pieces += [outs[MEMBERS]] if MEMBERS in outs else []
    count = range_count(cfg, rows)
    pieces = pieces or [pl.DataFrame(schema=_MEMBER)]
    twice, keyed = 0, []
    for n, outs in by_range(
        cfg, pieces, "_o", list(_MEMBER), count, joined, None, {KEYED: arrow_schema(_KEYED)}
    ):
        twice += n
        keyed += [outs[KEYED]] if KEYED in outs else []
    del pieces
    totals: dict[int, int] = {}
    shared = 0
    keyed = keyed or [pl.DataFrame(schema=_KEYED)]
    for (per, n), _ in by_range(cfg, keyed, "_h", list(_KEYED), count, crossed, (train,), {}):
        for k, v in per.items():
            totals[k] = totals.get(k, 0) + v
        shared += n
    # an id is no key: its rows met in pass 2
    cross = [
        twice if g.get("column") == "id" else totals.get(k, 0) for k, g in enumerate(groupings)
    ]
    return cross, shared

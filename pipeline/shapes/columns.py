"""Shape columns of a batch of items, column-wise: what normalise.edit_shape_refs computes per
item, with no Python call per item.

Both sides' texts go into one Arrow buffer; the compiled kernels split it into lines, normalise
every line (scan.py; the Python reference only for lines that are not ASCII text), diff each
item's lines with difflib's semantics and join the changed lines into its shape, and each
side's lines into its edit key. `key_frame` turns a batch into the compact per-item rows the
stage keeps: the shape text, the digit-only flag and, per scope, the 128-bit sha256 of the
group key; never the item's text.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config import SHAPE_SCOPES, ShapesConfig
from pipeline.dedup.clusters import TIE_BREAK, rank_exprs
from pipeline.nfc import nfc_columns
from pipeline.shapes import kernels as K
from pipeline.shapes.normalise import (
    _COUNTS,
    collapse_ws,
    edit_key_expr,
    nearest_context_expr,
    nearest_context_line,
    normalise_line,
    ref_names,
    ref_names_expr,
    ref_sub,
    ref_sub_expr,
    vectorised,
)
from pipeline.shapes.scan import normalise_lines
from pipeline.shapes.sha import sha256_128


def _arrow(s: pl.Series) -> pa.Array:
    arr = s.to_arrow(compat_level=pl.CompatLevel.oldest())
    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _series(data: np.ndarray, offsets: np.ndarray) -> pl.Series:
    return pl.Series(K.from_buffers(data, offsets))


def _patch(
    col: tuple[np.ndarray, np.ndarray], at: np.ndarray, values: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The (bytes, offsets) column with the strings at `at` replaced."""
    s = _series(*col).scatter(pl.Series(at, dtype=pl.Int64), values)
    return K.buffers(_arrow(s))


def shape_columns(df: pl.DataFrame, context_key: bool = False) -> pl.DataFrame:
    """_row, shape_text, digit_only, _ctx (nearest context line and, for a digit-only edit,
    the references its shape stopped naming: context_key tells bumps apart) and _edit."""
    n = df.height
    texts = pa.concat_arrays([_arrow(df["before"]), _arrow(df["after"])])
    data, offsets = K.buffers(texts)
    blank = np.concatenate(
        [
            (df[c].fill_null(0) > 0).to_numpy() if c in df.columns else np.zeros(n, bool)
            for c in _COUNTS
        ]
    ).astype(np.bool_)
    starts, ends, line_off = K.split_lines(data, offsets, blank)
    cdata, coff, ndata, noff, odd = normalise_lines(data, starts, ends)
    odd_lines = np.flatnonzero(odd)
    if odd_lines.size:  # not ASCII text: Python's regex decides, as the reference does
        raw = [data[starts[i] : ends[i]].tobytes().decode() for i in odd_lines]
        cdata, coff = _patch((cdata, coff), odd_lines, [collapse_ws(x) for x in raw])
        ndata, noff = _patch((ndata, noff), odd_lines, [normalise_line(x) for x in raw])
    for a in (cdata, coff, ndata, noff):  # read-only as _patch's (Arrow's): one kernel type
        a.setflags(write=False)
    empty = offsets[1:] == offsets[:-1]
    changed, digit = K.diff_digit(data, starts, ends, cdata, coff, ndata, noff, line_off, empty)
    shape = _series(*K.join_lines(ndata, noff, changed, line_off, False))
    edit = _series(*K.join_lines(ndata, noff, changed, line_off, True))
    if odd_lines.size:  # the edit key is polars' regex over the whole text, for every row
        texts_at = np.searchsorted(line_off, odd_lines, side="right") - 1
        rows = pl.Series(np.unique(texts_at % n), dtype=pl.Int64)
        key = pl.concat_str([edit_key_expr("before"), edit_key_expr("after")], separator="\x1f")
        edit = edit.scatter(rows, df[rows].select(key).to_series())
    ctx = pl.repeat("", n, dtype=pl.String, eager=True)
    bumps = pl.Series(np.flatnonzero(digit), dtype=pl.Int64)
    if bumps.len():
        if context_key:
            names = vectorised(shape.gather(bumps), ref_names_expr, ref_names)
            ctx = ctx.scatter(bumps, ("\x1e" + names).zip_with(names != "", names))
        shape = shape.scatter(bumps, vectorised(shape.gather(bumps), ref_sub_expr, ref_sub))
    if context_key:
        ctx = vectorised(df["context"], nearest_context_expr, nearest_context_line) + ctx
    return pl.DataFrame(
        {
            "_row": np.arange(n, dtype=np.int64),
            "shape_text": shape,
            "digit_only": digit,
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


def _where(scope: str, path_in_key: bool) -> pl.Expr:
    """The part of a group key that says where the edit was made."""
    if scope == "edit":
        return pl.lit("")
    if scope == "corpus":
        return pl.col("path").str.split("/").list.last() if path_in_key else pl.lit("")
    cols: list[str | pl.Expr] = ["repo"]
    if scope == "change":
        # "" is no known change (a source without one): each such item is its own change, or
        # every item of the source would be grouped as one change.
        own = pl.concat_str([pl.lit("\x1e"), pl.col("id")])
        cols.append(pl.when(pl.col("change") == "").then(own).otherwise(pl.col("change")))
    return pl.concat_str([*cols, *(["path"] if path_in_key else [])], separator="\0")


# the item columns a group key is made of (shape_columns and _where)
KEY_COLUMNS = ["before", "after", "context", "repo", "change", "path"]


def rank_columns(keeper: list[str]) -> list[tuple[int, str]]:
    """(k, input column) of the `_rank{k}` keys that are a plain column the key frame keeps
    anyway ("id"): cap aliases them then instead of holding a second copy."""
    keys = [k.lstrip("-") for k in [*keeper, *TIE_BREAK]]
    return [(k, name) for k, name in enumerate(keys) if name == "id"]


def key_frame(
    df: pl.DataFrame,
    s: ShapesConfig,
    keeper: list[str] | None = None,
    offset: int = 0,
) -> pl.DataFrame:
    """The compact rows of the items df (input rows offset...): _row, id, digit_only,
    shape_text, per scope `_k_<scope>` / `_l_<scope>` (the group key's sha256: the hex
    shape_key's 64 bits, then 64 more that tell keys apart) and, for the policy: cap's
    `_rank<k>` columns (keeper given), spread's `_ih` (the item's seeded hash).

    Every key is taken over the text in NFC (pipeline/nfc.py): an edit and its NFD twin
    share each group. The rank and `_ih` columns read the items as they are."""
    keyed = nfc_columns(df, KEY_COLUMNS)
    cols = shape_columns(keyed, s.context_key)
    base = pl.concat([keyed.select("id", "repo", "change", "path"), cols], how="horizontal")
    del keyed
    shape = pl.concat_str(
        [pl.col("digit_only").cast(pl.String), pl.col("_ctx"), pl.col("shape_text")],
        separator="\x1f",
    )
    texts = base.select(
        pl.concat_str(
            [pl.lit(scope), _where(scope, s.path_in_key), "_edit" if scope == "edit" else shape],
            separator="\x1f",
        ).alias(scope)
        for scope in SHAPE_SCOPES
    )
    del base
    out = df.select("id").with_columns(
        _row=pl.int_range(offset, offset + df.height, dtype=pl.Int64),
        digit_only=cols["digit_only"],
        shape_text=cols["shape_text"],
    )
    words = {}
    for scope in SHAPE_SCOPES:
        hi, lo = sha256_128(texts[scope])
        words[f"_k_{scope}"], words[f"_l_{scope}"] = hi, lo
    out = out.with_columns(pl.DataFrame(words, schema=dict.fromkeys(words, pl.UInt64)))
    if keeper is not None:
        exprs, _ = rank_exprs(keeper)
        aliased = {k for k, _ in rank_columns(keeper)}
        out = out.with_columns(
            df.select(e for k, e in enumerate(exprs) if k not in aliased).get_columns()
        )
    if s.policy == "spread":
        ih = df.select(
            pl.concat_str([pl.lit(str(s.seed)), "id", "source", "source_ref"], separator="\0")
        )
        out = out.with_columns(_ih=pl.Series(sha256_128(ih.to_series())[0]))
    return out.select("_row", pl.exclude("_row"))

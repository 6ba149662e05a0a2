"""Record sizes of an Arrow batch (Parquet, a saved `datasets` dataset), for
`ingest.max_record_bytes`.

A JSON or CSV reader bounds a record by the bytes of its line; an Arrow row has no line, and
a highly compressed Parquet file can hold one 300 MiB string in 10 KB. So a batch's rows are
sized from the column offsets alone (string and binary lengths, summed through lists,
structs, maps and dictionaries; fixed-width values by their width) before any value becomes a
Python object: a row over the limit is an error record naming its size and its largest field,
and only the other rows are converted into items.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

RAW_KEEP = 16 * 1024  # characters of the largest field kept as an over-large row's raw


def _sizes(arr: pa.Array) -> np.ndarray:
    """Bytes of each value of `arr` (0 for a null), from offsets and widths only."""
    t, n = arr.type, len(arr)
    if n == 0:
        return np.zeros(0, np.int64)
    if pa.types.is_dictionary(t):
        per = pa.array(_sizes(arr.dictionary))
        return _numpy(pc.take(per, arr.indices))
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return _numpy(pc.binary_length(arr))
    if pa.types.is_struct(t):
        total = np.zeros(n, np.int64)
        for child in arr.flatten():  # the struct's offset and nulls applied
            total += _sizes(child)
        return total
    if pa.types.is_fixed_size_list(t):
        return _sizes(arr.flatten()).reshape(n, t.list_size).sum(axis=1)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t):
        cum = np.concatenate([[0], np.cumsum(_sizes(arr.values))])
        off = arr.offsets.to_numpy()  # n + 1 positions into the (unsliced) values
        return (cum[off[1:]] - cum[off[:-1]]).astype(np.int64)
    if pa.types.is_null(t):  # an all-null column (`datasets` Value("null"), pandas' None)
        return np.zeros(n, np.int64)
    if isinstance(t, pa.ExtensionType):
        return _sizes(arr.storage)
    return _other_sizes(arr, t, n)


def _other_sizes(arr: pa.Array, t: pa.DataType, n: int) -> np.ndarray:
    """_sizes of the view, run-end-encoded and union types, and of fixed-width values (their
    width). A type of none of these kinds has no width to ask for (pyarrow raises): each of
    its values counts as the whole array's bytes, so an unknown type is never under-sized."""
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return _numpy(pc.binary_length(arr.cast(pa.large_binary())))
    if pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        cum = np.concatenate([[0], np.cumsum(_sizes(arr.values))])
        off, size = arr.offsets.to_numpy(), arr.sizes.to_numpy()  # null slots: size 0 or any
        return (cum[off + size] - cum[off]).astype(np.int64)
    if pa.types.is_run_end_encoded(t):  # sized per run, never decoded (one value x 1M rows)
        ends = arr.run_ends.to_numpy()
        runs = np.searchsorted(ends, np.arange(arr.offset, arr.offset + n), side="right")
        return _sizes(arr.values)[runs]
    if pa.types.is_union(t):
        codes = arr.type_codes.to_numpy(zero_copy_only=False)
        child = {code: _sizes(arr.field(i)) for i, code in enumerate(t.type_codes)}
        out = np.zeros(n, np.int64)
        at = arr.offsets.to_numpy() if t.mode == "dense" else np.arange(n)
        for code, sizes in child.items():
            rows = codes == code
            out[rows] = sizes[at[rows]]
        return out
    try:
        width = t.bit_width  # fixed width
    except ValueError:  # a type with no fixed width and no case above
        return np.full(n, arr.nbytes, np.int64)
    return np.full(n, max(width // 8, 1), np.int64)


def _numpy(lengths: pa.Array) -> np.ndarray:
    """Lengths as int64, a null's 0."""
    out = lengths.to_numpy(zero_copy_only=False)  # floats, NaN for a null, when it has one
    return np.nan_to_num(out).astype(np.int64) if lengths.null_count else out.astype(np.int64)


def oversized(batch: pa.RecordBatch, limit: int) -> dict[int, tuple[str, str]]:
    """Row index -> (reason, raw) for each row of `batch` whose values hold more than `limit`
    bytes: the reason names the total and the largest field with its size, the raw is that
    field's first characters when it is text (empty otherwise)."""
    if batch.num_rows == 0 or batch.num_columns == 0:
        return {}
    per = np.stack([_sizes(col) for col in batch.columns])  # columns x rows
    total = per.sum(axis=0)
    out: dict[int, tuple[str, str]] = {}
    for k in np.flatnonzero(total > limit).tolist():
        c = int(per[:, k].argmax())
        name = batch.schema.names[c]
        reason = (
            f"record too large: {int(total[k])} bytes > {limit} "
            f"(field {name!r}: {int(per[c, k])} bytes)"
        )
        out[k] = (reason, _head(batch.column(c), k))
    return out


def _head(col: pa.Array, k: int) -> str:
    """The first RAW_KEEP characters of text value `k`, sliced in Arrow (the value is never
    turned into a Python string whole); "" for any other type."""
    one = col.slice(k, 1)
    if pa.types.is_string(one.type) or pa.types.is_large_string(one.type):
        return str(pc.utf8_slice_codeunits(one, 0, RAW_KEEP)[0].as_py() or "")
    return ""

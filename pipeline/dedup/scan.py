"""Dedup's pass over its input, batch by batch, and the exact groups it gives.

Per row only small columns stay in memory: the values the keeper rank sorts by, whether the
row is blank, and a 128-bit hash of its shingled text in NFC (rows with equal hashes have the
same content: exact duplicates need no text; an edit and its NFD twin are exact duplicates).
Not the id: exact_groups reads the ids again to sort them, and keeps them on disk in that
order (the outputs name the few items they need by id).
Shingle sets and band keys go to the working files (store.py) as each batch is done, so the
text of only one batch is ever held.

The keeper rank's tie-break (id, source, source_ref) and an `id` key are replaced by integer
positions in that order, so sorting by them gives the same order without keeping the
strings: `_pos` is a row's position in (id, source, source_ref) order (input order among
equal triples), and `_id_first` the first position of its id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config import Config, DedupConfig
from pipeline.dedup import clusters as C
from pipeline.dedup import ids
from pipeline.dedup.change import change_sets
from pipeline.dedup.lsh import band_keys
from pipeline.dedup.minhash import permutations
from pipeline.dedup.shingles import signed_sets
from pipeline.dedup.store import Store
from pipeline.jit import warm_items
from pipeline.memory import release
from pipeline.nfc import nfc_columns
from pipeline.parts import as_frame

SUB_BATCH = 25_000  # rows shingled at once: the shingle kernel's buffer is 4 bytes per byte
HASH_SEEDS = (0, 0x9E3779B97F4A7C15)


def needed_columns(d: DedupConfig) -> list[str]:
    """The input columns dedup reads: identity, shingled fields, and what the keeper rank uses."""
    rank = [c for k in d.keeper for c in C.RANK_COLUMNS[k.lstrip("-")]]
    return list(dict.fromkeys(["id", "source", "source_ref", *d.fields, *rank]))


def scanned_columns(d: DedupConfig) -> list[str]:
    """The input columns scan_batch reads: needed_columns less those only exact_groups reads
    again (the id and its tie-break)."""
    return [c for c in needed_columns(d) if c not in C.TIE_BREAK]


def rank_columns(d: DedupConfig) -> tuple[list[str], list[bool]]:
    """The columns rows are ranked by (best first) and which sort descending: one per keeper
    key, then `_pos` for the (id, source, source_ref) tie-break."""
    cols = [f"_rank{k}" for k in range(len(d.keeper))]
    return [*cols, "_pos"], [*(k.startswith("-") for k in d.keeper), False]


def rank_order(frame: pl.DataFrame, d: DedupConfig, first: np.ndarray | None = None) -> np.ndarray:
    """The order of frame's rows best-ranked first (by `first` before the rank, if given), as
    frame.sort([first, *rank columns], descending, nulls_last=True) gives it, made with a
    numpy lexsort: a polars sort of millions of rows leaves about 90 bytes a row allocated."""
    cols, desc = rank_columns(d)
    keys = []  # np.lexsort: the last key is the primary one
    for c, down in zip(reversed(cols), reversed(desc), strict=True):
        s = frame[c]
        if s.dtype.is_integer() and not s.null_count():
            v = s.to_numpy()  # (no copy)
        else:  # a date, or with nulls
            v = s.cast(pl.Int64).fill_null(0).to_numpy()
        keys.append(~v if down else v)  # ~v = -v - 1: the order reversed, and no overflow
        if s.null_count():
            keys.append(s.is_null().to_numpy())  # nulls last, whichever the direction
    if first is not None:
        keys.append(first)
    return np.lexsort(keys) if len(frame) else np.empty(0, np.int64)


def content_hash(text: pl.DataFrame, fields: list[str]) -> pl.DataFrame:
    """`_h0`, `_h1`: two 64-bit hashes of each row's fields (null as ""); equal text gives
    equal hashes, and 128 bits make a collision of distinct text out of reach. The caller
    gives the text in NFC (scan_batch), so NFC and NFD twins are exact duplicates."""
    s = pl.struct([pl.col(f).cast(pl.String).fill_null("") for f in fields])
    return text.select(
        s.hash(seed=HASH_SEEDS[0]).alias("_h0"), s.hash(seed=HASH_SEEDS[1]).alias("_h1")
    )


def scan_context(d: DedupConfig) -> tuple[DedupConfig, np.ndarray, np.ndarray]:
    """What scan_batch needs besides the batch: the config and the MinHash permutations."""
    return (d, *permutations(d.num_perm, d.seed))


def scan_batch(batch: pa.RecordBatch | pa.Table, ctx: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The per-item work of dedup on one input batch, a pure function any executor runs:
    `rows` (the keeper rank's values `_rank{k}`, `_blank`, `_h0`, `_h1`) and `sets` (each
    row's sorted shingle set and its band keys, made with its MinHash signature in one pass,
    and, when d.checks_change, its change set)."""
    d, a, b = ctx
    fields = list(d.fields)
    blank = pl.all_horizontal(
        (pl.col(f) == "") if d.shingle == "chars" else (pl.col(f).str.strip_chars() == "")
        for f in fields
    ).alias("_blank")
    ranks = [
        (C.RANK_KEYS[k.lstrip("-")]() if k.lstrip("-") != "id" else pl.lit(0)).alias(f"_rank{i}")
        for i, k in enumerate(d.keeper)
    ]
    df = pl.DataFrame(pl.from_arrow(batch))
    # NFC (pipeline/nfc.py): an edit and its NFD twin hash and shingle alike
    text = nfc_columns(df.select(pl.col(f).fill_null("") for f in fields), fields)
    small = df.select(*ranks, text.select(blank).to_series())  # (ids: read again, exact_groups)
    del df
    sh, ch, keys = _Csr(), _Csr(), []
    for s in range(0, text.height, SUB_BATCH):
        cols = [text[f].slice(s, SUB_BATCH).to_arrow() for f in fields]
        offs, vals, sig = signed_sets(cols, fields, d.ngram, d.shingle, a, b)
        keys.append(band_keys(sig, np.arange(len(sig), dtype=np.int64), 0, d.bands, d.rows).T)
        sh.add(offs, vals)
        if d.checks_change:
            b_, a_ = (text[f].slice(s, SUB_BATCH).to_arrow() for f in ("before", "after"))
            ch.add(*change_sets(b_, a_, d.ngram))
    key = np.concatenate(keys) if keys else np.empty((0, d.bands), np.uint64)
    sets = {
        "shingles": sh.array(),
        "band_keys": pa.FixedSizeListArray.from_arrays(key.ravel(), d.bands),
    }
    if d.checks_change:
        sets["change"] = ch.array()
    rows = pl.concat([small, content_hash(text, fields)], how="horizontal")
    return {"rows": rows, "sets": pa.table(sets)}, {}


def warm(cfg: Config) -> None:
    """Compiles the shingle and change kernels: scan_batch over jit.warm_items, as the stage
    reads its input (find.warm compiles the rest of the stage's, at the same time)."""
    items = warm_items()
    scan_batch(items.select(scanned_columns(cfg.dedup)), scan_context(cfg.dedup))


class _Csr:
    """CSR sets of consecutive sub-batches, joined into one list array."""

    def __init__(self) -> None:
        self.offsets: list[np.ndarray] = [np.zeros(1, np.int64)]
        self.values: list[np.ndarray] = []

    def add(self, offs: np.ndarray, vals: np.ndarray) -> None:
        self.offsets.append(offs[1:] + self.offsets[-1][-1])
        self.values.append(vals)

    def array(self) -> pa.Array:
        flat = np.concatenate(self.values) if self.values else np.empty(0, np.uint32)
        return pa.LargeListArray.from_arrays(np.concatenate(self.offsets), flat)


def collect(
    results: Iterable[tuple[dict[str, Any], int]],
    d: DedupConfig,
    store: Store,
    advance: Callable[[int], None] | None = None,
) -> pl.DataFrame:
    """scan_batch's results in input order: `rows` concatenated (one row per input row), each
    row's shingle set and band keys appended to `store`, which is then sealed."""
    frames = []
    for outs, n in results:
        if "rows" in outs:  # (a batch of no rows may have none)
            frames.append(as_frame(outs["rows"]))
        if "sets" in outs:  # (on Ray already in the files: ray_sets.on_node)
            sets = outs["sets"].combine_chunks()
            if sets.num_rows:
                store.add(*unpack(sets, d.bands, store.has_change))
            del sets
        del outs
        if advance:
            advance(n)
    store.seal()
    release()
    if not frames:
        return pl.DataFrame(schema=rows_schema(d))
    return pl.concat(frames, rechunk=False)  # (exact_groups gathers it a column at a time)


def unpack(
    sets: pa.Table, bands: int, change: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """scan_batch's `sets` (one chunk, some rows) as Store.add takes them: CSR shingle sets,
    band keys (uint64[bands, N]) and, with `change`, CSR change sets."""
    key = sets.column("band_keys").chunk(0).flatten().to_numpy()
    return (
        *_csr(sets, "shingles"),
        key.reshape(-1, bands).T,
        _csr(sets, "change") if change else None,
    )


def held_schemas(d: DedupConfig) -> dict[str, pa.Schema]:
    """The schema of scan_batch's `sets`, for an executor that keeps them with its workers
    (`rows` as they are: their rank columns' types follow dedup.keeper)."""
    sets = [("shingles", pa.large_list(pa.uint32()))]
    sets.append(("band_keys", pa.list_(pa.uint64(), d.bands)))
    if d.checks_change:
        sets.append(("change", pa.large_list(pa.uint32())))
    return {"sets": pa.schema(sets)}


def rows_schema(d: DedupConfig) -> dict[str, pl.DataType]:
    """The columns of scan_batch's `rows`, and their types."""
    ranks: dict[str, pl.DataType] = {f"_rank{i}": pl.Int32() for i in range(len(d.keeper))}
    return ranks | {"_blank": pl.Boolean(), "_h0": pl.UInt64(), "_h1": pl.UInt64()}


def _csr(sets: pa.Table, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(offsets from 0, values) of a list column of one chunk."""
    col = sets.column(name).chunk(0)
    offs = col.offsets.to_numpy().astype(np.int64)
    return offs - offs[0], col.values.to_numpy(zero_copy_only=False)[offs[0] : offs[-1]]


def scan(
    batches: Iterable[pa.RecordBatch | pa.Table | pl.DataFrame],
    d: DedupConfig,
    store: Store,
    advance: Callable[[int], None] | None = None,
) -> pl.DataFrame:
    """scan_batch over `batches` in this process, then collect: one row per input row, in
    input order; each row's shingle set and band keys appended to `store`, then sealed."""
    ctx = scan_context(d)

    def run(b: Any) -> tuple[dict[str, Any], int]:
        t = b.to_arrow() if isinstance(b, pl.DataFrame) else b  # scan_batch reads any Arrow
        return scan_batch(t, ctx)[0], t.num_rows

    return collect((run(b) for b in batches), d, store, advance)


# exact_groups' `read(columns, rows)`: frames of those input columns of those rows (sorted;
# None: every row), in input order
Reader = Callable[[list[str], np.ndarray | None], Iterator[pl.DataFrame]]


def frame_reader(df: pl.DataFrame) -> Reader:
    """exact_groups' `read` over the rows of an in-memory frame."""
    return lambda columns, rows: iter(
        [df.select(columns) if rows is None else df.select(columns)[rows]]
    )


def _id_order(read: Reader, n: int) -> tuple[np.ndarray, Callable[[np.ndarray], pl.Series]]:
    """(the input rows in id order, input order among equal ids; the ids of given rows).
    Ingest's ids are read as integer pairs a batch at a time (ids.py): their sort holds
    16 bytes an id, not the strings. Others are held as strings."""
    pairs = _id_halves(read)
    if pairs is not None:
        hi, lo = pairs
        _check_count(len(hi), n)
        return np.lexsort((lo, hi)), lambda rows: ids.strings(hi[rows], lo[rows])  # stable
    frames = list(read(["id"], None))
    s = pl.concat([f["id"] for f in frames]) if frames else pl.Series("id", [], pl.String)
    del frames
    release()  # (the Arrow batches they were read as)
    _check_count(len(s), n)
    by_id = s.to_frame().select(pl.arg_sort_by("id", maintain_order=True)).to_series()
    return by_id.to_numpy().astype(np.int64), s.gather


def _id_halves(read: Reader) -> tuple[np.ndarray, np.ndarray] | None:
    """Every id as ids.halves reads it, a batch at a time; None at the first batch holding
    an id of another form."""
    hi: list[np.ndarray] = []
    lo: list[np.ndarray] = []
    for frame in read(["id"], None):
        got = ids.halves(frame["id"])
        if got is None:
            return None
        hi.append(got[0])
        lo.append(got[1])
    if not hi:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    h = np.concatenate(hi)
    del hi
    return h, np.concatenate(lo)


def _check_count(got: int, n: int) -> None:
    if got != n:
        raise AssertionError(f"dedup: {got} ids for {n} scanned rows")


def _in_order(
    at: Callable[[np.ndarray], pl.Series], row_of_pos: np.ndarray, same: np.ndarray
) -> Callable[[int, int], pl.Series]:
    """Store.put_ids' slices of the ids (`at(rows)`) in position order, a slice at a time (one
    copy of a slice, not of every id), marking in `same` each position whose id is the one
    before."""

    def part(start: int, stop: int) -> pl.Series:
        p = at(row_of_pos[start:stop])
        same[start + 1 : stop] = (p.slice(1) == p.slice(0, len(p) - 1)).to_numpy()
        if start:
            same[start] = p[0] == at(row_of_pos[start - 1 : start])[0]
        return p

    return part


def exact_groups(
    keys: pl.DataFrame,
    d: DedupConfig,
    read: Reader,
    store: Store,
) -> pl.DataFrame:
    """keys (from scan) in (id, source, source_ref) order: `_row` (input row), `_pos`, `_group`
    (the smallest position of its exact group: rows sharing an id, or the content of a
    non-blank row), the `_rank*` columns, `_blank`, `_h0`, `_h1`. The ids, in that order,
    go to `store` (Store.ids reads them by position): no later step holds them all.

    `read(columns, rows)` reads input columns of the given rows (sorted; None: all rows, in
    input order): the ids, and source and source_ref of only the rows whose id is not
    unique (the tie-break) are read again here instead of held since the scan."""
    n = keys.height
    row_of_pos, id_of = _id_order(read, n)
    same = np.zeros(n, dtype=bool)  # the id of the position before
    store.put_ids(n, _in_order(id_of, row_of_pos, same))
    del id_of
    release()
    if same.any():  # rows sharing an id: by source, source_ref, then input row
        dup = np.flatnonzero(same | np.append(same[1:], False))
        by_row = np.argsort(row_of_pos[dup], kind="stable")
        rows = row_of_pos[dup][by_row]
        t = (
            pl.concat(list(read(["source", "source_ref"], rows)))
            .select("source", "source_ref")
            .with_columns(id=store.ids(dup[by_row]), _row=pl.Series(rows))
        )
        # (equal ids only change places: the ids kept by position stay right)
        row_of_pos[dup] = t.sort(C.TIE_BREAK, maintain_order=True)["_row"].to_numpy()
    # column by column, each dropped from keys as it is gathered: one copy at a time
    w = pl.DataFrame([keys.drop_in_place(c).gather(row_of_pos) for c in list(keys.columns)])
    del keys
    # Exact groups: components of an edge from each row to the row before it in id order
    # when their ids are equal, and in content order when their contents are (equal content
    # is blank or not alike, and a blank row matches only its own id). Only duplicates make
    # edges: a few arrays of their size, not of every row's.
    h0 = w["_h0"].to_numpy()
    by_content = np.lexsort((w["_h1"].to_numpy(), h0))  # stable: positions ascend in a run
    h = h0[by_content]
    alike = h[1:] == h[:-1]
    h = w["_h1"].to_numpy()[by_content]
    alike &= h[1:] == h[:-1]
    del h
    alike &= ~w["_blank"].to_numpy()[by_content[1:]]
    at = np.flatnonzero(alike)
    content = (by_content[at + 1], by_content[at])
    del by_content, alike, at
    twin = np.flatnonzero(same)
    a, b = np.concatenate([twin, content[0]]), np.concatenate([twin - 1, content[1]])
    group = C.components(n, a, b)  # the smallest position of each group
    pos = np.arange(n, dtype=np.int64)
    first = {  # the first position of each row's id
        f"_rank{i}": pl.Series(np.maximum.accumulate(np.where(same, 0, pos)))
        for i, k in enumerate(d.keeper)
        if k.lstrip("-") == "id"
    }
    return w.with_columns(
        _row=pl.Series(row_of_pos), _pos=pl.Series(pos), _group=pl.Series(group), **first
    )

"""The index new items are matched against: an earlier run's dedup index, or a benchmark.

On disk, `dedup/index/` is a folder of Parquet parts (`part-00000.parquet`, ..., at most
PART_ROWS rows each, row groups of GROUP_ROWS) with one row per item that run's dedup kept:

    id, source, source_ref   the item
    <dedup.fields>           the text of every shingled field, as the item holds it
    shingles                 int32: the size of its shingle set (0: never a candidate)
    band_keys                fixed_size_list<uint64>[bands]: its LSH band hashes

No MinHash signature is stored: 1 KB a row that does not compress, it was 72% of the index
(62 MB of 43k rows on the shared corpora, 17 MB without), and making it again from the stored
text costs about what reading it back did (4.6 us a row against 3 us), for only the rows of
the big buckets a match scans (the match took the same time, and found the same pairs). An
index written with a `signature` column (before issue 30) is read alike, that column unread.

The shingling parameters (fields, shingle, ngram, num_perm, seed, bands, rows) are the
`dedup_config` of that run's dedup manifest; a run matching against it must use the same ones
(a config error otherwise), as only then are signatures and band keys comparable.

Matching (`match`) keeps only ids, band keys and shingle counts resident. Per band, a hash
join of the new items' band keys with the indexed ones gives the shared buckets; a bucket
holding more than bucket_cap indexed items is scanned on signatures (estimated J >= threshold
- 0.1, each pair only in the first band it shares), as dedup scans its own big buckets, and
only those buckets' rows are read and signed again; one over max_bucket is skipped and
counted. Every candidate is verified with exact Jaccard, as dedup verifies its own: the stored
text of the indexed rows in a candidate pair is re-shingled (text, not shingle hashes: it
also tells the same content from J = 1, same tokens with other whitespace, and shows a reader
what matched). Nothing else of the indexed run is read or made again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numba as nb
import numpy as np
import polars as pl
import pyarrow as pa

# pyarrow.parquet, pipeline.runs and store are imported where used: shingle_and_sign alone
# (decontaminate, the speed bench) needs none of them, and they cost it 15 ms of start-up.
from pipeline.config import DedupConfig
from pipeline.dedup.change import change_sets
from pipeline.dedup.clusters import exact_jaccard_cross
from pipeline.dedup.lsh import band_keys, min_equal_slots, scan_cross, scan_floor
from pipeline.dedup.minhash import permutations
from pipeline.dedup.shingles import shingle_sets, signed_sets
from pipeline.executors import in_order

PART_ROWS = 100_000
GROUP_ROWS = 16_384
# Band keys are random 64-bit hashes: dictionary-encoding them never pays (5% of the index's
# bytes); every other column keeps the default.
NO_DICTIONARY = ("band_keys",)
# What must agree between an index and the items matched against it.
SHINGLING = ("fields", "shingle", "ngram", "num_perm", "seed", "bands", "rows")
ITEM_COLUMNS = ["id", "source", "source_ref"]
VERIFY_CHUNK = 1 << 16  # candidate pairs verified at once (their query sets read per chunk)


def index_schema(d: DedupConfig) -> pa.Schema:
    return pa.schema(
        [
            *((c, pa.string()) for c in ITEM_COLUMNS),
            *((f, pa.string()) for f in d.fields),
            ("shingles", pa.int32()),
            ("band_keys", pa.list_(pa.uint64(), d.bands)),
        ]
    )


def shingle_and_sign(
    text: pl.DataFrame,
    rows: np.ndarray,
    d: DedupConfig,
    advance: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR shingle sets (offsets, values) and MinHash signatures of text's rows `rows`
    (text: one column per field of d.fields), batch by batch."""
    fields = list(d.fields)
    a_perm, b_perm = permutations(d.num_perm, d.seed)
    sig = np.empty((len(rows), d.num_perm), dtype=np.uint32)
    offs_parts, val_parts, shift = [np.zeros(1, np.int64)], [], 0
    for s in range(0, len(rows), d.batch_size):
        sel = rows[s : s + d.batch_size]
        cols = [_rows_of(text[f], sel) for f in fields]
        offs, vals, _ = signed_sets(
            cols, fields, d.ngram, d.shingle, a_perm, b_perm, sig[s : s + len(sel)]
        )
        offs_parts.append(offs[1:] + shift)
        val_parts.append(vals)
        shift += len(vals)
        if advance:
            advance(len(sel))
    if len(val_parts) == 1:  # one batch: its arrays as they are, not copied
        return offs, val_parts[0], sig
    values = np.concatenate(val_parts) if val_parts else np.empty(0, np.uint32)
    return np.concatenate(offs_parts), values, sig


def _rows_of(col: pl.Series, rows: np.ndarray) -> pa.Array:
    """col's rows `rows` as Arrow: a run of consecutive rows (the usual batch) is a slice,
    which copies nothing, not a gather, which copies the text."""
    if len(rows) and rows[-1] - rows[0] == len(rows) - 1 and (np.diff(rows) == 1).all():
        return col.slice(int(rows[0]), len(rows)).to_arrow()
    return col.gather(pl.Series(rows)).to_arrow()


def index_table(items: pa.Table, sig: np.ndarray, shingles: np.ndarray, d: DedupConfig) -> pa.Table:
    """Index rows of `items` (ITEM_COLUMNS and d.fields) with the band keys of their
    signatures `sig`."""
    n = items.num_rows
    keys = band_keys(sig, np.arange(n, dtype=np.int64), 0, d.bands, d.rows).T
    cols = [items[c].cast(pa.string()) for c in (*ITEM_COLUMNS, *d.fields)]
    cols += [
        pa.array(shingles, pa.int32()),
        pa.FixedSizeListArray.from_arrays(pa.array(keys.reshape(-1), pa.uint64()), d.bands),
    ]
    return pa.Table.from_arrays(cols, schema=index_schema(d))


def write_parts(dest: Path, parts: Iterable[pa.Table], meta: dict[str, str]) -> None:
    """Index parts into folder `dest` (at least one part, so an empty index has a schema)."""
    dest.mkdir(parents=True)
    for k, t in enumerate(parts):
        groups = (t.slice(s, GROUP_ROWS) for s in range(0, max(t.num_rows, 1), GROUP_ROWS))
        write_part(dest, k, t.schema, groups, meta)


def write_part(
    dest: Path, k: int, schema: pa.Schema, groups: Iterable[pa.Table], meta: dict[str, str]
) -> None:
    """Index part k, one row group per table of `groups` (GROUP_ROWS rows each but the
    last): the dedup stage builds a group at a time, so one group's signatures are held."""
    from pipeline.runs import parquet_sink  # here, as pyarrow.parquet is: see the imports

    dictionary = [n for n in schema.names if n not in NO_DICTIONARY]
    with parquet_sink(dest / f"part-{k:05d}.parquet", schema, meta, use_dictionary=dictionary) as w:
        for g in groups:
            w.write_table(g)


def _matrix(col: pa.ChunkedArray | pa.Array, width: int, dtype: Any) -> np.ndarray:
    """A fixed_size_list column as a (rows, width) array."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    flat = arr.flatten().to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(flat, dtype=dtype).reshape(-1, width)


@dataclass
class Index:
    """Items to match against. Resident: ids, shingle counts, band keys of shingled rows;
    signatures and text are read by row when a match needs them."""

    ids: pl.Series  # per row, rows numbered across parts in order
    shingles: np.ndarray  # int32 per row
    lsh_rows: np.ndarray  # int64: the rows with shingles (the only ones banded)
    keys: np.ndarray  # uint64[bands, len(lsh_rows)]: band keys of lsh_rows, one band per row
    parts: list[pa.Table | Path]
    starts: np.ndarray  # int64[len(parts) + 1]: first row of each part
    d: DedupConfig  # its shingling

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, tables: list[pa.Table | Path], d: DedupConfig) -> Index:
        import pyarrow.parquet as pq

        cols = ["id", "shingles", "band_keys"]
        heads = [
            t.select(cols) if isinstance(t, pa.Table) else pq.read_table(t, columns=cols)
            for t in tables
        ]
        head = pa.concat_tables(heads) if heads else index_schema(d).empty_table().select(cols)
        shingles = head["shingles"].to_numpy().astype(np.int32)
        lsh_rows = np.flatnonzero(shingles > 0).astype(np.int64)
        keys = _matrix(head["band_keys"], d.bands, np.uint64)[lsh_rows].T.copy()
        starts = np.zeros(len(heads) + 1, dtype=np.int64)
        np.cumsum([h.num_rows for h in heads], out=starts[1:])
        ids = pl.Series("id", head["id"].combine_chunks().cast(pa.large_string()))
        return cls(ids, shingles, lsh_rows, keys, list(tables), starts, d)

    def take(self, rows: np.ndarray, columns: list[str]) -> pa.Table:
        """Columns of the given rows (sorted, unique), part by part, row group by group."""
        from pipeline.parts import Parts  # here: see the imports

        out = []
        for p, part in enumerate(self.parts):
            lo, hi = self.starts[p], self.starts[p + 1]
            sel = rows[(rows >= lo) & (rows < hi)] - lo
            if not len(sel):
                continue
            if isinstance(part, pa.Table):
                out.append(part.select(columns).take(pa.array(sel)))
                continue
            out.append(Parts(part).take(sel, columns))
        if not out:
            return pa.table({c: pa.array([], pa.string()) for c in columns})
        return pa.concat_tables(out)

    @property
    def fields(self) -> list[str]:
        return list(self.d.fields)

    def signatures(self, rows: np.ndarray) -> np.ndarray:
        """The MinHash signatures of the given rows (sorted, unique), made from their text."""
        text = pl.DataFrame(pl.from_arrow(self.take(rows, self.fields)))
        return shingle_and_sign(text, np.arange(len(rows)), self.d)[2]


def load(dirs: list[Path], d: DedupConfig) -> Index:
    """The indexes of earlier runs' dedup stages (folders of parts), as one Index."""
    parts: list[pa.Table | Path] = []
    for run in dirs:
        parts += sorted((run / "dedup" / "index").glob("part-*.parquet"))
    return Index.of(parts, d)


@dataclass
class Matches:
    q: np.ndarray  # query item (a row of the query signatures)
    r: np.ndarray  # index row
    j: np.ndarray  # exact Jaccard, >= threshold
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class Query:
    """The items matched against an index, read only as the match needs them (dedup keeps
    its own on disk, store.py): `keys(b)` is band b's keys of the items `eligible` (in that
    order); `sigs(items)`, `sets(items)` and `changes(items)` the signatures, CSR shingle sets
    and CSR change sets (when the match checks changes) of the given items (sorted, unique),
    in that order."""

    eligible: np.ndarray
    keys: Callable[[int], np.ndarray]
    sigs: Callable[[np.ndarray], np.ndarray]
    sets: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    changes: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None

    @classmethod
    def of(
        cls,
        sig: np.ndarray,
        offsets: np.ndarray,
        values: np.ndarray,
        eligible: np.ndarray,
        rows: int,
        change: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> Query:
        """Query items held in memory: rows `eligible` of sig and of the CSR offsets/values
        (and of the CSR change sets `change`)."""
        from pipeline.dedup.store import csr_take

        e = np.ascontiguousarray(eligible, dtype=np.int64)
        return cls(
            e,
            lambda b: band_keys(sig, e, b, b + 1, rows)[0],
            lambda items: sig[items],
            lambda items: csr_take(offsets, values, items),
            None if change is None else lambda items: csr_take(*change, items),
        )


def _buckets(index: Index, query: Query, bands: int, cap: int) -> tuple:
    """Per band: (query, index row) pairs of shared buckets holding at most `cap` indexed
    items, and the bigger ones as (band, index rows, query items)."""
    small, big = [], []
    for b in range(bands):
        q = pl.DataFrame({"key": query.keys(b), "q": query.eligible})
        hit = pl.DataFrame({"key": index.keys[b], "r": index.lsh_rows}).join(
            q.select("key").unique(), on="key", how="semi"
        )
        if not hit.height:
            continue
        size = hit.group_by("key").len()
        few = hit.join(size.filter(pl.col("len") <= cap).select("key"), on="key")
        pairs = few.join(q, on="key").select("q", "r")
        small.append(
            (pairs["q"].to_numpy().astype(np.uint64) << np.uint64(32))
            | pairs["r"].to_numpy().astype(np.uint64)
        )
        many = size.filter(pl.col("len") > cap).select("key")
        if many.height:
            rs = hit.join(many, on="key").group_by("key").agg(pl.col("r").sort())
            qs = q.join(many, on="key").group_by("key").agg(pl.col("q").sort())
            for _, r, qq in rs.join(qs, on="key").sort("key").iter_rows():
                big.append((b, np.array(r, np.int64), np.array(qq, np.int64)))
    return small, big


def match(
    index: Index,
    sig: np.ndarray,
    offsets: np.ndarray,
    values: np.ndarray,
    eligible: np.ndarray,
    d: DedupConfig,
    change: tuple[np.ndarray, np.ndarray] | None = None,
) -> Matches:
    """Verified pairs (query item, index row) at or above d.threshold (and making the same
    change): query items are the rows `eligible` of sig (with their CSR shingle sets
    offsets/values, and change sets `change` when d.checks_change)."""
    return match_query(index, Query.of(sig, offsets, values, eligible, d.rows, change), d)


def match_query(index: Index, query: Query, d: DedupConfig) -> Matches:
    """match for query items read through a Query: a band's keys, a big bucket's
    signatures and a chunk of candidates' shingle sets at a time."""
    empty = np.empty(0, np.int64)
    counts = {"candidate_pairs": 0, "oversized_buckets": 0, "oversized_pairs_compared": 0}
    counts |= {"oversized_skipped": 0, "oversized_skipped_pairs": 0}
    if not len(query.eligible) or not len(index.lsh_rows):
        return Matches(empty, empty, np.empty(0), counts)
    small, big = _buckets(index, query, d.bands, d.bucket_cap)
    scan = [(b, r, q) for b, r, q in big if len(r) <= d.max_bucket]
    skipped = [(len(r), len(q)) for _, r, q in big if len(r) > d.max_bucket]
    counts["oversized_buckets"] = len(big)
    counts["oversized_skipped"] = len(skipped)
    counts["oversized_skipped_pairs"] = int(sum(a * b for a, b in skipped))
    found = []
    if scan:
        rows = np.unique(np.concatenate([r for _, r, _ in scan]))
        si = index.signatures(rows)
        need = min_equal_slots(scan_floor(d.threshold), d.num_perm)

        def one(item: tuple[tuple[int, np.ndarray, np.ndarray], np.ndarray]) -> tuple:
            (b, r, q), sq = item
            local = np.searchsorted(rows, r)
            qs = np.arange(len(q), dtype=np.int64)  # q is sorted: its own signatures' rows
            pairs, compared = scan_cross(sq, qs, si, local, b, d.rows, need)
            x = q[(pairs >> np.uint64(32)).astype(np.int64)].astype(np.uint64)
            y = r[(pairs & np.uint64(0xFFFFFFFF)).astype(np.int64)].astype(np.uint64)
            return (x << np.uint64(32)) | y, compared

        threads = max(1, nb.get_num_threads())
        with ThreadPoolExecutor(threads) as ex:  # query signatures made in this thread
            scanned = list(in_order(ex, lambda it: (it, query.sigs(it[2])), one, scan, threads))
        found = [p for p, _ in scanned]
        counts["oversized_pairs_compared"] = int(sum(c for _, c in scanned))
    codes = np.unique(np.concatenate([*small, *found, np.empty(0, np.uint64)]))
    q = (codes >> np.uint64(32)).astype(np.int64)
    r = (codes & np.uint64(0xFFFFFFFF)).astype(np.int64)
    counts["candidate_pairs"] = len(codes)
    if not len(codes):
        return Matches(empty, empty, np.empty(0), counts)
    rows, local = np.unique(r, return_inverse=True)
    text = index.take(rows, list(d.fields))
    io, iv = shingle_sets([text[f] for f in d.fields], list(d.fields), d.ngram, d.shingle)
    j, cj = np.empty(len(codes), dtype=np.float64), np.ones(len(codes), dtype=np.float64)
    if d.checks_change:
        if query.changes is None:
            raise ValueError("dedup.change_threshold is on: the query needs its change sets")
        co, cv = change_sets(text["before"], text["after"], d.ngram)
    for s in range(0, len(codes), VERIFY_CHUNK):  # the query side's sets a chunk at a time
        qu, qi = np.unique(q[s : s + VERIFY_CHUNK], return_inverse=True)
        qo, qv = query.sets(qu)
        qi, lr = qi.astype(np.int64), local[s : s + VERIFY_CHUNK].astype(np.int64)
        j[s : s + VERIFY_CHUNK] = exact_jaccard_cross(qo, qv, io, iv, qi, lr, False)
        if query.changes is not None and d.checks_change:
            qco, qcv = query.changes(qu)
            cj[s : s + VERIFY_CHUNK] = exact_jaccard_cross(qco, qcv, co, cv, qi, lr, True)
    ok = (j >= d.threshold) & (cj >= d.change_threshold)
    return Matches(q[ok], r[ok], j[ok], counts)


def best(m: Matches, nq: int) -> tuple[np.ndarray, np.ndarray]:
    """Per query item 0..nq-1: its closest index row (highest J, then the first row), or -1,
    and that J."""
    row = np.full(nq, -1, dtype=np.int64)
    jj = np.zeros(nq, dtype=np.float64)
    order = np.lexsort((m.r, -m.j, m.q))  # by query, best first
    q, first = np.unique(m.q[order], return_index=True)
    row[q] = m.r[order][first]
    jj[q] = m.j[order][first]
    return row, jj


def same_text(index: Index, rows: np.ndarray, text: pl.DataFrame) -> np.ndarray:
    """Whether text's row k (one column per field) equals index row rows[k] in every field."""
    if not len(rows):
        return np.zeros(0, dtype=bool)
    u, inv = np.unique(rows, return_inverse=True)
    theirs = index.take(u, index.fields).take(pa.array(inv))
    eq = np.ones(len(rows), dtype=bool)
    for f in index.fields:
        mine = text[f].fill_null("")
        other = pl.Series(theirs[f].combine_chunks().cast(pa.large_string())).fill_null("")
        eq &= (mine == other).to_numpy()
    return eq

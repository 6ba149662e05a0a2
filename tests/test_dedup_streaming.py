"""Dedup in bounded memory (scan.py, store.py, write.py): the sizes of its batches, chunks,
reads and partitions change no output."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import reorder
from pipeline.config import DedupConfig
from pipeline.dedup import find, pairs, scan, store, write
from pipeline.dedup import index as ix
from pipeline.dedup.lsh import band_keys
from pipeline.dedup.minhash import signatures
from pipeline.parts import part_files
from pipeline.runs import output_sha
from pipeline.verify import verify_run
from tests.conftest import make_item_table
from tests.test_dedup_stage import OUTPUTS, corpus, make_run

INDEXED = ("--set", "dedup.index=true")  # the index's parts are written in chunks too
SMALL = {  # every loop over rows, pairs or bytes runs many times on a small corpus
    (scan, "SUB_BATCH"): 7,
    (pairs, "VERIFY_CHUNK"): 5,
    (ix, "VERIFY_CHUNK"): 3,
    (reorder, "READ_ROWS"): 11,
    (store, "GAP"): 0,
    (store, "ID_BATCH"): 4,
}


def family(n: int = 40, seed: int = 5) -> list[dict]:
    """Templated items with drift: band buckets over a small bucket_cap, scanned."""
    rnd = random.Random(seed)
    lines = [f"    value_{k} = compute_{k}(alpha, beta)" for k in range(12)]
    rows = []
    for i in range(n):
        body = list(lines)
        for _ in range(rnd.randint(0, 3)):
            body[rnd.randrange(12)] = f"    other_{rnd.randrange(99)} = g(x)"
        rows.append(dict(before="\n".join(body), after="", comment=f"c{i % 3}", change=f"f{i}"))
    return rows


def items() -> pa.Table:
    t = corpus(80)
    return pa.concat_tables([t, make_item_table(family()).cast(t.schema), t.slice(0, 9)])


def outputs(run_dir: Path) -> dict[str, Path]:
    d = run_dir / "dedup"
    files = [d / n for n in OUTPUTS] + sorted((d / "index").glob("*.parquet"))
    return {f.relative_to(d).as_posix(): f for f in files}


def digests(run_dir: Path) -> dict[str, str]:
    return {k: output_sha(f) for k, f in outputs(run_dir).items()}  # a file or a folder of parts


def small_sizes(monkeypatch) -> None:
    for (module, name), value in SMALL.items():
        monkeypatch.setattr(module, name, value)


def test_small_batches_chunks_and_reads_give_byte_identical_outputs(tmp_path, cli, monkeypatch):
    cfg, p = make_run(tmp_path, items())
    cli("dedup", "--config", p, *INDEXED, "--set", "dedup.bucket_cap=4")
    before = digests(cfg.run_dir)
    assert any(k.startswith("index/") for k in before)  # asked for: written, in chunks too
    counts = pq.read_table(cfg.run_dir / "dedup" / "oversized_buckets.parquet").num_rows
    assert counts > 0  # the scan of big buckets ran
    small_sizes(monkeypatch)
    cli("dedup", "--config", p, *INDEXED, "--set", "dedup.bucket_cap=4", "--force")
    assert digests(cfg.run_dir) == before
    # the read batch size is config: the same tables, row groups and all
    cli(
        "dedup",
        "--config",
        p,
        *INDEXED,
        "--set",
        "dedup.bucket_cap=4",
        "--set",
        "dedup.batch_size=13",
    )
    _, p2 = make_run(tmp_path, items(), "ref")
    ref = cli("dedup", "--config", p2, *INDEXED, "--set", "dedup.bucket_cap=4")
    assert ref.exit_code == 0
    for name, f in outputs(cfg.run_dir).items():
        g = outputs(tmp_path / "runs" / "ref")[name]
        assert pq.read_table(f).equals(pq.read_table(g)), name
    assert verify_run(cfg.run_dir)[0] == []


def test_many_partitions_write_the_same_rows_in_the_same_order(tmp_path, cli, monkeypatch):
    cfg, p = make_run(tmp_path, items())
    cli("dedup", "--config", p, *INDEXED)
    whole = {k: pq.read_table(f) for k, f in outputs(cfg.run_dir).items()}
    monkeypatch.setattr(write, "PART_ROWS", 8)
    cli("dedup", "--config", p, *INDEXED, "--force")
    got = outputs(cfg.run_dir)
    for name in ("kept.parquet", "removed.parquet"):
        meta = pq.read_metadata(part_files(got[name])[0])
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        assert sizes[:-1] == [8] * (len(sizes) - 1) and len(sizes) > 3
        assert pq.read_table(got[name]).equals(whole[name]), name
    index = [pq.read_table(f) for k, f in sorted(got.items()) if k.startswith("index/")]
    assert len(index) > 3 and all(t.num_rows == 8 for t in index[:-1])
    old = [t for k, t in sorted(whole.items()) if k.startswith("index/")]
    assert pa.concat_tables(index).equals(pa.concat_tables(old))
    assert verify_run(cfg.run_dir)[0] == []


def test_find_duplicates_is_the_stage_over_a_frame(tmp_path, monkeypatch):
    import polars as pl

    t = items()
    d = DedupConfig(bucket_cap=4)
    df = pl.DataFrame(pl.from_arrow(t.select(find.needed_columns(d))))
    one = find.find_duplicates(df, d)
    small_sizes(monkeypatch)
    many = find.find_duplicates(df, DedupConfig(bucket_cap=4, batch_size=6))
    for name in ("removed", "clusters", "edges", "oversized"):
        assert getattr(one, name).equals(getattr(many, name)), name
    assert np.array_equal(one.kept_rows, many.kept_rows)
    assert np.array_equal(one.kept_sig, many.kept_sig) and one.kept_sig.shape[1] == 256
    assert one.counts == many.counts and one.counts["oversized_buckets"] > 0


def test_the_store_reads_back_what_was_appended(tmp_path):
    rng = np.random.default_rng(0)
    s = store.Store(tmp_path / "w", 16, 1, 4, 4)
    sets = [
        np.unique(rng.integers(0, 1 << 32, rng.integers(0, 30), dtype=np.uint32)) for _ in range(50)
    ]
    sigs = []
    for lo in range(0, 50, 17):
        part = sets[lo : lo + 17]
        offs = np.concatenate([[0], np.cumsum([len(x) for x in part])]).astype(np.int64)
        vals = np.concatenate(part) if part else np.empty(0, np.uint32)
        sig = signatures(offs, vals.astype(np.uint32), *s.perm)
        s.add(offs, vals.astype(np.uint32), band_keys(sig, np.arange(len(sig)), 0, 4, 4))
        sigs.append(sig)
    s.seal()
    rows = np.array([49, 3, 3, 0, 17, 16, 33])
    offs, vals = s.shingles(rows)
    for k, r in enumerate(rows):
        assert np.array_equal(vals[offs[k] : offs[k + 1]], sets[r])
    assert np.array_equal(s.sig(rows), np.concatenate(sigs)[rows])
    keys = np.concatenate([band_keys(g, np.arange(len(g)), 0, 4, 4) for g in sigs], axis=1)
    assert np.array_equal(s.band_keys(rows)(2), keys[2][rows])
    assert np.array_equal(s.counts(), [len(x) for x in sets])


def test_the_store_gives_ids_by_position_in_the_order_asked(tmp_path, monkeypatch):
    import polars as pl

    monkeypatch.setattr(store, "ID_BATCH", 3)  # ids in four record batches
    s = store.Store(tmp_path / "w", 16, 1, 4, 4)
    ids = [f"id-{k:02d}" for k in range(10)]
    s.put_ids(10, lambda a, b: pl.Series("id", ids[a:b]))
    pos = np.array([9, 0, 4, 4, 2, 3, 8, 0])
    assert s.ids(pos).to_list() == [ids[k] for k in pos]
    assert s.ids(np.empty(0, np.int64)).to_list() == []
    assert s.ids(np.arange(10)).to_list() == ids
    # a table of rows (dedup's input rows and rank values) likewise, nulls and types kept
    rows = pl.DataFrame(
        {
            "_row": np.arange(10, 0, -1),
            "_rank1": pl.Series([None, *range(9)]).cast(pl.Datetime("us", "UTC")),
            "_rank0": pl.Series(range(10), dtype=pl.UInt32),
        }
    )
    s.put_frame("rows", pl.concat([rows.slice(0, 2), rows.slice(2)], rechunk=False))  # chunked
    assert s.take("rows", pos).equals(rows[pos])
    assert s.take("rows", np.empty(0, np.int64)).equals(rows.head(0))


def test_an_incremental_run_matches_the_same_in_small_chunks(tmp_path, monkeypatch):
    from tests.test_dedup_incremental import corpus as edits
    from tests.test_dedup_incremental import near_twin, run

    old = edits(40, seed=1)
    new = [*old[:10], {**old[10], "comment": "other words"}, near_twin(old[11], "b")]
    new += [near_twin(old[12], "c"), *edits(5, seed=9)]
    got = []
    for where in ("a", "b"):  # the same names (the source column is the file's name)
        (tmp_path / where).mkdir()
        run(tmp_path / where, "v1", old, until="dedup")
        got.append(run(tmp_path / where, "v2", new, against=["v1"], until="dedup"))
        small_sizes(monkeypatch)
    a, b = got
    for name, f in outputs(a).items():
        assert pq.read_table(f).equals(pq.read_table(outputs(b)[name])), name
    kinds = pq.read_table(outputs(b)["removed.parquet"])["kind"].to_pylist()
    assert sorted(set(kinds)) == ["near_indexed", "same_content_indexed", "same_id_indexed"]


def test_rows_sharing_an_id_rank_by_source_and_source_ref_whatever_the_input_order():
    import polars as pl

    code = "def f(x):\n    return x + 1\n"
    pairs = [("b", "2"), ("a", "3"), ("a", "1"), ("c", "0"), ("a", "10")]
    rows = [dict(before=code, after=code + "#", id="X", source=s, source_ref=r) for s, r in pairs]
    rows += [dict(before="other = 1", after="other = 2", change="9")]
    t = make_item_table(rows)
    d = DedupConfig()
    for seed in range(4):
        order = list(range(t.num_rows))
        random.Random(seed).shuffle(order)
        s = t.take(order)
        r = find.find_duplicates(pl.DataFrame(pl.from_arrow(s.select(find.needed_columns(d)))), d)
        refs = s.select(["source", "source_ref"]).to_pylist()
        kept = [tuple(refs[k].values()) for k in r.kept_rows]
        assert kept == [("a", "1"), ("t", "row 5")] or kept == [("t", "row 5"), ("a", "1")]
        gone = [tuple(refs[k].values()) for k in r.removed["_row"]]
        assert gone == [("a", "10"), ("a", "3"), ("b", "2"), ("c", "0")]  # output order
        assert r.removed["kind"].to_list() == ["same_id"] * 4


def test_ingest_ids_sorted_as_numbers_give_what_the_same_ids_as_strings_give(monkeypatch):
    """Ingest's hex ids are sorted as integer pairs (ids.py), other ids as strings: the same
    items under both (a prefix keeps their order) give the same rows, kinds and clusters,
    repeated ids and ids split over read batches included."""
    import polars as pl

    from pipeline.dedup.scan import Reader

    t = pl.DataFrame(pl.from_arrow(items().select(find.needed_columns(DedupConfig()))))
    t = pl.concat([t, t.slice(3, 5)])  # the same ids again: ranked by source_ref
    t = t.with_columns(source_ref=pl.format("again {}", pl.int_range(pl.len())))
    d = DedupConfig()

    def in_batches(df: pl.DataFrame) -> Reader:  # as the stage reads: batches of 7 rows
        def read(columns: list[str], rows: np.ndarray | None):
            if rows is not None:
                return iter([df.select(columns)[rows]])
            return iter(df.select(columns).iter_slices(7))

        return read

    def run(frame: pl.DataFrame):
        with tempfile.TemporaryDirectory() as tmp:
            st = store.Store(Path(tmp), d.num_perm, d.seed, d.bands, d.rows, d.checks_change)
            batches = (frame.slice(s, 16) for s in range(0, frame.height, 16))
            keys = scan.scan(batches, d, st)
            w = scan.exact_groups(keys, d, in_batches(frame), st)
            res = find.find(w, st, d)
            return w.drop("_h0", "_h1"), res, st.ids(np.arange(frame.height)).to_list()

    (w, a, ids), (w2, b, ids2) = run(t), run(t.with_columns(id="z" + pl.col("id")))
    assert w.equals(w2)
    assert ids2 == ["z" + i for i in ids] and ids == sorted(ids)
    assert np.array_equal(a.kept_rows, b.kept_rows)
    assert a.removed.drop("keeper_id").equals(b.removed.drop("keeper_id"))
    assert set(a.removed["kind"]) >= {"same_id", "same_content"}
    named = a.clusters.with_columns(
        ("z" + pl.col(c)).alias(c) for c in ("id", "keeper_id", "exact_of")
    )
    assert named.equals(b.clusters)
    # hex batches, then one id that is not: the ids are read again as strings
    mixed = t.with_columns(
        id=pl.when(pl.int_range(pl.len()) == t.height - 1).then(pl.lit("Q")).otherwise("id")
    )
    got = run(mixed)
    from pipeline.dedup import ids as hexids

    monkeypatch.setattr(hexids, "halves", lambda s: None)  # strings throughout
    want = run(mixed)
    assert got[0].equals(want[0]) and got[2] == want[2]
    assert np.array_equal(got[1].kept_rows, want[1].kept_rows)
    assert got[1].clusters.equals(want[1].clusters)


def test_hex_ids_read_as_integer_pairs_read_back_as_the_same_strings():
    import polars as pl

    from pipeline.dedup import ids

    rng = np.random.default_rng(3)
    some = ["0" * 24, "f" * 24, "0123456789abcdef01234567"]
    some += [bytes(rng.integers(0, 256, 12, dtype=np.uint8)).hex() for _ in range(200)]
    s = pl.Series("id", some)
    hi, lo = ids.halves(s)
    assert ids.strings(hi, lo).to_list() == some
    assert [some[k] for k in np.lexsort((lo, hi))] == sorted(some)
    for other in ("0123456789ABCDEF01234567", "0123456789abcdef0123456", "g" * 24, "x"):
        assert ids.halves(pl.Series("id", [*some[:3], other])) is None
    assert ids.halves(pl.Series("id", [some[0], None])) is None
    assert ids.halves(pl.Series("id", [1, 2])) is None  # not strings: sorted as they are


def test_rank_order_is_the_polars_sort_it_replaces():
    import polars as pl

    from pipeline.dedup.scan import rank_columns, rank_order

    rng = np.random.default_rng(1)
    n = 500
    small = rng.integers(0, 4, n)  # many ties, so every key decides somewhere
    frame = pl.DataFrame(
        {
            "_rank0": pl.Series(small.astype(np.uint32)),
            "_rank1": pl.Series(rng.integers(0, 3, n)).cast(pl.Datetime("us", "UTC")),
            "_rank2": pl.Series(rng.integers(0, 2, n).astype(bool)),
            "_rank3": pl.Series(rng.integers(-5, 5, n)),
            "_pos": np.arange(n),
        }
    ).with_columns(
        pl.when(pl.col("_rank3") > 2).then(None).otherwise(pl.col(c)).alias(c)
        for c in ("_rank0", "_rank1", "_rank2")
    )
    group = rng.integers(0, 40, n)
    for keeper in (
        ["-comment_len", "created_at", "human", "lines_changed"],
        ["a", "-b", "-c", "d"],
    ):
        d = DedupConfig.model_construct(keeper=keeper)
        cols, desc = rank_columns(d)
        want = (
            frame.with_columns(_g=pl.Series(group))
            .with_row_index("_r")
            .sort(["_g", *cols], descending=[False, *desc], nulls_last=True, maintain_order=True)
        )
        assert np.array_equal(rank_order(frame, d, first=group), want["_r"].to_numpy())
        plain = frame.with_row_index("_r").sort(cols, descending=desc, nulls_last=True)
        assert np.array_equal(rank_order(frame, d), plain["_r"].to_numpy())

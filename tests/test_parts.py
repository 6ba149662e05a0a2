"""Stage outputs as folders of Parquet parts (pipeline/parts.py): boundaries by row count,
readers that see one table, atomic folders, and a whole run cut into many parts."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import Pipeline
from pipeline.parts import Parts, PartSink, num_rows, part_files, read_schema, read_span
from pipeline.runs import output_sha
from pipeline.verify import verify_run

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample" / "editcurate.toml"


def table(n: int) -> pa.Table:
    return pa.table(
        {
            "k": pa.array(np.arange(n), pa.int64()),
            "s": pa.array([f"r{i}" for i in range(n)], pa.string()),
        }
    )


def write(dest: Path, t: pa.Table, part_rows: int, chunk: int = 7) -> None:
    sink = PartSink(dest, t.schema, part_rows)
    for at in range(0, t.num_rows, chunk):  # writes that straddle part boundaries
        sink.write_table(t.slice(at, chunk), row_group_size=3)
    sink.close()


def test_parts_are_cut_every_part_rows_rows_and_read_back_as_one_table(tmp_path):
    t = table(50)
    write(tmp_path / "o.parquet", t, part_rows=20)
    files = part_files(tmp_path / "o.parquet")
    assert [f.name for f in files] == [f"part-0000{k}.parquet" for k in range(3)]
    assert [pq.read_metadata(f).num_rows for f in files] == [20, 20, 10]
    assert num_rows(tmp_path / "o.parquet") == 50
    assert pl.read_parquet(tmp_path / "o.parquet").equals(pl.from_arrow(t))  # the folder's path
    assert pq.read_table(tmp_path / "o.parquet").select(["k", "s"]).equals(t)


def test_batches_are_exact_across_part_boundaries(tmp_path):
    t = table(50)
    write(tmp_path / "o.parquet", t, part_rows=20)
    got = list(Parts(tmp_path / "o.parquet").iter_batches(16, ["k"]))
    assert [b.num_rows for b in got] == [16, 16, 16, 2]
    assert pa.Table.from_batches(got).column("k").to_pylist() == list(range(50))


@pytest.mark.parametrize("size", [1, 2, 4, 16, 20, 49, 50, 1000])
def test_spans_read_alone_are_the_local_batches(tmp_path, size):
    """What Ray workers read (Parts.spans, read_span) is iter_batches's batches, batch for
    batch; a row group is read by at most two spans (the second reads past it)."""
    t = table(50)
    write(tmp_path / "o.parquet", t, part_rows=20)  # row groups of 3 rows, fewer at cuts
    parts = Parts(tmp_path / "o.parquet")
    spans = parts.spans(size)
    got = [b for span in spans for b in read_span(span, size, ["s"])]
    want = list(parts.iter_batches(size, ["s"]))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.equals(w)
    groups = [g for span in spans for g in span.groups]
    assert max(groups.count(g) for g in set(groups)) <= 2
    assert not Parts(empty(tmp_path)).spans(size)


def empty(tmp_path: Path) -> Path:
    sink = PartSink(tmp_path / "e.parquet", table(0).schema)
    sink.close()
    return tmp_path / "e.parquet"


def test_take_returns_rows_in_the_order_asked_across_parts(tmp_path):
    t = table(50)
    write(tmp_path / "o.parquet", t, part_rows=20)
    rows = [49, 3, 20, 19, 3, 40]
    got = Parts(tmp_path / "o.parquet").take(rows, ["s"])
    assert got.column("s").to_pylist() == [f"r{i}" for i in rows]
    with pytest.raises(IndexError):
        Parts(tmp_path / "o.parquet").take([50], ["s"])


def test_an_empty_output_is_one_empty_part_with_its_schema(tmp_path):
    write(tmp_path / "o.parquet", table(0), part_rows=20)
    assert len(part_files(tmp_path / "o.parquet")) == 1
    assert read_schema(tmp_path / "o.parquet").names == ["k", "s"]
    assert list(Parts(tmp_path / "o.parquet").iter_batches(8)) == []


def test_a_failed_write_leaves_the_old_output_and_no_temp_folder(tmp_path):
    dest = tmp_path / "o.parquet"
    write(dest, table(30), part_rows=20)
    before = [f.read_bytes() for f in part_files(dest)]
    sink = PartSink(dest, table(0).schema, 20)
    sink.write_table(table(25))
    sink.abort()  # what the runner's sink does when the stage raises
    assert [f.read_bytes() for f in part_files(dest)] == before
    assert [p.name for p in tmp_path.iterdir()] == ["o.parquet"]


def test_a_plain_file_reads_as_a_one_part_output(tmp_path):
    pq.write_table(table(5), tmp_path / "old.parquet")
    assert num_rows(tmp_path / "old.parquet") == 5
    assert Parts(tmp_path / "old.parquet").take([4], ["k"]).column("k").to_pylist() == [4]


def run_sample(root: Path, name: str, part_rows: int) -> Path:
    over = {"run.root": str(root), "run.name": name, "run.part_rows": part_rows}
    return Pipeline.from_config(SAMPLE, overrides=over).run().path


def test_a_run_in_small_parts_holds_the_same_rows_and_verifies(tmp_path):
    small = run_sample(tmp_path, "small", 16)
    whole = run_sample(tmp_path, "whole", 1 << 18)
    assert verify_run(small)[0] == []
    outs = sorted(p.relative_to(whole) for p in whole.rglob("*.parquet") if p.is_dir())
    assert len(outs) >= 12
    split = [o for o in outs if len(part_files(small / o)) > 1]
    assert "filter/kept.parquet" in {o.as_posix() for o in split}
    for o in outs:
        assert pl.read_parquet(small / o).equals(pl.read_parquet(whole / o)), o
    # and the same part size again gives the same bytes
    again = run_sample(tmp_path, "again", 16)
    for o in outs:
        for a, b in zip(part_files(small / o), part_files(again / o), strict=True):
            assert a.read_bytes() == b.read_bytes(), a


def test_inexact_batches_cover_every_row_without_joining_parts(tmp_path):
    write(tmp_path / "o.parquet", table(50), part_rows=20)
    got = list(Parts(tmp_path / "o.parquet").iter_batches(16, ["k"], exact=False))
    assert [b.num_rows for b in got] == [16, 4, 16, 4, 10]
    assert pa.Table.from_batches(got).column("k").to_pylist() == list(range(50))


def test_each_parts_hash_is_taken_as_it_is_written(tmp_path):
    """The sink knows every part's sha256 without reading it back, and the output's record
    made from those is the one made by reading the files."""
    dest = tmp_path / "o.parquet"
    sink = PartSink(dest, table(50).schema, 20)
    for at in range(0, 50, 7):
        sink.write_table(table(50).slice(at, 7), row_group_size=3)
    sink.close()
    on_disk = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in part_files(dest)}
    assert sink.sha256 == on_disk and len(on_disk) == 3
    assert output_sha(dest, known=sink.sha256) == output_sha(dest)
    # a file the sink did not write is read
    (dest / "extra").write_bytes(b"x")
    assert output_sha(dest, known=sink.sha256) == output_sha(dest)


class _InProcessRay:
    """Just enough of Ray for RayParts to run its part writes in this process."""

    class exceptions:
        class RayTaskError(Exception):
            pass

    def remote(self, **_options):
        return lambda fn: type("Task", (), {"remote": staticmethod(fn)})

    def put(self, x):
        return x

    def get(self, x):
        return x

    def cluster_resources(self):
        return {"CPU": 2}

    def wait(self, *_a, **_k):
        pass


def test_ray_parts_cut_row_groups_where_the_local_writer_does_with_restarts(tmp_path, monkeypatch):
    """Row groups of `size` rows, the grid restarting where a step says (shapes' scopes),
    cut at part boundaries: the parts Ray's workers write (`_write_part` given the restart
    rows) are the local Writer's, byte for byte, over random layouts."""
    import random
    from contextlib import ExitStack

    from pipeline.executors import ray as on_ray
    from pipeline.parts import Writer
    from pipeline.runs import parts_sink

    monkeypatch.setattr(on_ray, "ensure_ray", lambda run: _InProcessRay())
    schema = pa.schema([("x", pa.int64()), ("s", pa.string())])

    def write(kind, adds, size, part_rows):
        dest = tmp_path / kind / "o"

        def sink(name, sch):
            return parts_sink(dest, sch, {}, part_rows)

        with ExitStack() as stack:
            make = Writer if kind == "local" else lambda *a: on_ray.RayParts(None, *a)
            w = make(sink, {"o": schema}, size, stack)
            at = 0
            for a in adds:
                if a == "restart":
                    w.restart("o")
                    continue
                t = pa.table({"x": np.arange(at, at + a), "s": [str(i) for i in range(at, at + a)]})
                at += a
                w.add({"o": t.cast(schema) if kind == "local" else on_ray.Held(t, "o", 0, a)})
            w.close()
        files = [pq.ParquetFile(f) for f in part_files(dest)]
        groups = [
            [f.metadata.row_group(g).num_rows for g in range(f.num_row_groups)] for f in files
        ]
        return groups, [Path(p).read_bytes() for p in part_files(dest)]

    rng = random.Random(1)
    restarted = 0
    for _ in range(60):
        size, part_rows = rng.randint(1, 9), rng.randint(1, 20)
        adds = [rng.choice(["restart", 0, 1, 2, 3, 5, 8, 13]) for _ in range(rng.randint(0, 12))]
        local, ray = write("local", adds, size, part_rows), write("ray", adds, size, part_rows)
        assert ray == local, (size, part_rows, adds)
        restarted += any(len(set(f)) > 2 for f in local[0])  # short groups inside a part
    assert restarted > 5

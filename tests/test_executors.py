"""Executors: the same Stage objects on Ray Data give byte-identical outputs to local ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline import Pipeline
from pipeline.parts import part_files
from pipeline.runs import read_manifest
from pipeline.verify import verify_run

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "editcurate.toml"


def test_the_ray_executor_writes_the_same_bytes_as_the_local_one(tmp_path, ray_local, monkeypatch):
    from pipeline.executors import ray as on_ray
    from pipeline.shapes import group

    # (read in the driver only) shapes' groups in many key ranges on Ray, and its rows in
    # row groups that cross ranges, parts and scopes
    monkeypatch.setattr(on_ray, "ROWS_PER_CUT", 32)
    monkeypatch.setattr(group, "CHUNK", 7)
    import datasets

    def not_here(*a, **k):  # (patched in the driver only: Ray's workers import their own)
        raise AssertionError("the driver built the hf/ folder")

    runs = {}
    for executor in ("local", "ray"):
        p = Pipeline.from_config(
            SAMPLE,
            overrides={
                "run.root": str(tmp_path),
                "run.name": executor,
                "run.executor": executor,
                "filter.batch_size": 37,  # many batches, none aligned with Ray's blocks
                "run.part_rows": 50,  # many parts: Ray workers read spans across them
            },
        )
        with monkeypatch.context() as m:
            if executor == "ray":  # export's hf/ is built by a worker
                m.setattr(datasets.DatasetDict, "save_to_disk", not_here)
            runs[executor] = p.run().path
    files = sorted(
        p.relative_to(runs["local"]) for p in runs["local"].rglob("*.parquet") if p.is_file()
    )
    assert len(files) >= 24 and any(f.name == "part-00001.parquet" for f in files)
    for rel in files:
        assert (runs["local"] / rel).read_bytes() == (runs["ray"] / rel).read_bytes(), rel
    # the parts' hashes the workers took as they wrote are what is on disk, and the local ones
    for stage in ("ingest", "filter", "dedup", "export"):
        outs = {
            e: {
                n: o
                for n, o in read_manifest(runs[e] / stage)["outputs"].items()
                if ".parquet" in n
            }
            for e in runs
        }  # (the dataset card names its run)
        assert outs["ray"] == outs["local"] != {}, stage
    # export's groups and checks, assigned a key range at a time on Ray, count as locally
    m = {e: read_manifest(runs[e] / "export") for e in runs}
    for key in ("counts", "cross_split", "by_source", "sharing_change"):
        assert m["ray"][key] == m["local"][key], key
    assert m["ray"]["outputs"]["hf"] == m["local"]["outputs"]["hf"]
    assert m["local"]["counts"]["groups"] > 100
    assert verify_run(runs["ray"])[0] == []
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_on_ray_the_workers_write_the_parts_and_their_cpu_is_counted(
    tmp_path, ray_local, monkeypatch
):
    """Ingest's and the filter's outputs never pass through the driver: with the driver's
    part writer broken, a Ray run writes the local run's bytes; the manifests count the
    workers' CPU time in the stage's."""
    import json

    from pipeline.executors.ray import Held, RayParts
    from pipeline.parts import PartSink

    over = {"filter.batch_size": 37, "ingest.batch_size": 11, "run.part_rows": 50}
    local = Pipeline.from_config(
        SAMPLE, overrides={**over, "run.root": str(tmp_path), "run.name": "local"}
    ).run(until="filter")

    def not_here(*a, **k):
        raise AssertionError("the driver wrote rows of a part")

    add = RayParts.add

    def only_held(self, outs):  # rows the workers keep, never tables in the driver
        assert all(isinstance(v, Held) for v in outs.values()), outs
        add(self, outs)

    monkeypatch.setattr(PartSink, "write_table", not_here)
    monkeypatch.setattr(RayParts, "add", only_held)
    ray = Pipeline.from_config(
        SAMPLE,
        overrides={**over, "run.root": str(tmp_path), "run.name": "ray", "run.executor": "ray"},
    ).run(until="filter")
    files = sorted(p.relative_to(local.path) for p in local.path.rglob("*.parquet") if p.is_file())
    assert len(files) >= 8
    for rel in files:
        assert (local.path / rel).read_bytes() == (ray.path / rel).read_bytes(), rel
    for stage in ("ingest", "filter"):
        m = json.loads((ray.path / stage / "manifest.json").read_text())
        assert 0 < m["workers_cpu_s"] <= m["cpu_s"]


WORKER_OUTPUTS = {  # outputs holding a row per item (the others are aux: edges, clusters)
    "shapes.parquet",  # (a row per item and scope)
    "items.parquet",
    "kept.parquet",
    "removed.parquet",
    "rejected.parquet",
    *(f"{s}.parquet" for s in ("train", "validation", "test")),
}


@pytest.mark.parametrize("policy", ["cap", "spread"])
def test_no_stage_writes_items_rows_in_the_driver(tmp_path, ray_local, monkeypatch, policy):
    """Every stage's rows of items (dedup's put in id order over many ranges; decontaminate's
    with a benchmark that removes some; shapes' under cap, which removes some, and spread,
    which reorders kept, and its shapes rows, grouped in many key ranges; export's sft split
    files) never pass through the driver, nor do the keys export's splits are assigned from
    and checked by: with the driver's part writer broken for them, a Ray run writes the local
    run's bytes."""
    from pipeline.dedup import write as dedup_write
    from pipeline.executors import ray as on_ray
    from pipeline.executors.ray import Held, RayParts
    from pipeline.parts import PartSink, read_output
    from pipeline.shapes import stage as shapes_stage

    # (read in the driver only, so patched here they hold for the workers' tasks too)
    monkeypatch.setattr(dedup_write, "PART_ROWS", 8)  # dedup's rows in many ranges, grouped
    monkeypatch.setattr(on_ray, "ROWS_PER_READ", 50)  # many cutting tasks: ranges in pieces
    monkeypatch.setattr(on_ray, "PIECE_ROWS", 1)  # (shapes' too, however small its pieces)
    monkeypatch.setattr(shapes_stage, "BATCH", 16)  # shapes' rows in many spans
    monkeypatch.setattr(on_ray, "ROWS_PER_CUT", 32)  # shapes' groups in many key ranges
    over = {
        "dedup.batch_size": 23,  # decontaminate's batches too
        "export.format": "sft",
        "shapes.policy": policy,
        "shapes.scope": "corpus",
        "shapes.cap_other": 1,
        "run.part_rows": 40,
        "run.root": str(tmp_path),
    }
    first = Pipeline.from_config(SAMPLE, overrides={**over, "run.name": "first"}).run()
    bench = tmp_path / "bench.csv"  # a benchmark holding some of the corpus's items
    items = read_output(first.path / "dedup" / "kept.parquet", ["before", "after", "comment"])
    items.gather_every(7).write_csv(bench)
    over["decontaminate.against"] = [str(bench)]
    write, add = PartSink.write_table, RayParts.add

    def not_here(self, *a, **k):
        assert self.dest.name not in WORKER_OUTPUTS, f"the driver wrote rows of {self.dest}"
        write(self, *a, **k)

    def only_held(self, outs):  # rows the workers keep, never tables here
        assert all(isinstance(v, Held) for v in outs.values()), outs
        add(self, outs)

    by_range, ranged = on_ray.ray_by_range, []

    def keys_held(run, pieces, *a, **k):  # shapes' key frames and export's members stay
        assert all(isinstance(p, Held) for p in pieces), "key frames came to the driver"
        ranged.append(a[2])  # the ranges
        yield from by_range(run, pieces, *a, **k)

    runs = {}
    for executor in ("local", "ray"):
        with monkeypatch.context() as m:
            if executor == "ray":
                m.setattr(PartSink, "write_table", not_here)
                m.setattr(RayParts, "add", only_held)
                m.setattr(on_ray, "ray_by_range", keys_held)
            runs[executor] = (
                Pipeline.from_config(
                    SAMPLE, overrides={**over, "run.name": executor, "run.executor": executor}
                )
                .run()
                .path
            )
    # shapes: two passes a scope; export: four (ids counted, numbered, edges, checks), and
    # two in the leakage check after it (ids met, keys crossed)
    assert len(ranged) == 14 and min(ranged) > 2, ranged
    for stage in ("dedup", "decontaminate", *(("shapes",) if policy == "cap" else ())):
        assert read_output(runs["ray"] / stage / "removed.parquet").height >= 2, stage
    assert len(part_files(runs["ray"] / "dedup" / "kept.parquet")) >= 3
    files = sorted(
        p.relative_to(runs["local"]) for p in runs["local"].rglob("*.parquet") if p.is_file()
    )
    assert len(files) >= 30, files
    for rel in files:
        assert (runs["local"] / rel).read_bytes() == (runs["ray"] / rel).read_bytes(), rel
    assert verify_run(runs["ray"])[0] == []


def test_parts_a_worker_wrote_where_the_driver_cannot_see_them_are_one_line(
    tmp_path, ray_local, monkeypatch
):
    """A run folder on a disk only some nodes mount: the parts the workers wrote are not
    where the driver looks, and the stage stops with one line instead of renaming an
    incomplete folder into place."""
    from pipeline.errors import EnvError
    from pipeline.executors.ray import RayParts

    done = RayParts._done

    def lost(self, job):  # as if written on another node's disk
        done(self, job)
        for sink in self.sinks.values():
            for f in sink.tmp.glob("part-*.parquet"):
                f.unlink()

    monkeypatch.setattr(RayParts, "_done", lost)
    p = Pipeline.from_config(
        SAMPLE,
        overrides={"run.root": str(tmp_path), "run.name": "r", "run.executor": "ray"},
    )
    with pytest.raises(EnvError, match="the run folder must be on a disk every node mounts"):
        p.run(until="ingest")
    assert not (tmp_path / "r" / "ingest" / "items.parquet").exists()


def test_ray_missing_is_one_clear_line(monkeypatch, tmp_path):
    import builtins

    from pipeline.errors import EnvError
    from pipeline.executors.ray import ensure_ray

    real = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    cfg = Pipeline.from_config(SAMPLE).config
    with pytest.raises(EnvError, match=r"pip install 'editcurate\[ray\]'"):
        ensure_ray(cfg.run)


def test_a_corpus_without_candidate_pairs_runs_on_ray_as_locally(tmp_path, ray_local):
    """No pair to verify, no task: the executor is not asked for an empty dataset."""
    paths = [SAMPLE.parent / "edits.jsonl", SAMPLE.parent / "refinement.jsonl"]
    runs = {}
    for executor in ("local", "ray"):
        p = Pipeline.from_paths(
            *paths, out=tmp_path / executor, overrides={"run.executor": executor}
        )
        runs[executor] = p.run(until="dedup").path
    removed = runs["local"] / "dedup" / "manifest.json"
    assert '"candidate_pairs": 0' in removed.read_text()
    for rel in ("dedup/kept.parquet/part-00000.parquet", "dedup/edges.parquet/part-00000.parquet"):
        assert (runs["local"] / rel).read_bytes() == (runs["ray"] / rel).read_bytes(), rel


def test_ray_batches_are_the_local_batches_of_a_many_part_input(tmp_path, ray_local):
    """Parts of several row groups (uneven), a column selection: each batch on Ray holds
    the rows the local one does, in order."""
    import numpy as np
    import pyarrow as pa

    from pipeline.config import Config
    from pipeline.executors import batches
    from pipeline.parts import PartSink

    n = 3000
    t = pa.table({"k": np.arange(n), "s": [f"r{i}" for i in range(n)], "x": np.ones(n)})
    sink = PartSink(tmp_path / "o.parquet", t.schema, part_rows=700)
    for at, step in zip(range(0, n, 250), [250, 0, 117, 250, 33, 250] * 3, strict=False):
        sink.write_table(t.slice(at, 250), row_group_size=max(step, 1))
    sink.close()

    def fn(batch, ctx):
        return {"o": pa.table({"k": batch.column("k"), "s": batch.column("s")})}, {"n": 1}

    got = {}
    for executor in ("local", "ray"):
        cfg = Config.model_validate({"run": {"executor": executor}})
        res = list(batches(cfg, tmp_path / "o.parquet", fn, None, 401, ["k", "s"]))
        got[executor] = [(r[0]["o"].to_pydict(), r[1], r[2]) for r in res]
    assert got["ray"] == got["local"] and len(got["local"]) == 8
    # no input: no batch (Ray refuses a dataset of no blocks)
    sink = PartSink(tmp_path / "e.parquet", t.schema)
    sink.close()
    cfg = Config.model_validate({"run": {"executor": "ray"}})
    assert list(batches(cfg, tmp_path / "e.parquet", fn, None, 401)) == []


def test_side_columns_join_each_row_on_ray_as_locally(tmp_path, ray_local, monkeypatch):
    """`batches(..., side=)`: columns decided per row elsewhere (pieces in any row order, each
    naming some columns of some rows) are joined to every batch by row number, zero where no
    piece names the row; on Ray the pieces are cut by span and joined by the tasks, never
    laid out in the driver."""
    import numpy as np
    import pyarrow as pa

    import pipeline.executors as local_executor
    from pipeline.config import Config
    from pipeline.executors import batches
    from pipeline.executors.side import Side
    from pipeline.parts import ROW, PartSink

    n = 3000
    t = pa.table({"k": np.arange(n)})
    sink = PartSink(tmp_path / "o.parquet", t.schema, part_rows=700)
    for at in range(0, n, 250):
        sink.write_table(t.slice(at, 250), row_group_size=117)
    sink.close()
    rng = np.random.default_rng(0)
    rows = rng.permutation(n)
    pieces = [  # "a" for every row over two pieces, "b" for a third of them
        pa.table({ROW: rows[:1700], "a": rows[:1700] * 10}),
        pa.table({ROW: rows[1700:], "a": rows[1700:] * 10}),
        pa.table({ROW: rows[::3], "b": rows[::3] % 2 == 0}),
    ]
    schema = pa.schema([("a", pa.int64()), ("b", pa.bool_())])

    def fn(batch, ctx):
        return {"o": pa.Table.from_batches([batch])}, {}

    got = {}
    for executor in ("local", "ray"):
        cfg = Config.model_validate({"run": {"executor": executor}})
        res = batches(
            cfg, tmp_path / "o.parquet", fn, None, 401, numbered=True, side=Side(pieces, schema)
        )
        got[executor] = pa.concat_tables([r[0]["o"] for r in res])
        if executor == "local":  # the driver lays them out only for the local executor
            monkeypatch.setattr(local_executor, "arrays", None)
    local = got["local"]
    assert local.column_names == ["k", ROW, "a", "b"]
    assert got["ray"].equals(local)
    k = local["k"].to_numpy()
    assert (local["a"].to_numpy() == k * 10).all()
    named = np.zeros(n, bool)
    named[rows[::3]] = True
    assert (local["b"].to_numpy() == (named & (k % 2 == 0))).all()


def test_a_filter_that_drops_every_item_runs_on_ray_as_locally(tmp_path, ray_local):
    """Empty stage inputs from the filter on: no batch, no Ray task, the same files."""
    rules = tmp_path / "dropall.yaml"
    rules.write_text(
        "name: dropall\ndescription: every item too long\nrules:\n"
        "  - {name: huge, type: length, field: after, unit: chars, min: 100000000}\n"
    )
    runs = {}
    for executor in ("local", "ray"):
        over = {"run.root": str(tmp_path), "run.name": executor, "run.executor": executor}
        p = Pipeline.from_config(SAMPLE, overrides={**over, "filter.rules": str(rules)})
        runs[executor] = p.run(until="export").path
    files = sorted(f.relative_to(runs["local"]) for f in runs["local"].rglob("*.parquet"))
    assert any(f.parts[0] == "export" for f in files)
    for rel in files:
        if (runs["local"] / rel).is_file():
            assert (runs["local"] / rel).read_bytes() == (runs["ray"] / rel).read_bytes(), rel


def test_tree_cpu_counts_descendants_alive_and_ended():
    """A local Ray instance's CPU is its processes' as the OS counts them, sampled: a
    child's, and a grandchild's that has ended (no parent's record of it is needed)."""
    import subprocess
    import sys

    from pipeline.executors.ray import TreeCPU

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.5: pass\n"
    parent = (
        "import subprocess, sys, time, signal\n"
        "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"  # ended children leave no record
        f"subprocess.Popen([sys.executable, '-c', {burn!r}])\n"
        "time.sleep(1.5)\n" + burn + "print('done', flush=True)\ntime.sleep(30)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        tree = TreeCPU([p.pid], every=0.05)
        assert p.stdout is not None and p.stdout.readline().strip() == "done"
        got = tree.sample()
        assert 0.9 <= got < 1.0 + 5.0, got  # both burns, and two interpreters' start-ups
        assert TreeCPU([p.pid + 10**7]).sample() == 0.0  # gone or never there: nothing
    finally:
        p.kill()
        p.wait()


def test_a_task_streams_its_results_one_at_a_time(monkeypatch):
    """_produce yields each result's counts and tables as it is made (a source read whole
    is not held whole by its worker), and an output without rows yields no table."""
    import pyarrow as pa

    import pipeline.executors.ray as on_ray

    schema = pa.schema([("x", pa.int64())])
    made = []

    def fn(task, ctx):
        for k in range(3):
            made.append(k)
            yield {"o": pa.table({"x": [k] * k}), "p": pa.table({"x": [1]})}, {"n": k}
        raise AssertionError("read past the end")

    monkeypatch.setattr(on_ray, "_node", lambda: "node")
    got = on_ray._produce(None, (fn, None, {"o": schema, "p": schema}))
    assert next(got) == {"counts": {"n": 0}, "rows": {"p": 1}} and made == [0]
    assert next(got).num_rows == 1  # p's table; o had no rows: no table
    assert next(got) == {"counts": {"n": 1}, "rows": {"o": 1, "p": 1}} and made == [0, 1]


def test_the_filters_whole_input_findings_on_ray_partitions_equal_one_search(
    tmp_path, ray_local, monkeypatch
):
    """Mirrors and moved code are found over the filter's whole input. On Ray the input is
    cut by a hash of the repository into partitions searched by tasks of their own (here 44
    partitions of a few rows, read a few row groups at a time): the findings equal one
    search over everything, and are not empty."""
    import pyarrow.parquet as pq

    from pipeline.config import Config
    from pipeline.executors import ray as ray_exec
    from pipeline.filter.stage import start
    from tests.test_filter import frame
    from tests.test_filter_mirrors import _history, _parallel
    from tests.test_filter_moves import _go_move

    rows = [*_history("acme/a"), *_history("acme/b"), *_parallel("acme/c")]
    rows += [*_go_move(), *_go_move(change="c2"), *_history("zz/last")]
    src = tmp_path / "items.parquet"
    src.mkdir()
    t = frame(rows).to_arrow()
    for k, s in enumerate(range(0, t.num_rows, 150)):  # parts of several row groups
        pq.write_table(t.slice(s, 150), src / f"part-{k:05d}.parquet", row_group_size=40)
    monkeypatch.setattr(ray_exec, "ROWS_PER_CUT", 10)
    monkeypatch.setattr(ray_exec, "ROWS_PER_READ", 100)
    found = {}
    for executor in ("local", "ray"):
        cfg = Config.model_validate({"run": {"executor": executor}})
        found[executor] = start(cfg, src).found
    assert found["ray"] == found["local"]
    assert {m.repo for m in found["local"]["mirror_copy"]} == {"acme/a", "acme/b", "zz/last"}
    assert len(found["local"]["moved_code"]) == 2


def test_the_leakage_check_counts_on_ray_as_locally(tmp_path, ray_local, monkeypatch):
    """verify's leakage check by key range (many ranges on Ray, one locally) finds what the
    one over the split files in memory finds, in a run whose splits were mixed by hand: ids
    in two splits, groups spread, held-out rows sharing a change with train."""
    import polars as pl

    from pipeline.config import Config
    from pipeline.executors import ray as on_ray
    from pipeline.leakage import leakage_counts
    from pipeline.parts import part_name, read_output
    from pipeline.runs import write_parquet
    from pipeline.verify import leakage_in_memory

    monkeypatch.setattr(on_ray, "ROWS_PER_CUT", 32)
    over = {"run.root": str(tmp_path), "run.name": "r", "export.split_by": "ratio"}
    run = Pipeline.from_config(SAMPLE, overrides=over).run().path
    exp = run / "export"
    train, test = (read_output(exp / f"{s}.parquet") for s in ("train", "test"))
    moved = train.gather_every(3)  # a third of train to test, and its first row copied there too
    train = train.filter(~pl.col("id").is_in(moved["id"].implode()))
    test = pl.concat([test, moved, train[:1]])
    for name, rows in (("train", train), ("test", test)):
        shutil.rmtree(exp / f"{name}.parquet")
        write_parquet(rows.to_arrow(), exp / f"{name}.parquet" / part_name(0), {})
    leak = read_manifest(exp)["leakage"]
    got = {
        e: leakage_counts(Config.model_validate({"run": {"executor": e}}), exp, leak, True)
        for e in ("local", "ray")
    }
    assert got["ray"] == got["local"] == leakage_in_memory(exp, leak, True)
    cross, sharing = got["local"]
    names = [g["name"] for g in leak["groupings"]]
    assert cross[names.index("id")] == 1 and sharing > 0 and sum(cross) > 3, (names, cross)
    problems, _ = verify_run(run)
    assert any("1 id groups span two or more splits" in p for p in problems), problems
    # given the run's config (as `editcurate run` gives it), verify checks on its executor:
    # on Ray by key range, never with the split files in the driver
    from pipeline import verify

    def in_memory(*_a, **_k):
        raise AssertionError("the split files were read into the driver")

    monkeypatch.setattr(verify, "leakage_in_memory", in_memory)
    ray_cfg = Config.model_validate({"run": {"executor": "ray"}})
    on_ray, _ = verify_run(run, ray_cfg)
    assert on_ray == problems
    # a Ray run folder verified where Ray cannot start: checked in this process instead
    import pipeline.leakage

    def no_ray(*_a, **_k):
        raise verify.EnvError("run.executor = 'ray' needs Ray")

    monkeypatch.setattr(verify, "leakage_in_memory", leakage_in_memory)
    monkeypatch.setattr(pipeline.leakage, "leakage_counts", no_ray)
    assert verify_run(run, ray_cfg)[0] == problems

"""The Stage contract, the one runner, the Python API and the zero-config CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pipeline import Pipeline, Run
from pipeline.runs import read_manifest
from pipeline.stage import PIPELINE, Output, Stage, by_name
from pipeline.verify import verify_run

ROOT = Path(__file__).resolve().parents[1]
ROWS = [
    {
        "before": f"value_{k} = compute({k})",
        "after": f"value_{k} = compute_fast({k})",
        "comment": f"use the fast path for value {k}",
        "repo": "a/b",
        "path": f"m{k}.py",
    }
    for k in range(30)
]


def jsonl(tmp_path: Path, rows: list[dict] = ROWS, name: str = "edits.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


# ------------------------------------------------------------------------ a toy stage


def shout(batch: pa.RecordBatch, cfg) -> tuple[dict, dict]:
    """Upper-cases comments; items whose comment mentions 9 leave here."""
    t = pa.Table.from_batches([batch])
    t = t.set_column(t.schema.get_field_index("comment"), "comment", pc.utf8_upper(t["comment"]))
    nine = pc.match_substring(t["comment"], "9")
    return (
        {"loud.parquet": t.filter(pc.invert(nine)), "nines.parquet": t.filter(nine)},
        {"items_in": t.num_rows, "nines": int(pc.sum(nine).as_py() or 0)},
    )


TOY = Stage(
    name="shout",
    section=None,
    reads=("filter/kept.parquet",),
    writes=(
        Output("loud.parquet", "items", lambda schema: schema),
        Output("nines.parquet", "terminal", lambda schema: schema),
    ),
    map=shout,
    summary=None,
)


def test_a_toy_stage_runs_through_the_runner_without_touching_runner_code(tmp_path):
    stages = (by_name("ingest"), by_name("filter"), TOY)
    p = Pipeline(Pipeline.from_paths(jsonl(tmp_path), out=tmp_path / "run").config, stages)
    run = p.run()
    assert [r.skipped for r in run.results] == [False, False, False]
    out = tmp_path / "run" / "shout"
    m = read_manifest(out)
    assert m["counts"] == {"items_in": 30, "nines": 3}
    assert m["conservation"] == {
        "kind": "ids",
        "input": "../filter/kept.parquet",
        "outputs": ["loud.parquet", "nines.parquet"],
    }
    assert set(m["outputs"]) == {"loud.parquet", "nines.parquet"}
    assert not list(out.glob(".*.tmp"))  # atomic: no temp file left
    loud = run.read("shout/loud").collect()
    assert loud.height == 27 and loud["comment"][0].isupper()
    assert verify_run(tmp_path / "run")[0] == []
    before = (out / "loud.parquet").stat().st_mtime_ns
    again = p.run()
    assert [r.skipped for r in again.results] == [True, True, True]  # unchanged fingerprints
    assert (out / "loud.parquet").stat().st_mtime_ns == before
    # a lost item: the runner's conservation check (verify's) fails the stage at once
    (tmp_path / "run" / "shout" / "manifest.json").unlink()
    from pipeline.errors import DataError

    lossy = Stage(
        name="shout",
        section=None,
        reads=TOY.reads,
        writes=TOY.writes,
        map=lambda b, c: ({k: v.slice(1) for k, v in shout(b, c)[0].items()}, {}),
    )
    with pytest.raises(DataError, match="shout: .*lost"):
        Pipeline(p.config, (*stages[:2], lossy)).run()


def _wrong_columns(cfg, io):
    io.write("x.parquet", pa.table({"other": ["a"]}))
    return {}, {"conservation": {"kind": "none"}}


def test_a_stage_writing_other_columns_than_it_declares_fails(tmp_path):
    from pipeline.runs import StageFailed

    bad = Stage(
        name="bad",
        section=None,
        reads=("ingest/items.parquet",),
        writes=(Output("x.parquet", "aux", pa.schema([("id", pa.string())])),),
        step=_wrong_columns,
        conservation="none",
    )
    cfg = Pipeline.from_paths(jsonl(tmp_path), out=tmp_path / "run").config
    with pytest.raises(StageFailed, match=r"bad: x.parquet has columns \['other'\]"):
        Pipeline(cfg, (by_name("ingest"), bad)).run()
    assert read_manifest(tmp_path / "run" / "bad") is None  # not finished: redone next time
    with pytest.raises(ValueError, match="exactly one of step and map"):
        Stage(name="x", section=None, reads=(), writes=(), step="a:b", map="a:c")


def test_pipeline_is_one_ordered_list_the_cli_and_verify_read():
    from pipeline.cli import app
    from pipeline.verify import stage_dirs

    assert [s.name for s in PIPELINE] == [
        "ingest",
        "filter",
        "dedup",
        "decontaminate",
        "shapes",
        "export",
    ]
    commands = {c.name or c.callback.__name__ for c in app.registered_commands}
    assert {"ingest", "filter", "dedup", "decontaminate", "shapes", "export", "run"} <= commands
    assert stage_dirs.__module__ == "pipeline.verify"


# ------------------------------------------------------------------------ API and CLI


def test_the_api_and_the_cli_give_the_same_rows(tmp_path, cli, monkeypatch):
    src = jsonl(tmp_path)
    monkeypatch.chdir(tmp_path)
    api = Pipeline.from_paths(src, out=tmp_path / "api").run()
    assert isinstance(api, Run) and api.path == tmp_path / "api"
    res = cli("run", src, "--json")
    summary = json.loads(res.stdout)
    assert summary["run"] == str(tmp_path / "runs" / "edits")  # ./runs/<stem>
    assert summary["stages"]["ingest"]["counts"]["items_out"] == 30
    via_cli = Run(tmp_path / "runs" / "edits").read("export/train").collect()
    via_api = api.read("export/train").collect()
    assert via_api.height > 0 and via_api.equals(via_cli)
    s = api.summary()
    assert list(s["stages"]) == [s.name for s in PIPELINE]
    assert s["stages"]["export"]["outputs"]["export/train.parquet"] == via_api.height


def test_from_config_with_a_dict_and_overrides(tmp_path):
    src = jsonl(tmp_path)
    data = {
        "run": {"name": "d", "root": str(tmp_path / "runs")},
        "ingest": {"sources": [{"kind": "table", "path": str(src)}]},
    }
    p = Pipeline.from_config(data, overrides={"dedup.threshold": 0.9, "export.seed": 3})
    assert (p.config.dedup.threshold, p.config.export.seed) == (0.9, 3)
    run = p.run(until="filter")
    assert run.read("filter/kept").select(pl.len()).collect().item() == 30
    assert not (tmp_path / "runs" / "d" / "dedup").exists()
    from pipeline.config import ConfigError

    with pytest.raises(ConfigError, match="dedup.treshold"):
        Pipeline.from_config(data, overrides={"dedup.treshold": 0.9})


def test_zero_config_detects_formats_and_names_the_run_folder(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    csv = tmp_path / "more.csv"
    pl.DataFrame(ROWS[:5]).write_csv(csv)
    res = cli("run", jsonl(tmp_path), csv, "--print-config")
    assert 'kind = "table"' in res.stdout and "more.csv" in res.stdout
    cli("run", jsonl(tmp_path), csv)
    m = read_manifest(tmp_path / "runs" / "edits" / "ingest")
    assert m["counts"]["items_out"] == 35
    res = cli("run", tmp_path / "nope.jsonl", ok=False)
    assert res.exit_code == 3 and "nope.jsonl: no such file" in res.output  # I/O, as README
    res = cli("run", ok=False)
    assert res.exit_code == 2 and "give input paths" in res.output


def test_version_and_a_fast_help():
    from importlib import metadata

    env = {**os.environ, "COLUMNS": "100"}
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "--version"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    assert out.stdout.strip() == f"editcurate {metadata.version('editcurate')}"
    t = time.perf_counter()
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; import pipeline.cli; "
            "heavy = ('polars', 'pyarrow', 'numba', 'pydantic'); "
            "print(sorted(m for m in heavy if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.stdout.strip() == "[]", "the CLI module must not import heavy libraries"
    assert time.perf_counter() - t < 5


def test_progress_without_a_terminal_is_periodic_log_lines(capsys):
    from pipeline.console import LineProgress

    with LineProgress(every=0) as bar:
        task = bar.add_task("dedup: shingles", total=4)
        bar.advance(task, 2)
        bar.advance(task, 2)
    err = capsys.readouterr().err
    assert "dedup: shingles: 2/4 (50%)" in err and "4/4 (100%)" in err


def test_a_progress_task_status_follows_its_count(capsys):
    """A task's `status` field (smoke-train: a window's loss, the items skipped) shows after
    its count; update(advance=, status=) as rich's Progress takes them."""
    from pipeline.console import LineProgress

    with LineProgress(every=0) as bar:
        task = bar.add_task("smoke-train: training steps", total=2)
        bar.update(task, advance=1, status="loss 5.57, skipped 0")
        bar.update(task, advance=1, status="loss 5.4, skipped 1")
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("smoke-train: training steps: 1/2 (50%), loss 5.57, skipped 0, ")
    assert err[1].startswith("smoke-train: training steps: 2/2 (100%), loss 5.4, skipped 1, ")


def test_a_same_size_byte_flip_in_a_part_reruns_that_stage_and_restores_it(tmp_path):
    """The skip check compares each output's recorded content hash, not its size: a flipped
    byte in one part of filter's output (same size) re-runs filter, which writes the same
    bytes again; the later stage read the good output before the flip, so it stays current."""
    from pipeline.parts import part_files

    stages = (by_name("ingest"), by_name("filter"), TOY)
    p = Pipeline(Pipeline.from_paths(jsonl(tmp_path), out=tmp_path / "run").config, stages)
    p.run()
    part = part_files(tmp_path / "run" / "filter" / "kept.parquet")[0]
    good = part.read_bytes()
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x01
    part.write_bytes(bytes(bad))
    again = p.run()
    assert [r.skipped for r in again.results] == [True, False, True]
    assert part.read_bytes() == good
    assert verify_run(tmp_path / "run")[0] == []


def test_json_cpu_parts_sum_to_the_process_own_cpu(tmp_path):
    """`run --json` accounts for the command's CPU: stages, the work between them, verify,
    report and start-up sum to the process's own user + system time, which is most of what
    the OS measured for the process (the rest: the interpreter's teardown after the print)."""
    src = jsonl(tmp_path)
    code = "import sys; from pipeline.cli import app; sys.argv[0] = 'editcurate'; app()"
    args = [sys.executable, "-c", code, "run", str(src), "--out", str(tmp_path / "r"), "--json"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert p.stdout is not None
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    summary = json.loads(out[out.index("{") :])
    cpu = summary["cpu_s"]
    if sys.platform == "linux":  # each stage's own peak RSS (VmHWM reset before it)
        peaks = [v["peak_rss_mib"] for v in summary["stages"].values()]
        assert all(0 < p <= usage.ru_maxrss / 1024 for p in peaks), peaks
    parts = ("startup", "stages", "between_stages", "verify", "report")
    assert set(cpu) == {"total", "process", "workers", *parts}
    assert min(cpu.values()) >= 0 and cpu["stages"] > 0 and cpu["report"] > 0
    assert cpu["workers"] == 0 and cpu["total"] == cpu["process"]  # no Ray: no workers
    assert abs(sum(cpu[k] for k in parts) - cpu["total"]) < 0.01
    assert (
        0.75 * (usage.ru_utime + usage.ru_stime)
        <= cpu["process"]
        <= usage.ru_utime + usage.ru_stime
    )

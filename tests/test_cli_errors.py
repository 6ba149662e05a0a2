"""Failures a user meets: one line (never Rich markup), the documented exit code, no
traceback, nothing written outside the run root, one process per run folder, empty corpora."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.runs import run_lock
from tests.conftest import toml_config

GOOD = [{"before": f"x = {i}", "after": f"y = {i}", "comment": f"rename x{i}"} for i in range(4)]
SRC = '[[ingest.sources]]\nkind = "table"\npath = "d.jsonl"\n'


def data(tmp_path: Path, rows: list[dict] | None = None) -> Path:
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows or GOOD))
    return toml_config(tmp_path, SRC)


def one_error_line(res) -> str:
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, res.output
    assert "Traceback" not in res.output
    return lines[0]


def test_invalid_toml_is_one_line_exit_2(tmp_path, cli):
    p = tmp_path / "c.toml"
    p.write_text("[run\nname = 1\n")
    line = one_error_line(cli("ingest", "--config", p, ok=False))
    assert str(p) in line and "invalid TOML" in line
    assert cli("ingest", "--config", p, ok=False).exit_code == 2


def test_a_folder_or_binary_file_as_config_is_a_config_error(tmp_path, cli):
    res = cli("run", "--config", tmp_path, ok=False)
    assert res.exit_code == 2 and "is a folder" in one_error_line(res)
    (tmp_path / "b.toml").write_bytes(b"\xff\xfe\x00garbage")
    res = cli("run", "--config", tmp_path / "b.toml", ok=False)
    assert res.exit_code == 2 and "not UTF-8" in one_error_line(res)


def test_markup_in_an_error_is_printed_as_written(tmp_path, cli):
    cfg = toml_config(tmp_path, '[[ingest.sources]]\nkind = "table"\npath = "[bold]x[/].jsonl"\n')
    res = cli("ingest", "--config", cfg, ok=False)
    assert "[bold]x[/].jsonl" in one_error_line(res)


@pytest.mark.parametrize("name", ["../x", "/tmp/abs", "a/b", "..", " x"])
def test_run_name_cannot_leave_the_run_root(tmp_path, cli, name):
    cfg = data(tmp_path)
    res = cli("run", "--config", cfg, "--set", f"run.name={json.dumps(name)}", ok=False)
    assert res.exit_code == 2 and "run.name" in one_error_line(res)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "editcurate.toml"]


def test_a_symlink_out_of_the_run_root_is_refused(tmp_path, cli):
    cfg = data(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "t").symlink_to(outside)
    res = cli("ingest", "--config", cfg, ok=False)
    assert res.exit_code == 2 and "outside the run root" in one_error_line(res)
    assert list(outside.iterdir()) == []


def test_a_second_process_on_the_run_folder_fails_naming_the_holder(tmp_path, cli):
    cfg = data(tmp_path)
    run_dir = tmp_path / "runs" / "t"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from pipeline.runs import run_lock\n"
            "with run_lock(Path(sys.argv[1])):\n"
            "    print('held', flush=True); time.sleep(30)\n",
            str(run_dir),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        res = cli("run", "--config", cfg, ok=False)
        assert res.exit_code == 3
        assert f"pid {holder.pid}" in one_error_line(res)
        assert not (run_dir / "ingest").exists()
    finally:
        holder.kill()
        holder.wait()
    # the holder died without cleaning up: its lock file is stale and simply reused
    assert (run_dir / ".lock").exists()
    cli("ingest", "--config", cfg)


def test_run_lock_is_reentrant_across_sequential_commands(tmp_path):
    with run_lock(tmp_path / "r"):
        pass
    t = time.time()
    with run_lock(tmp_path / "r"):
        assert time.time() - t < 1


def test_a_symlinked_lock_file_is_refused_and_never_written_through(tmp_path, cli):
    cfg = data(tmp_path)
    run_dir = tmp_path / "runs" / "t"
    run_dir.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run_dir / ".lock").symlink_to(victim)
    res = cli("ingest", "--config", cfg, ok=False)
    assert res.exit_code == 3
    line = one_error_line(res)
    assert str(run_dir / ".lock") in line and "symbolic link" in line and "remove it" in line
    assert victim.read_text() == "precious\n"
    assert not (run_dir / "ingest").exists()
    (run_dir / ".lock").unlink()
    (run_dir / ".lock").mkdir()  # a folder is refused as plainly
    res = cli("ingest", "--config", cfg, ok=False)
    assert res.exit_code == 3 and "is a folder" in one_error_line(res)


DEEP = 100_000


@pytest.mark.parametrize(
    ("extra", "rules", "expected"),
    [
        (
            "[shapes]\na = " + "[" * DEEP + "]" * DEEP + "\n",
            None,
            "invalid TOML: arrays or inline tables nested more than 32 deep (line 9)",
        ),
        (
            '[filter]\nrules = "deep.yaml"\n',
            "rules: " + "[" * DEEP + "]" * DEEP + "\n",
            "deep.yaml: invalid YAML (only plain data is allowed): lists or mappings nested",
        ),
        (
            '[filter]\nrules = "deep.yaml"\n',
            "rules:\n  " + "- " * DEEP + "x\n",
            "deep.yaml: invalid YAML (only plain data is allowed): lists or mappings nested",
        ),
        (
            '[filter]\nrules = "deep.yaml"\n',
            "rules: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n",
            "deep.yaml: invalid YAML (only plain data is allowed): lists or mappings nested",
        ),
        (
            f"[ingest]\nmax_record_bytes = {2**63 - 1}\n",
            None,
            "ingest.max_record_bytes: must be <= 1073741824",
        ),
        (f"[shapes]\nwindow = {2**63 - 1}\n", None, "shapes.window: must be <= 1048576"),
        (
            "[dedup]\nnum_perm = 4194304\nbands = 4194304\nrows = 1\n",
            None,
            "dedup.num_perm: must be <= 4096, got 4194304",
        ),
    ],
    ids=["toml", "yaml-flow", "yaml-block", "yaml-mapping", "record", "window", "bands"],
)
def test_config_past_its_bounds_is_one_line_exit_2_before_any_stage(
    tmp_path, cli, extra, rules, expected
):
    """Config input never ends in "internal error" (a RecursionError, an overflow) or in
    "Too many open files" (one per dedup band): exit 2, one line naming the file and key."""
    cfg = data(tmp_path)
    cfg.write_text(cfg.read_text() + extra)
    if rules is not None:
        (tmp_path / "deep.yaml").write_text(rules)
    res = cli("run", "--config", cfg, ok=False)
    line = one_error_line(res)
    assert res.exit_code == 2, res.output
    assert expected in line and "internal error" not in line
    assert str(tmp_path / ("deep.yaml" if rules else "editcurate.toml")) in line
    assert not (tmp_path / "runs" / "t" / "ingest").exists()


def test_an_ingest_where_every_record_failed_exits_1(tmp_path, cli):
    (tmp_path / "d.jsonl").write_text("{broken\nnot json either\n")
    res = cli("run", "--config", toml_config(tmp_path, SRC), ok=False)
    assert res.exit_code == 1
    assert "every one of 2 records failed" in one_error_line(res)
    assert not (tmp_path / "runs" / "t" / "filter").exists()


def test_a_corpus_filtered_to_nothing_finishes_and_says_why(tmp_path, cli):
    rows = [{"before": "a", "after": "a", "comment": "same"}] * 2  # no-ops: all dropped
    res = cli("run", "--config", data(tmp_path, rows))
    assert res.exit_code == 0, res.output
    run = tmp_path / "runs" / "t"
    for split in ("train", "validation", "test"):
        assert (run / "export" / f"{split}.parquet").exists()
    md = (run / "report" / "report.md").read_text()
    assert "The curated corpus is empty: filter removed every item" in md
    assert cli("verify", run).exit_code == 0


def test_an_unforeseen_failure_is_one_line_and_debug_shows_the_traceback(
    tmp_path, cli, monkeypatch
):
    import pipeline.filter.stage as filter_stage

    def boom(*a, **k):
        raise RuntimeError("kaboom [bold]x[/]")

    monkeypatch.setattr(filter_stage, "map_batch", boom)
    cfg = data(tmp_path)
    res = cli("run", "--config", cfg, ok=False)
    assert res.exit_code == 1
    line = one_error_line(res)
    assert "internal error: RuntimeError: kaboom [bold]x[/]" in line and "--debug" in line
    res = cli("--debug", "run", "--config", cfg, ok=False)
    assert isinstance(res.exception, RuntimeError)


def test_an_os_error_is_one_line_exit_3(tmp_path, cli, monkeypatch):
    import pipeline.filter.stage as filter_stage

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied", str(tmp_path / "x.parquet"))

    monkeypatch.setattr(filter_stage, "map_batch", denied)
    res = cli("run", "--config", data(tmp_path), ok=False)
    assert res.exit_code == 3, res.output
    assert one_error_line(res) == f"error: {tmp_path / 'x.parquet'}: Permission denied"


def _unreadable(tmp_path: Path, *args: object):
    """`editcurate ARGS` unable to read what chmod 000 guards: as root, in a child without
    CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH (setpriv); otherwise in-process."""
    import os
    import shutil
    from types import SimpleNamespace

    from typer.testing import CliRunner

    from pipeline.cli import app

    if os.geteuid() != 0:
        return CliRunner().invoke(app, [str(a) for a in args])
    caps = "-dac_override,-dac_read_search"
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("as root, permission denied needs setpriv to drop the DAC capabilities")
    cmd = [setpriv, f"--inh-caps={caps}", f"--bounding-set={caps}", sys.executable]
    cmd += ["-c", "from pipeline.cli import app; app()", *map(str, args)]
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    if "setpriv" in p.stderr and p.returncode != 0 and "error:" not in p.stderr:
        pytest.skip(f"setpriv cannot drop capabilities here: {p.stderr.strip()}")
    return SimpleNamespace(exit_code=p.returncode, output=p.stdout + p.stderr)


def test_an_unreadable_path_argument_is_one_line_exit_3_as_from_a_config(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps(GOOD[0]) + "\n")
    src.chmod(0)
    res = _unreadable(tmp_path, "run", src, "--out", tmp_path / "r")
    assert res.exit_code == 3, res.output
    assert one_error_line(res) == f"error: {src}: permission denied"
    cfg = toml_config(tmp_path, '[[ingest.sources]]\nkind = "table"\npath = "a.jsonl"\n')
    res = _unreadable(tmp_path, "run", "--config", cfg)
    assert res.exit_code == 3 and f"{src}: permission denied" in one_error_line(res)


def test_a_missing_path_or_a_plain_folder_argument_is_one_line_exit_3(tmp_path, cli):
    res = cli("run", tmp_path / "nope.jsonl", "--out", tmp_path / "r", ok=False)
    assert res.exit_code == 3
    assert one_error_line(res) == f"error: {tmp_path / 'nope.jsonl'}: no such file or folder"
    (tmp_path / "plain").mkdir()
    res = cli("run", tmp_path / "plain", "--out", tmp_path / "r", ok=False)
    assert res.exit_code == 3 and "neither a git repository" in one_error_line(res)
    assert not (tmp_path / "r").exists()


def test_a_symlink_loop_argument_is_one_line_exit_3_as_from_a_config(tmp_path, cli):
    (tmp_path / "loop2").symlink_to("loop1")
    (tmp_path / "loop1").symlink_to("loop2")
    res = cli("run", tmp_path / "loop1", "--out", tmp_path / "r", ok=False)
    assert res.exit_code == 3, res.output
    line = one_error_line(res)
    assert line == f"error: {tmp_path / 'loop1'}: too many levels of symbolic links"
    cfg = toml_config(tmp_path, '[[ingest.sources]]\nkind = "table"\npath = "loop1"\n')
    res = cli("run", "--config", cfg, ok=False)
    assert res.exit_code == 3 and line.removeprefix("error: ") in one_error_line(res)
    data(tmp_path)
    res = cli("run", tmp_path / "d.jsonl", "--out", tmp_path / "loop1" / "r", ok=False)
    assert res.exit_code == 3 and "too many levels of symbolic links" in one_error_line(res)


@pytest.mark.parametrize(
    "override, expected",
    [
        ("dedup.threshold=1.5", "dedup.threshold: must be <= 1.0, got 1.5"),
        ("dedup.seed=-1", "dedup.seed: must be >= 0, got -1"),
        ("dedup.seed=99999999999999999999999", "dedup.seed: must be < 4294967296"),
        ('dedup.fields=["before","before"]', "dedup.fields.1: 'before' is listed twice"),
        ("shapes.seed=-1", "shapes.seed: must be >= 0, got -1"),
        ("export.seed=4294967296", "export.seed: must be < 4294967296"),
        ("smoke.seed=-1", "smoke.seed: must be >= 0, got -1"),
    ],
)
def test_a_bad_set_value_without_a_config_names_the_override(tmp_path, cli, override, expected):
    src = tmp_path / "d.jsonl"
    src.write_text(json.dumps(GOOD[0]) + "\n")
    res = cli("run", src, "--out", tmp_path / "r", "--set", override, ok=False)
    assert res.exit_code == 2, res.output
    assert one_error_line(res).startswith(f"error: override {override!r}: {expected}")
    assert "<dict>" not in res.output and not (tmp_path / "r").exists()
    # from a config: the file, the key, and the override that set it
    cfg = data(tmp_path)
    res = cli("run", "--config", cfg, "--set", override, ok=False)
    assert res.exit_code == 2 and f"{cfg}: {expected}" in one_error_line(res)
    assert f"(set by --set {override})" in one_error_line(res)


def test_report_options_out_of_range_are_one_line_exit_2(tmp_path, cli):
    res = cli("report", tmp_path, "--seed", "-1", ok=False)
    assert res.exit_code == 2
    assert one_error_line(res) == "error: report --seed: must be >= 0 and < 4294967296, got -1"
    res = cli("report", tmp_path, "--batch", "0", ok=False)
    assert res.exit_code == 2 and "report --batch: must be >= 1" in one_error_line(res)


def test_an_error_line_escapes_control_characters(tmp_path, cli):
    bad = tmp_path / "x\x1b[2J\x07.jsonl"
    res = cli("run", bad, "--out", tmp_path / "r", ok=False)
    assert res.exit_code == 3
    assert "\x1b" not in res.output and "\x07" not in res.output
    assert r"x\x1b[2J\x07.jsonl: no such file" in one_error_line(res)

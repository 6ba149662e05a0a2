"""The files a user names besides the data (a config, a rules file, a labels CSV) as a FIFO, a
device or a runaway file: one line at once, exit 2, never a hang or a process filling memory.
Each runs the CLI in its own process with a timeout, since the failure was a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.textfile import NotTextFile, read_text
from tests.adversarial.conftest import EXIT_USAGE, GOOD, jsonl

ROOT = Path(__file__).resolve().parents[2]  # this checkout's pipeline, not an installed one
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import app; app()", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
    )


def _one_line(p: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


def _special(tmp_path: Path, kind: str, name: str) -> Path:
    p = tmp_path / name
    if kind == "fifo":
        os.mkfifo(p)
    else:
        p.symlink_to("/dev/zero")
    return p


@needs_fifo
@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_config_that_is_no_regular_file(tmp_path, kind):
    """Was: a FIFO blocked forever; /dev/zero grew past 10 GB in 20 s."""
    cfg = _special(tmp_path, kind, "c.toml")
    p = _cli(tmp_path, "run", "--config", str(cfg))
    assert p.returncode == EXIT_USAGE
    assert "not a regular file; it is not read" in _one_line(p)


@needs_fifo
@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_rules_file_that_is_no_regular_file(tmp_path, kind):
    """Was: a FIFO blocked forever; /dev/zero grew past 13 GB in 30 s."""
    data = tmp_path / "d.jsonl"
    data.write_bytes(jsonl(GOOD))
    rules = _special(tmp_path, kind, "r.yaml")
    p = _cli(tmp_path, "run", str(data), "--until", "filter", "--set", f"filter.rules={rules}")
    assert p.returncode == EXIT_USAGE
    assert "cannot read rules file" in _one_line(p)


@needs_fifo
def test_a_labels_csv_that_is_a_fifo(tmp_path):
    """Was: polars blocked on the FIFO forever."""
    fifo = _special(tmp_path, "fifo", "labels.csv")
    code = (
        "from pathlib import Path; from pipeline.dedup.tune import read_labels, TuneFailed\n"
        f"try: read_labels(Path({json.dumps(str(fifo))}))\n"
        "except TuneFailed as e: print(e)"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert "cannot read labels CSV (is a FIFO" in p.stdout, p.stderr


def test_a_text_over_the_bound_is_refused(tmp_path):
    p = tmp_path / "big.toml"
    p.write_text("# " + "x" * 100 + "\n")
    assert read_text(p, limit=200).startswith("# x")
    with pytest.raises(NotTextFile, match="over 50 bytes"):
        read_text(p, limit=50)

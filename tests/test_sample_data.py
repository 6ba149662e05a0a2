"""The sample is generated: make_sample.py and its templates (data/sample/templates/) give the
committed files byte for byte, so an edit to a template is an edit the sample shows."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SAMPLE = Path(__file__).parent.parent / "data" / "sample"
OUTPUTS = ("github_comments.json", "refinement.jsonl", "edits.csv", "edits.jsonl")


def test_make_sample_regenerates_the_committed_files(tmp_path):
    shutil.copy(SAMPLE / "make_sample.py", tmp_path)
    shutil.copytree(SAMPLE / "templates", tmp_path / "templates")
    res = subprocess.run(
        [sys.executable, "make_sample.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr[-2000:]
    for name in OUTPUTS:
        assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name


def test_the_templates_are_data_the_generator_reads():
    files = sorted((SAMPLE / "templates" / "github").glob("*.yaml"))
    assert len(files) >= 8
    for name in ("refinement.yaml", "edits.yaml", "github_threads.yaml"):
        assert (SAMPLE / "templates" / name).is_file(), name
    text = (SAMPLE / "make_sample.py").read_text()
    assert "TEMPLATES: list[T] = [" not in text and "REFINEMENT: list[" not in text
    # edits.csv's rows and the founding pair's file are data too, not inline literals
    assert "package-lock.json" not in text and "pre-commit-hooks" not in text

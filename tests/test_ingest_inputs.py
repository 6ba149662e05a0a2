"""An input is recorded as what ingest read: a source that changes while it is read (truncated,
rewritten, restored) fails the stage with one I/O line (exit 3) and leaves no manifest, so a
partial read is never cached as the whole input and the next run reads it again."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from pipeline import Pipeline
from pipeline.ingest.sources import SOURCES
from pipeline.ingest.stage import IngestIOError
from pipeline.runs import read_manifest
from pipeline.verify import verify_run

N = 30_000  # about 3.5 MB: more than the reader's 1 MiB buffer, so a cut is seen mid-read


def _source(tmp_path: Path) -> Path:
    p = tmp_path / "edits.jsonl"
    rows = (
        {"before": f"x_{k} = compute({k})", "after": f"x_{k} = fast({k})", "comment": f"c {k}"}
        for k in range(N)
    )
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _wrap_read(monkeypatch, change) -> None:
    """The table reader, with `change(path, k)` called before it yields record k."""
    real = SOURCES["table"]

    def read(spec, path, ctx):
        for k, rec in enumerate(real.read(spec, path, ctx)):
            change(path, k)
            yield rec
        change(path, -1)  # the reader is done

    monkeypatch.setitem(SOURCES, "table", dataclasses.replace(real, read=read))


@pytest.mark.parametrize("restored", ["while_read", "after_the_run"])
def test_an_input_truncated_while_read_fails_the_run_and_is_read_again(
    tmp_path, monkeypatch, restored
):
    src = _source(tmp_path)
    whole = src.read_bytes()

    def change(path: Path, k: int) -> None:
        if k == 0:  # after the first record: cut the file to half
            with open(path, "r+b") as f:
                f.truncate(len(whole) // 2)
        elif k == -1 and restored == "while_read":
            path.write_bytes(whole)

    _wrap_read(monkeypatch, change)
    p = Pipeline.from_paths(src, out=tmp_path / "run")
    with pytest.raises(IngestIOError, match="changed while ingest read it") as e:
        p.run(until="ingest")
    assert e.value.exit_code == 3
    assert "edits.jsonl" in str(e.value) and "\n" not in str(e.value)
    assert read_manifest(tmp_path / "run" / "ingest") is None  # not done: redone next time
    monkeypatch.undo()
    src.write_bytes(whole)
    again = p.run(until="ingest")
    assert not again.results[0].skipped
    assert again.results[0].manifest["counts"]["records_in"] == N
    assert again.results[0].manifest["counts"]["items_out"] == N
    assert verify_run(tmp_path / "run")[0] == []


def test_an_input_rewritten_with_the_same_bytes_while_read_fails_the_run(tmp_path, monkeypatch):
    """Content restored byte for byte is not proof the read saw it whole: the file was
    written while it was read (its ctime moved), so the stage fails rather than guess."""
    src = _source(tmp_path)
    whole = src.read_bytes()

    def change(path: Path, k: int) -> None:
        if k == 0:
            path.write_bytes(whole)

    _wrap_read(monkeypatch, change)
    with pytest.raises(IngestIOError, match="changed while ingest read it"):
        Pipeline.from_paths(src, out=tmp_path / "run").run(until="ingest")


def test_a_git_source_whose_branch_moves_while_read_fails_the_run(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e", *args],
            check=True,
            capture_output=True,
        )

    git("init", "-q", "-b", "main")
    for k in range(3):
        (repo / "a.py").write_text(f"x = {k}\n")
        git("add", "a.py")
        git("commit", "-qm", f"edit {k}")
    real = SOURCES["git"]

    def read(spec, path, ctx):
        yield from real.read(spec, path, ctx)
        (repo / "a.py").write_text("x = 99\n")  # a commit lands while ingest runs
        git("commit", "-qam", "late")

    monkeypatch.setitem(SOURCES, "git", dataclasses.replace(real, read=read))
    cfg = {
        "run": {"root": str(tmp_path / "runs"), "name": "g"},
        "ingest": {"sources": [{"kind": "git", "path": str(repo), "rev": "main"}]},
    }
    with pytest.raises(IngestIOError, match="changed while ingest read it"):
        Pipeline.from_config(cfg).run(until="ingest")


def test_an_unchanged_input_is_checked_and_the_rerun_skips(tmp_path):
    src = _source(tmp_path)
    p = Pipeline.from_paths(src, out=tmp_path / "run")
    assert not p.run(until="ingest").results[0].skipped
    assert p.run(until="ingest").results[0].skipped


def test_a_run_folder_inside_a_parquet_folder_source_is_not_part_of_the_input(tmp_path):
    """A folder source is fingerprinted and watched without the run's own folder kept inside
    it (ingest writes there while it reads the source): a forced re-run succeeds, and an
    unforced one skips as unchanged."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "parts"
    src.mkdir()
    rows = {"before": ["x = 1", "y = 2"], "after": ["x = 2", "y = 3"], "comment": ["x", "y"]}
    pq.write_table(pa.table(rows), src / "part-0.parquet")
    run = src / "run"
    first = Pipeline.from_paths(src, out=run).run(until="ingest").results[0]
    assert first.manifest["counts"]["items_out"] == 2
    forced = Pipeline.from_paths(src, out=run).run(until="ingest", force=True).results[0]
    assert not forced.skipped and forced.manifest["inputs"] == first.manifest["inputs"]
    assert Pipeline.from_paths(src, out=run).run(until="ingest").results[0].skipped
    assert verify_run(run)[0] == []

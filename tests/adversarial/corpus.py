"""A small table corpus for the stage-level cases: rows with their own words (no shared shape
group or dedup cluster unless a case makes one), the config around them, and a finished run
to copy (module-scoped: copying is cheaper than a run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from pipeline.runs import file_sha256
from tests.adversarial.hostile import SECRETS, assert_sound_run, cli, jsonl, write_config

SRC = '[[ingest.sources]]\nname = "d"\nkind = "table"\npath = "d.jsonl"\n'
SPLITS = ("train", "validation", "test")
# Rules that keep everything: the hostile item reaches dedup, shapes and export.
KEEP_ALL = "name: keep_all\ndescription: nothing dropped\nrules: []\n"


def word(n: int) -> str:
    """A name without digits (digits are what shapes normalise away)."""
    return "".join("abcdefghijklmnopqrstuvwxyz"[int(c)] for c in str(n))


def row(k: int, **over) -> dict:
    """Item k: its own words, so no two rows share a shape group or a dedup cluster."""
    name, words = word(k), " ".join(f"{word(k)}_{word(j)}" for j in range(30))
    r = {
        "repo": "o/r",
        "change": str(k),
        "path": f"src/m{k}.py",
        "before": f"def {name}():\n    return {words}",
        "after": f"def {name}():\n    return [{words}]",
        "comment": f"wrap the value of {name} in a list",
    }
    r.update(over)
    return r


GOOD = [row(k) for k in range(6)]


def corpus(tmp: Path, rows: list[dict], extra: str = "", rules: str | None = None) -> Path:
    (tmp / "d.jsonl").write_text(jsonl(rows))
    if rules is not None:
        (tmp / "rules.yaml").write_text(rules)
        extra = f'[filter]\nrules = "rules.yaml"\n{extra}'
    return write_config(tmp, SRC, extra)


def run(tmp: Path, rows: list[dict], extra: str = "", rules: str | None = None, *sets: str):
    cfg = corpus(tmp, rows, extra, rules)
    args = ["run", "--config", cfg]
    for s in sets:
        args += ["--set", s]
    return cli(*args), tmp / "runs" / "t"


def exported(run_dir: Path) -> dict[str, pl.DataFrame]:
    return {s: pl.read_parquet(run_dir / "export" / f"{s}.parquet") for s in SPLITS}


def parquet_digests(run_dir: Path) -> dict[str, str]:
    return {
        p.relative_to(run_dir).as_posix(): file_sha256(p)
        for p in sorted(run_dir.rglob("*.parquet"))
        # the parts, not the output folders that hold them, nor a writer's temp folder
        if p.is_file() and not any(q.startswith(".") for q in p.relative_to(run_dir).parts)
    }


def fail_lines(res) -> list[str]:
    """verify's problem lines: each one line, no traceback, the count it reports matches."""
    assert "Traceback" not in res.output, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("FAIL ")]
    tail = [ln for ln in res.output.splitlines() if ln.startswith("verify failed: ")]
    assert len(tail) == 1 and tail[0].split(": ")[1].startswith(f"{len(lines)} problem"), tail
    return lines


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished run over a corpus with rejects, duplicates and shape groups."""
    tmp = tmp_path_factory.mktemp("finished")
    rows = [
        *GOOD,
        GOOD[0],
        row(7, after=row(7)["before"]),
        row(8, before="v = 1", after="v = 2", path="a.cfg"),
        row(9, before="v = 3", after="v = 4", path="b.cfg"),
        row(10, context=f"token = {SECRETS['AKIAZ7QX3M4N5P6R7S8T']}"),
    ]
    res, run_dir = run(tmp, rows)
    assert_sound_run(res, run_dir)
    return tmp, parquet_digests(run_dir)


def copy_run(finished, tmp_path: Path) -> Path:
    src, _ = finished
    dst = tmp_path / "w"
    shutil.copytree(src, dst, symlinks=True)
    return dst

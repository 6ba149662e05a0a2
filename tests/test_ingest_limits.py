"""`ingest.max_record_bytes` bounds a record in every format, and blank-line floods stream in
bounded time.

A record over the limit is one error record whose reason names its size (and, where the
format has fields, the largest one), and it is not turned into a Python value whole: a 10 KB
Parquet file can hold a 300 MiB string."""

from __future__ import annotations

import gzip
import subprocess
import time
import tracemalloc
from pathlib import Path

import datasets
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import Pipeline
from pipeline.ingest.base import IngestContext, Record, RecordError
from pipeline.ingest.count import count_csv, count_lines
from pipeline.ingest.sources import git as gitsrc
from pipeline.ingest.sources import hf, table
from pipeline.verify import verify_run
from tests.conftest import read_source

MAP = {"before": "old", "after": "new", "comment": "msg"}
LIMIT = 1 << 20
BIG = 4 << 20  # a few MiB of one repeated character: a few KB compressed


def items(recs):
    return [it for r in recs if isinstance(r, Record) for it in r.items]


def errors(recs):
    return [r for r in recs if isinstance(r, RecordError)]


def ctx(limit: int = LIMIT) -> IngestContext:
    return IngestContext(max_record_bytes=limit)


# --- Parquet ------------------------------------------------------------------------------


def _parquet(path: Path, new: list, names: tuple[str, ...] = ("old", "new", "msg")) -> Path:
    t = pa.table({names[0]: ["a"] * len(new), names[1]: new, names[2]: ["m"] * len(new)})
    pq.write_table(t, path, compression="zstd")
    return path


def test_a_parquet_row_over_the_limit_is_an_error_naming_the_field_and_size(tmp_path):
    p = _parquet(tmp_path / "t.parquet", ["b", "x" * BIG, "c"])
    assert p.stat().st_size < 64 * 1024  # compressible: the file is small, the value is not
    tracemalloc.start()
    try:
        recs = read_source(table, p, fields=MAP, ctx=ctx())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [it.after for it in items(recs)] == ["b", "c"]
    (err,) = errors(recs)
    assert err.ref == "row 2"
    assert err.reason == f"record too large: {BIG + 2} bytes > {LIMIT} (field 'new': {BIG} bytes)"
    assert err.raw.startswith("xxx") and len(err.raw) < 64 * 1024
    assert peak < BIG // 2  # the value never became a Python string


def test_a_parquet_row_over_the_limit_inside_a_list_or_struct(tmp_path):
    t = pa.table(
        {
            "old": ["a", "a", "a"],
            "new": ["b", "c", "d"],
            "msg": ["m", "m", "m"],
            "files": [["x" * BIG], [], None],
            "meta": [{"note": "n"}, {"note": "y" * BIG}, None],
        }
    )
    pq.write_table(t, tmp_path / "t.parquet")
    recs = read_source(table, tmp_path / "t.parquet", fields=MAP, ctx=ctx())
    assert [it.after for it in items(recs)] == ["d"]
    assert [(e.ref, e.reason.split("(")[1]) for e in errors(recs)] == [
        ("row 1", f"field 'files': {BIG} bytes)"),
        ("row 2", f"field 'meta': {BIG} bytes)"),
    ]


def test_the_stage_writes_the_over_large_parquet_row_to_errors(tmp_path):
    p = _parquet(tmp_path / "t.parquet", ["b", "x" * BIG, "c"], ("before", "after", "comment"))
    run = Pipeline.from_paths(p, out=tmp_path / "run", sets=[f"ingest.max_record_bytes={LIMIT}"])
    m = run.run(until="ingest").results[0].manifest
    assert m["counts"]["items_out"] == 2 and m["counts"]["errors_out"] == 1
    errs = pl.read_parquet(tmp_path / "run" / "ingest" / "errors.parquet")
    assert errs["reason"].to_list()[0].startswith("record too large")
    assert verify_run(tmp_path / "run")[0] == []


# --- a saved `datasets` dataset ------------------------------------------------------------


def test_a_saved_dataset_row_over_the_limit_is_an_error(tmp_path):
    ds = datasets.Dataset.from_dict({"old": ["a", "a"], "new": ["y" * BIG, "b"], "msg": ["m"] * 2})
    ds.save_to_disk(str(tmp_path / "ds"))
    recs = read_source(hf, tmp_path / "ds", kind="hf", format="disk", fields=MAP, ctx=ctx())
    assert [it.after for it in items(recs)] == ["b"]
    (err,) = errors(recs)
    assert err.ref == "row 1" and f"(field 'new': {BIG} bytes)" in err.reason


# --- CSV ------------------------------------------------------------------------------


def test_a_csv_row_over_the_limit_is_an_error_and_the_next_row_reads(tmp_path):
    p = tmp_path / "e.csv"
    multi = ("y" * (BIG // 8) + "\n") * 3  # a quoted field of a few long lines
    p.write_text(f'old,new,msg\na,b,m\na,{"x" * BIG},m\n"a","{multi}",m\nc,d,m\n')
    recs = read_source(table, p, fields=MAP, ctx=ctx())
    assert [it.after for it in items(recs)] == ["b", "d"]
    reasons = [e.reason for e in errors(recs)]
    assert reasons[0] == f"record too large: {BIG + 4} bytes > {LIMIT}"
    assert reasons[1].startswith(f"record too large: a quoted field from line 4 runs past {LIMIT}")
    assert count_csv(p, LIMIT, ",") == len(recs)


# --- git ------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def test_a_git_hunk_or_subject_over_the_limit_is_not_an_item(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-qm", "small")
    (repo / "a.py").write_text("x = 2\n")
    (repo / "msg").write_text("s" * 5000 + "\n")
    _git(repo, "commit", "-qa", "-F", str(repo / "msg"))
    long_subject = _git(repo, "rev-parse", "HEAD")
    (repo / "a.py").write_text("x = 3\n")
    (repo / "msg").write_text("t" * 4070 + "\n")  # within the limit, its commit line is not
    _git(repo, "commit", "-qa", "-F", str(repo / "msg"))
    cut_line = _git(repo, "rev-parse", "HEAD")
    (repo / "b.py").write_text("y = compute(1, 2, 3)\n" * 300)  # 6 KB in 300 lines
    _git(repo, "add", "b.py")
    _git(repo, "commit", "-qm", "big file")
    big = _git(repo, "rev-parse", "HEAD")
    recs = {r.ref: r for r in read_source(gitsrc, repo, kind="git", ctx=ctx(4096))}
    assert recs[f"{big}:b.py:0"].reason == "hunk_too_large: over 4096 bytes"
    err = recs[f"{long_subject}:a.py:0"]
    assert isinstance(err, RecordError)
    assert err.reason.startswith("record too large: ")
    assert err.reason.endswith(" > 4096 (field 'comment', the commit subject: 5000 bytes)")
    err = recs[f"{cut_line}:a.py:0"]
    assert isinstance(err, RecordError) and "its commit line" in err.reason
    assert err.reason.endswith(" > 4096 (field 'comment', the commit subject: 4070 bytes)")
    assert len(items(recs.values())) == 1  # the first commit's


# --- blank-line floods ---------------------------------------------------------------------

FLOOD = 20 * 2**20  # blank lines: 20 KB gzipped


def _flood(path: Path, head: bytes, rec: bytes, blank: bytes = b"\n") -> Path:
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(head + rec)
        for _ in range(FLOOD // 2**20):
            f.write(blank * 2**20)
        f.write(rec)
    return path


@pytest.mark.parametrize("blank", [b"\n", b"\r\n", b" \t\n"])
def test_a_flood_of_blank_json_lines_streams_in_bounded_time(tmp_path, blank):
    rec = b'{"old": "a", "new": "b", "msg": "m"}\n'
    p = _flood(tmp_path / "f.jsonl.gz", b"", rec, blank)
    assert p.stat().st_size < 200_000
    t = time.perf_counter()
    recs = read_source(table, p, fields=MAP)
    n = count_lines(p, 8 << 20)
    assert time.perf_counter() - t < 5
    assert [r.ref for r in recs] == ["line 1", f"line {FLOOD + 2}"]  # blank lines still counted
    assert n == 2


def test_a_flood_of_blank_csv_lines_streams_in_bounded_time(tmp_path):
    p = _flood(tmp_path / "f.csv.gz", b"old,new,msg\n", b"a,b,m\n")
    t = time.perf_counter()
    recs = read_source(table, p, fields=MAP)
    n = count_csv(p, 8 << 20, ",")
    assert time.perf_counter() - t < 5
    assert [r.ref for r in recs] == ["row 1 (line 2)", f"row 2 (line {FLOOD + 3})"]
    assert n == 2


def test_the_stage_ingests_a_blank_flood_in_bounded_time(tmp_path):
    p = _flood(tmp_path / "f.jsonl.gz", b"", b'{"before": "a", "after": "b"}\n')
    t = time.perf_counter()
    m = Pipeline.from_paths(p, out=tmp_path / "run").run(until="ingest").results[0].manifest
    assert time.perf_counter() - t < 10
    assert m["counts"]["records_in"] == 2 and m["counts"]["items_out"] == 2
    assert verify_run(tmp_path / "run")[0] == []


def test_a_blank_line_over_the_limit_amid_a_run_is_still_its_own_error(tmp_path):
    """Skipping blank lines in bulk keeps the readers' rules: a whitespace line over the limit
    is a record (an error), counted by count.py too, and line numbers stay the file's."""
    limit = 100
    rec = '{"old": "a", "new": "b", "msg": "m"}\n'
    text = rec + "\n" * 300 + " " * 150 + "\n" + "\r\n" * 300 + rec
    p = tmp_path / "b.jsonl"
    p.write_text(text)
    recs = read_source(table, p, fields=MAP, ctx=ctx(limit))
    assert [(r.ref, getattr(r, "reason", "item")) for r in recs] == [
        ("line 1", "item"),
        ("line 302", f"record too large: 150 bytes > {limit}"),
        ("line 603", "item"),
    ]
    assert count_lines(p, limit) == 3
    c = tmp_path / "b.csv"
    c.write_text("old,new,msg\n" + "\n" * 300 + " " * 150 + "\n" + "\n" * 300 + "a,b,m\n")
    recs = read_source(table, c, fields=MAP, ctx=ctx(limit))
    assert [(r.ref, getattr(r, "reason", "item")) for r in recs] == [
        ("row 1 (line 302)", f"record too large: 150 bytes > {limit}"),
        ("row 2 (line 603)", "item"),
    ]
    assert count_csv(c, limit, ",") == 2

"""Ingest in pieces: a big source cut into shards gives the same bytes as one read whole."""

from __future__ import annotations

import codecs
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import Pipeline
from pipeline.config import SourceConfig
from pipeline.errors import DataError
from pipeline.ingest import shards
from pipeline.runs import StageFailed

MAP = {"before": "old", "after": "new", "comment": "msg"}


def row(k: int) -> dict:
    return {"old": f"x = {k}", "new": f"x = {k + 1}", "msg": f"bump {k}", "repo": "a/b"}


def hostile_lines() -> bytes:
    """JSON lines with everything a reader must survive, spread over the file."""
    out = [codecs.BOM_UTF8]
    for k in range(60):
        line = json.dumps(row(k)).encode()
        if k % 7 == 3:
            line = b"\r\n" if k % 2 else b"   \n"  # blank lines: not records
        elif k % 11 == 5:
            line = b'{"old": "x", "new": '  # malformed
        elif k == 20:
            line = json.dumps(row(k) | {"old": "y" * 400}).encode()  # over max_record_bytes
        elif k == 30:
            line = b'{"old": "a\x00b"}'
        elif k == 40:
            line = b'{"old": "\xff\xfe", "new": "z", "msg": "m"}'
        elif k == 46:
            line = b"[1, 2]"  # not an object
        elif k == 50:
            line = json.dumps(row(k) | {"msg": "token ghp_" + "A1b2C3d4" * 5}).encode()
        out.append(line + (b"\r\n" if k % 5 == 0 else b"\n"))
    out.append(json.dumps(row(99)).encode())  # no final newline
    return b"".join(out)


def ingest(tmp_path: Path, src: Path, name: str, shard_bytes: int, **over) -> Path:
    cfg = {
        "run": {"name": name, "root": str(tmp_path / "runs")},
        "ingest": {
            "shard_bytes": shard_bytes,
            "batch_size": 7,
            "max_record_bytes": 300,
            "sources": [{"name": "s", "kind": "table", "path": str(src), "fields": MAP}],
        },
    }
    p = Pipeline.from_config(cfg, overrides=over or None)
    return p.run(only="ingest").path / "ingest"


def failing_runs(tmp_path: Path, src: Path, cut: int, match: str) -> dict[str, Path]:
    """The ingest folders of `src` read whole and in pieces of `cut` bytes, each run failing
    the data check with `match` (no item) after writing its outputs."""
    runs = {}
    for name, size in (("whole", 1 << 30), ("cut", cut)):
        with pytest.raises(DataError, match=match):
            ingest(tmp_path, src, name, size, **{"ingest.sources.0.fields": {}})
        runs[name] = tmp_path / "runs" / name / "ingest"
    return runs


def outputs(d: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*.parquet")) if p.is_file()
    }


def conservation(d: Path) -> dict:
    m = json.loads((d / "manifest.json").read_text())
    return {"counts": m["counts"], "sources": m["conservation"]["sources"]}


@pytest.mark.parametrize("shard_bytes", [1, 97, 800])
def test_a_hostile_json_lines_file_in_pieces_is_byte_identical_to_it_read_whole(
    tmp_path, shard_bytes
):
    src = tmp_path / "a.jsonl"
    src.write_bytes(hostile_lines())
    pieces = shards.plan(SourceConfig(kind="table", path=str(src)), src, shard_bytes)
    assert len(pieces) > 3 and all(p is not None for p in pieces)
    whole = ingest(tmp_path, src, "whole", 1 << 30)
    cut = ingest(tmp_path, src, "cut", shard_bytes)
    assert outputs(cut) == outputs(whole)
    assert conservation(cut) == conservation(whole)
    errs = pq.read_table(whole / "errors.parquet").to_pylist()
    reasons = {e["reason"].split(":")[0] for e in errs}
    assert reasons == {
        "malformed JSON",
        "record too large",
        "NUL byte at col 11",
        "invalid UTF-8",
        "not an object",
    }
    comments = pq.read_table(cut / "items.parquet")["comment"].to_pylist()
    assert any("[REDACTED" in c for c in comments) and not any("A1b2C3d4" in c for c in comments)


def test_cuts_fall_at_line_starts_and_number_the_lines_of_the_file(tmp_path):
    src = tmp_path / "a.jsonl"
    data = hostile_lines()
    src.write_bytes(data)
    pieces = shards.plan(SourceConfig(kind="table", path=str(src)), src, 150)
    assert pieces[0].start == 0 and pieces[-1].end == len(data)
    for a, b in zip(pieces, pieces[1:], strict=False):
        assert a.end == b.start and data[b.start - 1 : b.start] == b"\n"
        assert b.first == data[: b.start].count(b"\n") + 1
        assert b.of == len(data)


@pytest.mark.parametrize(
    "name, data",
    [
        (
            "gz.jsonl",
            gzip.compress(b"".join(json.dumps(row(k)).encode() + b"\n" for k in range(50))),
        ),
        ("u16.jsonl", "".join(json.dumps(row(k)) + "\n" for k in range(50)).encode("utf-16")),
        ("arr.json", json.dumps([row(k) for k in range(50)]).encode()),
        ("a.csv", b"old,new\n" + b"".join(b'"a\n%d",b\n' % k for k in range(50))),
    ],
)
def test_sources_that_cannot_be_cut_by_bytes_are_read_whole(tmp_path, name, data):
    src = tmp_path / name
    src.write_bytes(data)
    assert shards.plan(SourceConfig(kind="table", path=str(src)), src, 10) == [None]


def test_a_parquet_folder_in_pieces_of_row_groups_is_byte_identical(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    for f in range(3):
        t = pa.Table.from_pylist([row(100 * f + k) for k in range(23)])
        pq.write_table(t, folder / f"part-{f:05d}.parquet", row_group_size=5)
    pieces = shards.plan(SourceConfig(kind="table", path=str(folder)), folder, 200)
    assert len(pieces) > 3 and pieces[-1].of == 69
    # a piece opens only the files that hold its row groups
    assert [p.files for p in pieces][-1] == (2, 3) and all(p.files[0] <= 2 for p in pieces)
    whole = ingest(tmp_path, folder, "whole", 1 << 30)
    cut = ingest(tmp_path, folder, "cut", 200)
    assert outputs(cut) == outputs(whole)
    assert conservation(cut) == conservation(whole)
    refs = pq.read_table(cut / "items.parquet", columns=["source_ref"])["source_ref"]
    assert refs.to_pylist() == [f"row {k}" for k in range(1, 70)]


def test_a_mapped_field_in_only_one_piece_is_seen_and_one_in_none_is_exit_2(tmp_path):
    src = tmp_path / "a.jsonl"
    rows = [row(k) for k in range(40)]
    rows[-1]["who"] = "ann"  # the mapped field appears only in the last piece
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    over = {"ingest.sources.0.fields.author": "who"}
    cut = ingest(tmp_path, src, "cut", 100, **over)
    assert outputs(cut) == outputs(ingest(tmp_path, src, "whole", 1 << 30, **over))
    over = {"ingest.sources.0.fields.author": "nobody"}
    with pytest.raises(StageFailed) as whole_err:
        ingest(tmp_path, src, "whole2", 1 << 30, **over)
    with pytest.raises(StageFailed) as cut_err:
        ingest(tmp_path, src, "cut2", 100, **over)
    assert cut_err.value.exit_code == whole_err.value.exit_code == 2
    msg = "ingest.sources.0.fields.author = 'nobody': no record has a field 'nobody'"
    assert msg in str(cut_err.value) and msg in str(whole_err.value)


def test_a_big_file_of_blank_lines_is_one_skip_as_when_read_whole(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_bytes(b"\n  \n\r\n" * 100)
    runs = failing_runs(tmp_path, src, 50, "every one of 1 records failed or was skipped")
    assert outputs(runs["cut"]) == outputs(runs["whole"])
    errs = pq.read_table(runs["cut"] / "errors.parquet").to_pylist()
    assert [(e["source_ref"], e["severity"]) for e in errs] == [("file", "skip")]


def test_the_ray_executor_reads_the_pieces_to_the_same_bytes(tmp_path, ray_local):
    src = tmp_path / "a.jsonl"
    src.write_bytes(hostile_lines())
    local = ingest(tmp_path, src, "local", 300)
    ray = ingest(tmp_path, src, "ray", 300, **{"run.executor": "ray"})
    assert outputs(ray) == outputs(local)
    assert conservation(ray) == conservation(local)


def test_a_parquet_table_of_empty_row_groups_cut_or_whole_gives_no_record(tmp_path):
    src = tmp_path / "empty.parquet"
    schema = pa.schema([("old", pa.string()), ("new", pa.string())])
    with pq.ParquetWriter(src, schema) as w:
        for _ in range(3):  # row groups of 0 rows still have bytes in the footer
            w.write_table(schema.empty_table())
    assert len(shards.plan(SourceConfig(kind="table", path=str(src)), src, 1)) == 3
    runs = failing_runs(tmp_path, src, 1, "the sources held no records")
    assert outputs(runs["cut"]) == outputs(runs["whole"])
    assert conservation(runs["cut"]) == conservation(runs["whole"])


def test_the_missing_column_warning_of_a_part_without_row_groups_survives_the_cuts(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    t = pa.Table.from_pylist([row(k) for k in range(20)])
    pq.write_table(t, folder / "p0.parquet", row_group_size=4)
    pq.ParquetWriter(
        folder / "p1.parquet", t.schema.remove(t.schema.get_field_index("msg"))
    ).close()
    pq.write_table(t, folder / "p2.parquet", row_group_size=4)
    whole = conservation(ingest(tmp_path, folder, "whole", 1 << 30))
    cut = conservation(ingest(tmp_path, folder, "cut", 100))
    assert cut == whole
    assert whole["sources"]["s"]["warnings"] == [
        "p1.parquet: mapping names column(s) ['msg'] absent from the file"
    ]


def test_a_parquet_value_python_cannot_hold_costs_its_row_only(tmp_path):
    src = tmp_path / "t.parquet"
    when = pa.array([0, 300_000_000_000_000, 5], pa.timestamp("ms"))  # row 2: year ~11000
    t = pa.Table.from_pylist([row(k) for k in range(3)]).append_column("when", when)
    pq.write_table(t, src)
    d = ingest(tmp_path, src, "t", 1 << 30, **{"ingest.sources.0.fields.created_at": "when"})
    errs = pq.read_table(d / "errors.parquet").to_pylist()
    assert [(e["source_ref"], e["reason"][:18]) for e in errs] == [("row 2", "unreadable value: ")]
    assert pq.read_table(d / "items.parquet").num_rows == 2


def test_a_read_error_in_one_piece_ends_the_file_there_as_a_whole_read_does(tmp_path, monkeypatch):
    from pipeline.ingest import opening

    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(row(k)) + "\n" for k in range(60)))
    bad_at = src.stat().st_size // 2
    real = opening.CountingReader.readinto

    def failing(self, b):
        if self.f.tell() >= bad_at:
            raise OSError(5, "Input/output error")
        return real(self, b)

    monkeypatch.setattr(opening.CountingReader, "readinto", failing)
    with pytest.raises(DataError, match="accounted for"):  # the records not read are missed
        ingest(tmp_path, src, "cut", 300)
    d = tmp_path / "runs" / "cut" / "ingest"
    errs = pq.read_table(d / "errors.parquet").to_pylist()
    assert [e["reason"] for e in errs] == [
        "unreadable input: [Errno 5] Input/output error; rest of file not read"
    ]
    last = int(errs[0]["source_ref"].split()[1])
    refs = pq.read_table(d / "items.parquet")["source_ref"].to_pylist()
    assert refs == [f"line {k}" for k in range(1, last)]  # nothing read after the error


def test_a_json_lines_file_is_scanned_for_its_cuts_on_the_workers(tmp_path, ray_local):
    """The planning pass (newlines per byte range) runs as executor tasks: on Ray the
    workers read the file, and the cuts and line numbers are the ones this process finds."""
    from pipeline.config import RunConfig

    src = tmp_path / "a.jsonl"
    src.write_bytes(hostile_lines())
    spec = SourceConfig(kind="table", path=str(src))
    here = shards.plan(spec, src, 97)
    assert len(here) > 3
    assert shards.plan(spec, src, 97, RunConfig(executor="ray")) == here
    assert shards.plan(spec, src, 97, RunConfig()) == here


def test_a_json_lines_file_read_in_pieces_is_counted_in_them_on_the_workers(tmp_path, ray_local):
    """verify's record count of a JSON-lines file read in pieces is taken piece by piece by
    executor tasks (on Ray the workers read the file), and equals the count of the whole
    file: blank lines, blank lines over the record limit, CRLF, a BOM, no final newline."""
    from pipeline.config import RunConfig
    from pipeline.ingest.count import LineCuts, count_lines

    src = tmp_path / "a.jsonl"
    src.write_bytes(hostile_lines() + b"\n" + (b" " * 400 + b"\n") * 3 + b"\t\r\n" + b"{}")
    spec = SourceConfig(kind="table", path=str(src))
    pieces = shards.plan(spec, src, 97)
    ranges = [(p.start, p.end) for p in pieces if p is not None]
    assert len(ranges) > 3
    whole = count_lines(src, 300)
    assert whole == 60 - 9 + 1 + 3 + 1  # blank lines are no records; long ones are
    for run in (RunConfig(), RunConfig(executor="ray")):
        assert count_lines(src, 300, LineCuts(ranges, run)) == whole

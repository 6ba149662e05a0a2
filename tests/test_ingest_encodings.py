"""Text that is not plain UTF-8 with LF line ends: UTF-16 without a byte-order mark is told by
the NUL bytes of its first KiB and decoded, and a CSV with CR-only line ends (old Mac) is read
line by line, not as one broken record."""

from __future__ import annotations

import json

import pytest

from pipeline import Pipeline
from pipeline.config import SourceConfig
from pipeline.ingest import shards
from pipeline.ingest.base import IngestContext, Record, RecordError
from pipeline.ingest.count import count_csv, count_json
from pipeline.ingest.opening import head_bytes, open_source
from pipeline.ingest.sources import table
from pipeline.verify import verify_run
from tests.conftest import read_source

MAP = {"before": "old", "after": "new", "comment": "msg"}
ROWS = [
    {"old": "x = 1", "new": "x = 2", "msg": "bump"},
    {"old": "naïve = 'é'", "new": "naive = 'e'", "msg": "ascii ✓"},
]
JSONL = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS)


def items(recs):
    return [it for r in recs if isinstance(r, Record) for it in r.items]


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_json_lines_without_a_bom_are_decoded(tmp_path, codec):
    p = tmp_path / "a.jsonl"
    p.write_bytes(JSONL.encode(codec))  # Python's utf-16-le/-be write no BOM
    recs = read_source(table, p, fields=MAP)
    assert [r.ref for r in recs] == ["line 1", "line 2"]
    assert [(it.before, it.comment) for it in items(recs)] == [
        ("x = 1", "bump"),
        ("naïve = 'é'", "ascii ✓"),
    ]
    assert count_json(p, 8 << 20)[0] == 2
    with open_source(p) as f:
        assert f.encoding_name == f"{codec.upper()} (no BOM)"


def test_utf16_csv_without_a_bom_is_decoded(tmp_path):
    p = tmp_path / "a.csv"
    p.write_bytes("old,new,msg\r\nx = 1,x = 2,bump\r\nä,ö,ü\r\n".encode("utf-16-le"))
    recs = read_source(table, p, fields=MAP)
    assert [(it.before, it.after, it.comment) for it in items(recs)] == [
        ("x = 1", "x = 2", "bump"),
        ("ä", "ö", "ü"),
    ]
    assert count_csv(p, 8 << 20, ",") == 2


def test_utf16_without_a_bom_is_noted_once(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(JSONL.encode("utf-16-le"))
    warned: list[str] = []
    read_source(table, p, fields=MAP, ctx=IngestContext(warn=warned.append))
    assert warned == [
        "a.jsonl: no byte-order mark; read as UTF-16-LE, as the NUL bytes of its first KiB say"
    ]


def test_binary_and_utf8_files_are_not_taken_for_utf16(tmp_path):
    (tmp_path / "bin").write_bytes(bytes(range(256)) * 10)
    (tmp_path / "ascii").write_bytes(JSONL.encode())
    (tmp_path / "nuls").write_bytes(b"\0" * 2048)
    for name in ("bin", "ascii", "nuls"):
        with open_source(tmp_path / name) as f:
            assert f.encoding_name == "UTF-8", name


def test_a_big_utf16_file_without_a_bom_is_not_cut_at_bytes(tmp_path):
    """Pieces are cut at LF bytes, which in UTF-16 are half a character: such a file is read
    whole, as one with a BOM is."""
    p = tmp_path / "a.jsonl"
    p.write_bytes((JSONL * 200).encode("utf-16-le"))
    spec = SourceConfig(kind="table", path=str(p))
    assert shards.plan(spec, p, 1024) == [None]
    plain = tmp_path / "b.jsonl"
    plain.write_text(JSONL * 200)
    assert len(shards.plan(SourceConfig(kind="table", path=str(plain)), plain, 1024)) > 1


def test_a_gzip_cut_inside_the_sniffed_head_keeps_what_was_read(tmp_path):
    """The first KiB read to tell the encoding must not swallow a read error: the lines before
    it are kept and the error is recorded where it happened, as before."""
    import gzip

    p = tmp_path / "a.jsonl.gz"
    p.write_bytes(gzip.compress(JSONL.encode())[:-12])  # the trailer and a bit cut
    recs = read_source(table, p, fields=MAP)
    assert isinstance(recs[0], Record)
    assert isinstance(recs[-1], RecordError) and recs[-1].reason.startswith("unreadable input")
    assert head_bytes(p, 4096)[1] is not None


# --- CR-only line ends -----------------------------------------------------------------------


def test_a_csv_with_cr_only_line_ends_is_read_row_by_row(tmp_path):
    p = tmp_path / "mac.csv"
    p.write_bytes(b'old,new,msg\r"a\rb",c,m\rx,y,z\r\r\rlast,row,here')
    recs = read_source(table, p, fields=MAP)
    assert [r.ref for r in recs] == ["row 1 (line 2)", "row 2 (line 4)", "row 3 (line 7)"]
    assert [(it.before, it.after, it.comment) for it in items(recs)] == [
        ("a\rb", "c", "m"),  # a line end inside quotes is the field's, as written
        ("x", "y", "z"),
        ("last", "row", "here"),
    ]
    assert count_csv(p, 8 << 20, ",") == 3


def test_a_cr_only_csv_through_the_stage_verifies(tmp_path):
    p = tmp_path / "mac.csv"
    p.write_bytes(b"before,after,comment\rx = 1,x = 2,bump\ry = 1,y = 2,bump\r")
    m = Pipeline.from_paths(p, out=tmp_path / "run").run(until="ingest").results[0].manifest
    assert m["counts"]["items_out"] == 2 and m["counts"]["errors_out"] == 0
    assert verify_run(tmp_path / "run")[0] == []


def test_json_lines_with_cr_only_line_ends_are_read_line_by_line(tmp_path):
    """A JSON-lines file whose lines end in CR alone is one record per line, counted alike,
    through the stage with conservation verified (it was one 'malformed JSON' error)."""
    rows = [{"old": f"x = {i}", "new": f"x = {i + 1}", "msg": "bump\nit"} for i in range(4)]
    p = tmp_path / "mac.jsonl"
    p.write_bytes(("\r".join(json.dumps(r) for r in rows) + "\r\r\r").encode())
    recs = read_source(table, p, fields=MAP)
    assert [r.ref for r in recs] == ["line 1", "line 2", "line 3", "line 4"]
    assert [it.comment for it in items(recs)] == ["bump\nit"] * 4
    assert count_json(p, 8 << 20) == (4, "non-blank lines")
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[run]\nroot = "{tmp_path / "run"}"\n[[ingest.sources]]\nkind = "table"\n'
        f'path = "{p}"\nfields = {{ before = "old", after = "new", comment = "msg" }}\n'
    )
    m = Pipeline.from_config(cfg).run(until="ingest").results[0].manifest
    assert m["counts"]["items_out"] == 4 and m["counts"]["errors_out"] == 0


def test_lf_and_crlf_csv_are_read_as_before(tmp_path):
    """A lone CR in an LF file stays what it was: inside quotes content, outside an error."""
    p = tmp_path / "lf.csv"
    p.write_bytes(b'old,new,msg\r\n"a\rb",c,m\r\nbad\rrow,y,z\r\nx,y,z\r\n')
    recs = read_source(table, p, fields=MAP)
    assert [type(r).__name__ for r in recs] == ["Record", "RecordError", "Record"]
    assert items(recs)[0].before == "a\rb"
    assert count_csv(p, 8 << 20, ",") == 3

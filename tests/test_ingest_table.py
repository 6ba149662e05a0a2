import gzip
import json
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext, Items, Record, RecordError
from pipeline.ingest.mapping import UnmappedField
from pipeline.ingest.sources import table
from tests.conftest import read_source

ROWS = [
    {"old": "x = 1", "new": "x = 2", "msg": "bump", "repo": "a/b"},
    {"old": "def f():\n    pass", "new": "def f():\n    return 1", "msg": "return", "repo": "a/b"},
]
MAP = {"before": "old", "after": "new", "comment": "msg"}


def items(recs):
    return [it for r in recs if isinstance(r, Record) for it in r.items]


def errors(recs):
    return [r for r in recs if isinstance(r, RecordError)]


def test_jsonl_plain_and_gzip_give_the_same_items(tmp_path):
    text = "".join(json.dumps(r) + "\n" for r in ROWS)
    (tmp_path / "a.jsonl").write_text(text)
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    a = read_source(table, tmp_path / "a.jsonl", fields=MAP)
    b = read_source(table, tmp_path / "b.jsonl.gz", fields=MAP)
    assert [r.ref for r in a] == ["line 1", "line 2"]
    assert items(a) == items(b)
    assert items(a)[1].after == "def f():\n    return 1" and items(a)[1].repo == "a/b"


def test_json_array_is_streamed_element_by_element(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(ROWS, indent=2))
    recs = read_source(table, tmp_path / "a.json", fields=MAP)
    assert [it.comment for it in items(recs)] == ["bump", "return"]


def test_csv_with_quoted_multiline_fields_and_row_refs(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text('old,new,msg\n"a\nb","a\nc",fix\nx,y,z\n')
    recs = read_source(table, p, fields=MAP)
    assert [r.ref for r in recs] == ["row 1 (line 2)", "row 2 (line 5)"]
    assert items(recs)[0].before == "a\nb" and items(recs)[0].after == "a\nc"


def test_csv_bad_rows_are_errors_and_good_rows_survive(tmp_path):
    p = tmp_path / "e.csv"
    p.write_bytes(b"old,new,msg\nx,y,ok\nbad,\xff\xfe,row\nonly-two,cols\nq,r,fine\n")
    recs = read_source(table, p, fields=MAP)
    assert [it.comment for it in items(recs)] == ["ok", "fine"]
    errs = errors(recs)
    assert [e.ref for e in errs] == ["row 2 (line 3)", "row 3 (line 4)"]
    assert errs[0].reason.startswith("invalid UTF-8")
    assert errs[1].reason.startswith("wrong column count")


def test_parquet_rows(tmp_path):
    p = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(ROWS), p)
    recs = read_source(table, p, fields=MAP)
    assert [r.ref for r in recs] == ["row 1", "row 2"]
    assert items(recs)[0].before == "x = 1"


def test_bad_json_lines_do_not_stop_the_file(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(
        json.dumps(ROWS[0]).encode()
        + b"\n"
        + b"{not json\n"
        + b'{"old": "\xff", "new": "b"}\n'
        + b'{"old": 3, "new": "b"}\n'
        + b'{"new": "b"}\n'
        + b"[1, 2]\n"
        + json.dumps(ROWS[1]).encode()
        + b"\n"
    )
    recs = read_source(table, p, fields=MAP)
    assert len(items(recs)) == 2
    reasons = {e.ref: e.reason.split(":")[0] for e in errors(recs)}
    assert reasons == {
        "line 2": "malformed JSON",
        "line 3": "invalid UTF-8",
        "line 4": "wrong type",
        "line 5": "missing field",
        "line 6": "not an object",
    }


def test_a_huge_line_is_one_error_and_the_next_line_still_reads(tmp_path):
    p = tmp_path / "a.jsonl"
    big = json.dumps({"old": "x" * (50 * 2**20), "new": "y"})
    p.write_text(json.dumps(ROWS[0]) + "\n" + big + "\n" + json.dumps(ROWS[1]) + "\n")
    recs = read_source(table, p, fields=MAP, ctx=IngestContext(max_record_bytes=2**20))
    assert len(items(recs)) == 2
    (err,) = errors(recs)
    assert err.ref == "line 2" and err.reason.startswith("record too large")


def test_empty_and_binary_files_are_reported_not_fatal(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "bin.jsonl").write_bytes(bytes(range(256)) * 10)
    (e1,) = read_source(table, tmp_path / "empty.jsonl", fields=MAP)
    assert isinstance(e1, RecordError) and e1.reason.startswith("empty_source")
    warned = []
    recs = read_source(
        table, tmp_path / "bin.jsonl", fields=MAP, ctx=IngestContext(warn=warned.append)
    )
    # damage is per record: each line of the binary file is an error of its own
    assert len(recs) == 11 and all(isinstance(r, RecordError) for r in recs)
    assert all(r.reason.startswith(("NUL byte", "invalid UTF-8")) for r in recs)
    assert warned and "binary" in warned[0]


def test_a_nul_byte_costs_its_own_line_only(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(
        b'{"old": "a", "new": "b", "msg": "m"}\n{"old": "\x00", "new": "b"}\n'
        b'{"old": "c", "new": "d"}\n'
    )
    recs = read_source(table, p, fields=MAP)
    assert [it.before for it in items(recs)] == ["a", "c"]
    (err,) = errors(recs)
    assert err.ref == "line 2" and err.reason.startswith("NUL byte at col 10")


def test_csv_unclosed_quote_costs_one_row_and_reading_resumes(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text('old,new,msg\na,b,ok1\nc,"d,bad\ne,f,ok2\ng,"h",ok3\n')
    recs = read_source(table, p, fields=MAP)
    assert [it.comment for it in items(recs)] == ["ok1", "ok2", "ok3"]
    (err,) = errors(recs)
    assert err.ref == "row 2 (line 3)" and "read again from line 4" in err.reason


def test_utf16_with_bom_is_decoded(tmp_path):
    text = "".join(json.dumps(r) + "\n" for r in ROWS)
    for enc in ("utf-16", "utf-16-be", "utf-32", "utf-8-sig"):
        p = tmp_path / "u.jsonl"
        data = text.encode(enc)
        if enc == "utf-16-be":
            data = b"\xfe\xff" + data
        p.write_bytes(data)
        assert [it.comment for it in items(read_source(table, p, fields=MAP))] == ["bump", "return"]


def test_a_mapped_column_no_row_has_is_a_config_error_after_the_rows(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("old,new,msg\na,b,m\nc,d,m\n")
    with pytest.raises(UnmappedField) as e:
        read_source(table, p, fields={**MAP, "before": "old_code"})
    assert str(e.value) == (
        "fields.before = 'old_code': no record has a field 'old_code' (fields seen: old, new, msg)"
    )
    p.write_text("old,new,msg\n")  # no record at all: nothing to tell a typo by
    assert read_source(table, p, fields={**MAP, "before": "old_code"}) == []
    j = tmp_path / "e.jsonl"  # missing from some records: `required` decides
    j.write_text('{"old": "a", "new": "b", "msg": "m"}\n{"old": "c", "msg": "m"}\n')
    recs = read_source(table, j, fields=MAP)
    assert [e.reason for e in errors(recs)] == ["missing field: after (input field 'new')"]


def test_a_folder_of_parquet_parts_reads_as_one_table(tmp_path):
    """A stage output (or a dataset's shards): parts in name order, rows numbered across them;
    an unreadable part is one error naming it, and the other parts still read."""
    d = tmp_path / "kept.parquet"
    d.mkdir()
    t = pa.Table.from_pylist(ROWS)
    pq.write_table(t, d / "part-00000.parquet")
    (d / "part-00001.parquet").write_bytes(b"PAR1 not really")
    pq.write_table(t.slice(0, 1), d / "part-00002.parquet")
    (d / ".part-00003.parquet.tmp").write_bytes(b"a writer's temp file: not read")
    recs = read_source(table, d, fields=MAP)
    assert [r.ref for r in recs if isinstance(r, Record)] == ["row 1", "row 2", "row 3"]
    assert [it.comment for it in items(recs)] == ["bump", "return", "bump"]
    assert [e.ref for e in errors(recs)] == ["file part-00001.parquet"]
    from pipeline.config import SourceConfig
    from pipeline.ingest.sources import SOURCES

    spec = SourceConfig(kind="table", path=str(d), fields=MAP)
    count = SOURCES["table"].count
    assert count is not None and count(spec, d, 1 << 20) == (
        4,
        "Parquet rows (footers)",
    )  # = records read


@pytest.mark.parametrize("fmt, why", [("auto", "no Parquet files"), ("jsonl", "reads one file")])
def test_a_folder_that_is_not_parquet_parts_is_one_clear_error(tmp_path, fmt, why):
    from pipeline.ingest.base import SourceUnreadable

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.jsonl").write_text(json.dumps(ROWS[0]) + "\n")
    with pytest.raises(SourceUnreadable, match=why):
        read_source(table, tmp_path / "d", fields=MAP, format=fmt)


def test_line_counts_are_of_the_changed_region_not_the_whole_file(tmp_path):
    """Whole files before/after: lines removed/added are those between the common leading
    and trailing lines; an input that carries its own counts keeps them."""
    from pipeline.ingest import base

    head, tail = "".join(f"a{k}\n" for k in range(30)), "".join(f"z{k}\n" for k in range(5))
    before = head + "old1\nold2\n" + tail
    after = head + "new1\nnew2\nnew3\n" + tail
    rows = [
        {"before": before, "after": after},
        {"before": before, "after": after, "lines_removed": 9, "lines_added": 8},
        {"before": before, "after": after, "lines_added": 8},
        {"before": "x = 1", "after": "x = 2\ny = 3"},  # a mined hunk: all of it changed
    ]
    p = tmp_path / "files.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    b = base.Batcher("files", IngestContext())
    for rec in read_source(table, p):
        b.add(rec)
    batch = b.take_items()
    assert batch is not None
    got = list(
        zip(batch["lines_removed"].to_pylist(), batch["lines_added"].to_pylist(), strict=True)
    )
    assert got == [(2, 3), (9, 8), (2, 8), (1, 2)]
    changed_counts = base.changed_counts
    assert changed_counts("a\nb\n", "a\nb") == (1, 1)  # the end-of-file newline changed
    assert changed_counts("a\na\n", "a\n") == (1, 0)  # prefix and suffix do not overlap
    assert changed_counts("", "") == (0, 0) and changed_counts("same\n", "same\n") == (0, 0)


def test_line_counts_of_two_distant_edits_leave_out_the_lines_between():
    from pipeline.ingest.base import changed_counts

    before = "".join(f"line {k}\n" for k in range(40))
    after = before.replace("line 3\n", "LINE 3\nadded\n").replace("line 30\n", "LINE 30\n")
    assert changed_counts(before, after) == (2, 3)
    assert changed_counts("x\ny\n", "y\nx\n") == (1, 1)  # a move: one line out, one in
    assert changed_counts("a\nb", "a\nb\n") == (1, 1)  # the end-of-file newline, as git


# --- clean JSON lines a block at a time: the same records as line by line ------------------

ODD_LINES = [
    {"before": "a", "after": "b", "comment": "c", "repo": "o/r", "commit": "abc"},  # an alias
    {"before": "x\ny\n", "after": "x\nz", "repo": 7, "path": " src/a.py "},  # a number as repo
    {"before": "a", "after": "b", "timestamp": 1_700_000_000_123, "author": "dependabot[bot]"},
    {"before": "a", "after": "b", "created_at": "2024-01-02T03:04:05+02:00", "language": "Go"},
    {"before": "a", "after": "b", "lines_removed": 3, "lines_added": "4", "author_is_bot": 0},
    {"before": ["l1", "l2"], "after": "l1", "user": {"login": "ann"}},  # a list of lines
    {"before": 5, "after": "b"},  # wrong type: an error record
    {"after": "b"},  # missing before: an error record (required)
    {"before": "a", "after": "b", "created_at": 1e30},  # out of range: a field problem
    {"before": "a", "after": "b", "before": "dup"},  # noqa: F601  (a repeated key: the last wins)
]
ODD_RAW = [
    "",  # blank
    "[1, 2]",  # not an object
    '{"before": "a", "after": "\\ud800"}',  # a lone surrogate
    '{"before": "a" "after": "b"}',  # malformed
    '{"before": "a", "after": "b"}\r',  # CRLF ending
]


def _lines_file(path, rows: list[str]) -> None:
    path.write_text("".join(r + "\n" for r in rows))


def _line_by_line(monkeypatch) -> None:
    """Readers read JSON lines one by one (jsonio._lines: the reference), never in blocks."""
    from pipeline.ingest import jsonio

    def lines(f, limit, room, first=1):
        return jsonio._parsed(jsonio._lines(f, limit, first))

    monkeypatch.setattr(jsonio, "_blocks", lines)


def _read_both(path, monkeypatch, room=8, blocks_seen=True, **spec):
    def ctx() -> IngestContext:
        return IngestContext(room=lambda: room)  # blocks of 8 lines: some clean, some not

    fast = read_source(table, path, ctx=ctx(), **spec)
    whole = table.read(SourceConfig(kind="table", path=str(path), **spec), path, ctx())
    assert any(isinstance(r, Items) for r in whole) == blocks_seen  # blocks read whole
    _line_by_line(monkeypatch)
    slow = read_source(table, path, ctx=ctx(), **spec)
    return fast, slow


GOOD = b'{"before": "a", "after": "b"}\n'


@pytest.mark.parametrize("blank", [0, 63, 64, 200])
@pytest.mark.parametrize("damage", ["garbage", "crc", "cut"])
def test_a_damaged_gzip_ends_the_same_in_blocks_and_line_by_line(
    tmp_path, monkeypatch, blank, damage
):
    """A read error after a run of blank lines: gzip raises some errors once only, so the bulk
    skip of the run must report it rather than leave it for a next read that never sees it."""
    from pipeline.ingest.count import count_json

    z = bytearray(gzip.compress(GOOD * 3 + b"\n" * blank))  # the error after the blank run
    if damage == "garbage":
        z += b"X"
    elif damage == "crc":
        z[-8] ^= 0xFF
    else:
        z = z[: len(z) - 5]
    p = tmp_path / "d.jsonl.gz"
    p.write_bytes(bytes(z))
    fast, slow = _read_both(p, monkeypatch, room=2, blocks_seen=True)
    assert [repr(r) for r in fast] == [repr(r) for r in slow]
    assert len(fast) == count_json(p, 8 << 20)[0]  # the counter agrees: nothing lost
    assert isinstance(fast[-1], RecordError) and "unreadable input" in fast[-1].reason
    assert fast[-1].ref == f"line {4 + blank}"


def test_a_flood_of_blank_lines_in_small_blocks_is_skipped_in_bulk(tmp_path):
    rec = b'{"before": "a", "after": "b"}\n'
    p = tmp_path / "f.jsonl.gz"
    p.write_bytes(gzip.compress(rec * 3 + b"\n" * (4 << 20) + rec))
    t = time.process_time()
    recs = read_source(table, p, ctx=IngestContext(room=lambda: 2))  # runs of 2 lines
    assert time.process_time() - t < 5  # a line at a time: over a minute
    assert [r.ref for r in recs] == ["line 1", "line 2", "line 3", f"line {(4 << 20) + 4}"]


@pytest.mark.parametrize("gz", [False, True])
def test_blocks_of_clean_lines_give_the_records_line_by_line_gives(tmp_path, monkeypatch, gz):
    import random

    rnd = random.Random(5)
    clean = [
        json.dumps({"before": f"v{i}", "after": f"w{i}", "comment": "c", "path": f" p{i}.ts"})
        for i in range(40)
    ]
    odd = [json.dumps(o) for o in ODD_LINES] + ODD_RAW
    rows = clean + [rnd.choice(odd) for _ in range(30)] + clean
    rnd.shuffle(rows)
    rows = clean + rows  # a clean block first
    p = tmp_path / "d.jsonl"
    _lines_file(p, rows)
    if gz:
        p = tmp_path / "d.jsonl.gz"
        p.write_bytes(gzip.compress((tmp_path / "d.jsonl").read_bytes()))
    spec = dict(defaults={"comment": "none given"}, transforms={"path": "strip"})
    fast, slow = _read_both(p, monkeypatch, **spec)
    assert [repr(r) for r in fast] == [repr(r) for r in slow]
    assert any(isinstance(r, RecordError) for r in slow) and len(slow) == len(rows) - rows.count("")


def test_a_piece_read_in_blocks_writes_the_batches_a_record_at_a_time_writes(tmp_path):
    from pipeline.ingest import jsonio, shards
    from pipeline.ingest.shards import Params

    rows = [json.dumps({"before": f"v{i}", "after": f"w{i}"}) for i in range(25)]
    rows[7], rows[13] = "{bad", ""
    p = tmp_path / "d.jsonl"
    _lines_file(p, rows)
    params = Params(max_record_bytes=1 << 20, batch_size=4, bot_patterns=())
    spec = SourceConfig(kind="table", path=str(p))

    def batches() -> list[tuple[int, int]]:
        out = shards.read_piece(("d", spec, p, None), params)
        sizes = []
        for outs, _ in out:
            sizes.append(tuple(b.num_rows for b in outs.values()))
        return sizes

    fast = batches()
    real = jsonio._objects
    try:
        jsonio._objects = lambda lines, limit: None
        slow = batches()
    finally:
        jsonio._objects = real
    assert fast == slow and (4,) in fast


def test_a_block_holds_at_most_block_bytes_of_lines(tmp_path, monkeypatch):
    """A block of bad lines goes line by line, but is read whole first: its bytes are bounded
    (jsonio.BLOCK_BYTES), not room() lines of up to the record limit each."""
    from pipeline.ingest import jsonio

    rows = [json.dumps({"before": f"v{i:03d}", "after": "w"}) for i in range(10)]
    p = tmp_path / "d.jsonl"
    _lines_file(p, rows)
    monkeypatch.setattr(jsonio, "BLOCK_BYTES", 100)  # about 3 lines of 33 bytes
    ctx = IngestContext(room=lambda: 1000)
    with open(p, "rb") as f:
        got = list(jsonio._blocks(f, 1 << 20, ctx.room))
    assert [len(b.objs) for b in got] == [4, 4, 2]  # each ends on the line that passes 100
    assert [o["before"] for b in got for o in b.objs] == [f"v{i:03d}" for i in range(10)]

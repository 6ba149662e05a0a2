"""The shared JSON readers: one bad record costs one record, never the file."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ingest.base import IngestContext, RecordError, SourceUnreadable
from pipeline.ingest.jsonio import (
    detect_layout,
    iter_json_array,
    iter_json_records,
    iter_lines,
    open_maybe_gzip,
    optional_str,
    require_object,
    require_str,
)


def records(path: Path, **ctx) -> list[tuple[str, object]]:
    """(ref, value) per record; a RecordError as (ref, its reason)."""
    got = iter_json_records(path, IngestContext(**ctx))
    return [(ref, v.reason if isinstance(v, RecordError) else v) for ref, v, _ in got]


def lines(path: Path, **ctx) -> list[tuple[int, str | RecordError]]:
    return list(iter_lines(path, IngestContext(**ctx)))


def texts(got) -> list[tuple[int, str]]:
    return [(n, t) for n, t in got if isinstance(t, str)]


def errors(got) -> list[RecordError]:
    return [t for _, t in got if isinstance(t, RecordError)]


def test_plain_and_gzip_read_the_same_and_report_file_bytes(tmp_path):
    data = b'{"a": 1}\n{"b": 2}\n'
    (tmp_path / "p.jsonl").write_bytes(data)
    gz = tmp_path / "no-extension"  # detected by the magic bytes, not the name
    gz.write_bytes(gzip.compress(data))
    for p in (tmp_path / "p.jsonl", gz):
        total, done = [], []
        got = list(iter_lines(p, IngestContext(set_total=total.append, advance=done.append)))
        assert got == [(1, '{"a": 1}'), (2, '{"b": 2}')]
        assert total == [p.stat().st_size] and sum(done) == p.stat().st_size


def test_crlf_bom_blank_lines_and_no_final_newline(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\r\n   \n\n{"b": "x\\r\\ny"}\r\n{"c": 3}')
    assert lines(p) == [(1, '{"a": 1}'), (5, '{"b": "x\\r\\ny"}'), (6, '{"c": 3}')]


def test_invalid_utf8_is_an_error_for_that_line_only(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(b'{"a": "ok"}\n{"a": "\xff\xfe"}\n{"a": "caf\xc3\xa9"}\n')
    got = lines(p)
    assert texts(got) == [(1, '{"a": "ok"}'), (3, '{"a": "café"}')]
    (err,) = errors(got)
    assert err.ref == "line 2" and err.reason == "invalid UTF-8: invalid start byte at byte 7"
    assert err.raw == b'{"a": "\xff\xfe"}' and err.severity == "error"


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"])
def test_an_over_long_line_is_skipped_and_the_next_line_reads(tmp_path, ending):
    p = tmp_path / "a.jsonl"
    big = b'{"a": "' + b"x" * 5000 + b'"}'
    fits = b'{"a": "' + b"y" * 93 + b'"}'  # exactly the limit
    p.write_bytes(b'{"n": 1}' + ending + big + ending + fits + ending + b'{"n": 2}' + ending)
    got = lines(p, max_record_bytes=102)
    assert texts(got) == [(1, '{"n": 1}'), (3, fits.decode()), (4, '{"n": 2}')]
    (err,) = errors(got)
    assert err.ref == "line 2" and err.reason == "record too large: 5009 bytes > 102"
    assert err.raw == big[:104]


def test_a_line_one_byte_over_the_limit_is_too_large(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(b"x" * 11 + b"\r\n" + b"y" * 10)  # last line: no newline, at the limit
    got = lines(p, max_record_bytes=10)
    assert [e.reason for e in errors(got)] == ["record too large: 11 bytes > 10"]
    assert texts(got) == [(2, "y" * 10)]


def test_empty_file_gives_nothing(tmp_path):
    p = tmp_path / "e.jsonl"
    p.write_bytes(b"")
    assert lines(p) == []
    p.write_bytes(gzip.compress(b""))
    assert lines(p) == []


def test_truncated_gzip_ends_with_one_error_after_the_good_lines(tmp_path):
    data = b"".join(b'{"n": %d}\n' % i for i in range(20_000))
    p = tmp_path / "t.jsonl.gz"
    whole = gzip.compress(data)
    p.write_bytes(whole[: len(whole) // 2])
    got = lines(p)
    good = texts(got)
    assert good and good == [(i + 1, f'{{"n": {i}}}') for i in range(len(good))]
    (err,) = errors(got)
    assert err.ref == f"line {len(good) + 1}" and err.reason.startswith("unreadable input")
    assert got[-1][1] is err


def test_missing_file_and_folder_are_unreadable(tmp_path):
    with pytest.raises(SourceUnreadable, match="No such file"):
        lines(tmp_path / "nope.jsonl")
    with pytest.raises(SourceUnreadable, match="is a folder"):
        lines(tmp_path)


def test_open_maybe_gzip(tmp_path):
    (tmp_path / "a").write_bytes(gzip.compress(b"hello"))
    (tmp_path / "b").write_bytes(b"hello")
    for name in ("a", "b"):
        with open_maybe_gzip(tmp_path / name) as f:
            assert f.read() == b"hello"


def test_field_helpers():
    obj = {"s": "x", "n": 3, "z": None, "o": {"k": 1}}
    assert require_str(obj, "s", "line 1") == "x"
    assert require_str(obj, "n", "line 1").reason == "wrong type: n is int, expected string"
    assert require_str(obj, "o", "line 1").reason == "wrong type: o is object, expected string"
    assert require_str(obj, "z", "line 1").reason == "missing field: z"
    assert require_str(obj, "absent", "line 1").reason == "missing field: absent"
    assert optional_str(obj, "absent", "line 1") == ""
    assert optional_str(obj, "z", "line 1", default="d") == "d"
    assert optional_str(obj, "n", "line 1").reason == "wrong type: n is int, expected string"


@pytest.mark.parametrize(
    ("data", "n_ok", "reason"),
    [
        (b"[1,]", 1, "expected a value, found ']' at byte 3"),
        (b"[1] [2]", 1, "data after the closing ']' at byte 4"),
        (b'{"a": 1}', 0, "expected '[' at byte 0"),
        (b"[1, 2", 2, "expected ',' or ']', file ends at byte 5"),
    ],
)
def test_array_structure_errors(data, n_ok, reason):
    got = list(iter_json_array(io.BytesIO(data), max_bytes=100))
    assert [v.error for v in got[:n_ok]] == [None] * n_ok
    assert got[n_ok].final and got[n_ok].index == n_ok + 1
    assert got[n_ok].error == f"malformed JSON array: {reason}; rest of file not read"
    assert len(got) == n_ok + 1


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(json_values, max_size=6), st.integers(1, 9), st.booleans())
def test_iter_json_array_matches_a_whole_parse(values, chunk, pretty):
    data = json.dumps(values, indent=2 if pretty else None, ensure_ascii=False).encode()
    got = list(iter_json_array(io.BytesIO(data), max_bytes=1 << 20, chunk_size=chunk))
    assert [v.error for v in got] == [None] * len(values)
    assert [v.value for v in got] == values
    assert [v.index for v in got] == list(range(1, len(values) + 1))


def test_iter_json_lines_keeps_line_numbers(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(b'{"a": 1}\r\n\n[2]\n3')
    got = list(iter_json_records(p, IngestContext(max_record_bytes=100)))
    assert [(ref, v) for ref, v, _ in got] == [("line 1", {"a": 1}), ("line 3", [2]), ("line 4", 3)]


@pytest.mark.parametrize(
    ("data", "layout"),
    [
        (b'\xef\xbb\xbf\n  [{"a": 1}]', "array"),
        (b'{\n  "a": 1\n}\n{\n  "a": 2\n}\n', "values"),
        (b'\n\n  {  \n"a": 1}', "values"),
        (b'{"a": 1}\n{"a": 2}\n', "lines"),
        (b"", "lines"),
        (b"x" * 70_000 + b"\n[1]", "lines"),
    ],
)
def test_detect_layout_by_the_first_bytes(tmp_path, data, layout):
    p = tmp_path / "f"
    p.write_bytes(data)
    assert detect_layout(p) == layout
    p.write_bytes(gzip.compress(data))
    assert detect_layout(p) == layout


def test_every_layout_gives_the_same_values_with_its_own_refs(tmp_path):
    rows = [{"a": 1}, {"b": [2, 3]}]
    layouts = {
        "element": json.dumps(rows, indent=2).encode(),
        "value": b"\n".join(json.dumps(r, indent=2).encode() for r in rows),
        "line": b"".join(orjson.dumps(r) + b"\n" for r in rows),
    }
    for unit, data in layouts.items():
        for name, content in (("f.json", data), ("f.json.gz", gzip.compress(data))):
            p = tmp_path / name
            p.write_bytes(content)
            assert records(p) == [(f"{unit} 1", rows[0]), (f"{unit} 2", rows[1])], (unit, name)


def test_raw_is_the_line_text_or_the_value_bytes(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(b'{"a": 1}\n[1, 2]\n')
    got = list(iter_json_records(p, IngestContext()))
    assert [raw for _, _, raw in got] == ['{"a": 1}', "[1, 2]"]
    p.write_bytes(b'[{"a":\n 1}, 2]')
    got = list(iter_json_records(p, IngestContext()))
    assert [raw for _, _, raw in got] == [b'{"a":\n 1}', b"2"]


def test_errors_of_each_layout(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(b'{"a": 1}\n{"a": tru}\n{"a": "\xff"}\n')
    got = records(p)
    assert got[0] == ("line 1", {"a": 1})
    assert got[1][0] == "line 2" and got[1][1].startswith("malformed JSON: invalid literal")
    assert got[1][1].endswith(" at col 7")
    assert got[2] == ("line 3", "invalid UTF-8: invalid start byte at byte 7")
    p.write_bytes(b'[{"a": tru}, 2, 3')
    got = records(p)
    assert got[0][0] == "element 1" and got[0][1].startswith("malformed JSON: invalid literal")
    assert got[1:3] == [("element 2", 2), ("element 3", 3)]
    end = "malformed JSON array: expected ',' or ']', file ends at byte 17; rest of file not read"
    assert got[3:] == [("element 4", end)]


def test_records_progress_covers_the_file(tmp_path):
    for data in (b'[{"a": 1}, {"b": 2}]', b'{"a": 1}\n' * 1000, b'{\n "a": 1\n}\n' * 1000):
        for content in (data, gzip.compress(data)):
            p = tmp_path / "f"
            p.write_bytes(content)
            total, done = [], []
            ctx = IngestContext(set_total=total.append, advance=done.append)
            assert len(list(iter_json_records(p, ctx))) in (2, 1000)
            assert total == [p.stat().st_size] and sum(done) == p.stat().st_size


def test_a_gzip_truncated_within_the_head_still_gives_its_records(tmp_path):
    data = b"".join(b'{"n": %d}\n' % i for i in range(2_000))  # < 64 KiB
    whole = gzip.compress(data)
    p = tmp_path / "t.jsonl.gz"
    p.write_bytes(whole[: len(whole) // 2])
    got = records(p)
    good = [v for _, v in got[:-1]]
    assert good and good == [{"n": i} for i in range(len(good))]
    assert got[-1][0] == f"line {len(good) + 1}"
    assert got[-1][1].startswith("unreadable input: ")


def test_records_of_a_missing_file_or_a_folder_are_unreadable(tmp_path):
    with pytest.raises(SourceUnreadable, match="No such file"):
        records(tmp_path / "nope.json")
    with pytest.raises(SourceUnreadable, match="is a folder"):
        records(tmp_path)


def test_require_object():
    assert require_object({"a": 1}, "line 1") == {"a": 1}
    err = require_object([1], "element 2", b"[1]")
    assert (err.ref, err.raw, err.reason) == ("element 2", b"[1]", "not an object: got array")

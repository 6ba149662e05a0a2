"""Damage inside a file costs the damaged record, never the file: the other records stay items,
the damaged one is an error naming its line or row, and verify accounts for every record."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.adversarial.conftest import EXIT_DATA, EXIT_OK, GOOD, csv_text, jsonl

G0, G1, G2 = (json.dumps(r).encode() for r in GOOD)
GOOD_COMMENTS = ["good 0", "good 1", "good 2"]


def lines(*parts: bytes) -> bytes:
    return b"\n".join(parts) + b"\n"


# name, file name, content, the error's ref, words in its reason
DAMAGED = [
    (
        "nul byte in one JSON line",
        "d.jsonl",
        lines(G0, b'{"before": "a\x00b", "after": "c"}', G1, G2),
        "line 2",
        "NUL byte",
    ),
    (
        "invalid UTF-8 in one JSON line",
        "d.jsonl",
        lines(G0, G1, b'{"before": "caf\xe9", "after": "c"}', G2),
        "line 3",
        "invalid UTF-8",
    ),
    (
        "nul byte in one CSV row",
        "d.csv",
        csv_text(GOOD[:2]).encode()
        + b"a\x00b,c,bad\n"
        + csv_text(GOOD[2:]).split("\n", 1)[1].encode(),
        "row 3 (line 4)",
        "NUL byte in field 1",
    ),
    (
        "invalid UTF-8 in one CSV row",
        "d.csv",
        csv_text(GOOD[:1]).encode()
        + b"caf\xe9,c,bad\n"
        + csv_text(GOOD[1:]).split("\n", 1)[1].encode(),
        "row 2 (line 3)",
        "invalid UTF-8",
    ),
    (
        "unclosed CSV quote in the middle",
        "d.csv",
        csv_text(GOOD[:1]).encode()
        + b'a,"b,unclosed\n'
        + csv_text(GOOD[1:]).split("\n", 1)[1].encode(),
        "row 2 (line 3)",
        "unclosed quote",
    ),
    (
        "unclosed CSV quote before a quoted field",
        "d.csv",
        b'before,after,comment\nx,y,good 0\na,"b,unclosed\nx,y,good 1\nx,"y",good 2\n',
        "row 2 (line 3)",
        "malformed CSV",
    ),
    (
        "unclosed CSV quote on the last row",
        "d.csv",
        csv_text(GOOD).encode() + b'a,"b,never closed\n',
        "row 4 (line 5)",
        "unclosed quote",
    ),
    (
        "a character after a closing CSV quote",
        "d.csv",
        b'before,after,comment\nx,y,good 0\na,"b"junk,c\nx,y,good 1\nx,y,good 2\n',
        "row 2 (line 3)",
        "malformed CSV",
    ),
    (
        "CSV row with too few fields",
        "d.csv",
        b"before,after,comment\nx,y,good 0\nonly-one\nx,y,good 1\nx,y,good 2\n",
        "row 2 (line 3)",
        "wrong column count",
    ),
    (
        "CSV row with too many fields",
        "d.csv",
        b"before,after,comment\nx,y,good 0\nx,y,good 1\na,b,c,d,e\nx,y,good 2\n",
        "row 3 (line 4)",
        "wrong column count",
    ),
    (
        "JSON array truncated mid-element",
        "d.json",
        b"[" + G0 + b",\n" + G1 + b",\n" + G2 + b',\n{"before": "x", "aft',
        "element 4",
        "file ends inside element 4",
    ),
    (
        "JSON array with trailing garbage",
        "d.json",
        b"[" + G0 + b"," + G1 + b"," + G2 + b"] garbage{",
        "element 4",
        "data after the closing ']'",
    ),
    (
        "pretty-printed values truncated",
        "d.json",
        b"{\n" + G0[1:] + b"\n" + G1 + b"\n" + G2 + b'\n{"before": ',
        "value 4",
        "file ends inside value 4",
    ),
    (
        "deeply nested JSON line",
        "d.jsonl",
        lines(G0, G1, b'{"before": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", G2),
        "line 3",
        "malformed JSON",
    ),
    (
        "deeply nested JSON array element",
        "d.json",
        b"[" + G0 + b"," + b"[" * 50_000 + b"]" * 50_000 + b"," + G1 + b"," + G2 + b"]",
        "element 2",
        "malformed JSON",
    ),
    (
        "a NUL byte inside a JSON array element",
        "d.json",
        b"[" + G0 + b',{"before": "\x00", "after": "b"},' + G1 + b"," + G2 + b"]",
        "element 2",
        "NUL byte",
    ),
    (
        "a lone surrogate escape",
        "d.jsonl",
        lines(G0, G1, G2, b'{"before": "\\ud800", "after": "b"}'),
        "line 4",
        "malformed JSON",
    ),
]


@pytest.mark.parametrize(
    ("fname", "data", "ref", "words"), [c[1:] for c in DAMAGED], ids=[c[0] for c in DAMAGED]
)
def test_damage_costs_one_record(ingest, fname, data, ref, words):
    r = ingest(fname, data)
    assert r.code == EXIT_OK, r.res.output
    assert r.comments() == GOOD_COMMENTS
    (err,) = r.errors.iter_rows(named=True)
    assert err["source_ref"] == ref and err["severity"] == "error"
    assert words in err["reason"], err["reason"]
    r.errors_name_where()
    r.verify_passes()


TEXT = jsonl(GOOD).decode()
ENCODINGS = [  # id, BOM, codec, gzip
    ("utf-16-le BOM", b"\xff\xfe", "utf-16-le", False),
    ("utf-16-be BOM", b"\xfe\xff", "utf-16-be", False),
    ("utf-32-le BOM", b"\xff\xfe\x00\x00", "utf-32-le", False),
    ("utf-32-be BOM", b"\x00\x00\xfe\xff", "utf-32-be", False),
    ("utf-8 BOM", b"\xef\xbb\xbf", "utf-8", False),
    ("utf-16 BOM in gzip", b"\xff\xfe", "utf-16-le", True),
]


@pytest.mark.parametrize("fname", ["d.jsonl", "d.csv", "d.json"])
@pytest.mark.parametrize(
    ("bom", "codec", "gz"), [e[1:] for e in ENCODINGS], ids=[e[0] for e in ENCODINGS]
)
def test_a_bom_is_decoded(ingest, fname, bom, codec, gz):
    content = {"d.jsonl": TEXT, "d.csv": csv_text(GOOD), "d.json": json.dumps(GOOD, indent=1)}
    raw = bom + content[fname].encode(codec)
    r = ingest(fname, gzip.compress(raw) if gz else raw)
    assert r.code == EXIT_OK, r.res.output
    assert r.comments() == GOOD_COMMENTS and r.errors.height == 0
    r.verify_passes()


def test_an_unpaired_surrogate_in_utf16_costs_its_line(ingest):
    body = TEXT.encode("utf-16-le")
    bad = (
        '{"before": "a'.encode("utf-16-le") + b"\x00\xd8" + '", "after": "b"}\n'.encode("utf-16-le")
    )
    r = ingest("d.jsonl", b"\xff\xfe" + bad + body)
    assert r.code == EXIT_OK and r.comments() == GOOD_COMMENTS
    (err,) = r.errors.iter_rows(named=True)
    assert err["source_ref"] == "line 1" and "invalid UTF-16-LE" in err["reason"]
    r.verify_passes()


@pytest.mark.parametrize("fname", ["d.jsonl.gz", "d.csv.gz"])
def test_a_truncated_gzip_keeps_what_was_read(ingest, fname):
    rows = [{"before": f"a{i}", "after": f"b{i}", "comment": f"c{i}"} for i in range(20_000)]
    text = jsonl(rows) if "jsonl" in fname else csv_text(rows).encode()
    z = gzip.compress(text)
    r = ingest(fname, z[: len(z) // 2])
    assert r.code == EXIT_OK, r.res.output
    assert 1000 < r.items.height < 20_000
    (err,) = r.errors.iter_rows(named=True)
    assert "unreadable input" in err["reason"] and "rest of file not read" in err["reason"]
    assert err["source_ref"].startswith(("line ", "row "))
    r.verify_passes()


@pytest.mark.parametrize("fname", ["d.jsonl.gz", "d.csv.gz"])
def test_concatenated_gzip_members_are_all_read(ingest, fname):
    if "jsonl" in fname:
        data = gzip.compress(jsonl(GOOD[:1])) + gzip.compress(jsonl(GOOD[1:]))
    else:
        text = csv_text(GOOD)
        head, rest = text.split("\n", 2)[:2], text.split("\n", 2)[2]
        data = gzip.compress(("\n".join(head) + "\n").encode()) + gzip.compress(rest.encode())
    r = ingest(fname, data)
    assert r.code == EXIT_OK and r.comments() == GOOD_COMMENTS
    r.verify_passes()


@pytest.mark.parametrize("fname", ["d.jsonl", "d.csv", "d.json"])
def test_one_50mb_line_without_newline(ingest, fname):
    head = {"d.jsonl": jsonl(GOOD), "d.csv": csv_text(GOOD).encode(), "d.json": b""}[fname]
    data = head + b'{"before": "' + b"x" * (50 * 2**20)
    r = ingest(fname, data)
    r.verify_passes()
    if fname == "d.json":  # the whole file is one over-long value: nothing to keep
        assert r.code == EXIT_DATA and "records failed" in r.error_line()
        assert "record too large" in r.errors["reason"][0]
        return
    assert r.code == EXIT_OK and r.comments() == GOOD_COMMENTS
    (err,) = r.errors.iter_rows(named=True)
    assert "record too large" in err["reason"] and err["source_ref"].endswith(("line 4", "line 5)"))


def test_a_quoted_csv_field_cannot_run_past_the_record_limit(ingest):
    rows = csv_text(GOOD).encode()
    data = rows.replace(b"\nx = 1", b'\n"open' + b"\nfiller" * 5000 + b"\nx = 1", 1)
    r = ingest("d.csv", data, "", "ingest.max_record_bytes=4096")
    assert r.code == EXIT_OK, r.res.output
    assert set(GOOD_COMMENTS) <= set(r.comments())
    assert "record too large" in r.errors["reason"][0]
    r.verify_passes()


@pytest.mark.parametrize(
    "data",
    [b"", b"\n\n   \n\r\n\t\n", gzip.compress(b"")],
    ids=["empty", "blank lines", "empty gzip"],
)
@pytest.mark.parametrize("fname", ["d.jsonl", "d.csv"])
def test_an_empty_file_is_one_skip_and_the_data_fails(ingest, fname, data):
    r = ingest(fname, data)
    assert r.code == EXIT_DATA
    assert "no items" in r.error_line() or "records failed" in r.error_line()
    (err,) = r.errors.iter_rows(named=True)
    assert err["severity"] == "skip" and err["reason"].startswith("empty_source")
    r.verify_passes()


def test_blank_lines_past_the_sniffed_head_do_not_hide_the_data(ingest):
    r = ingest("d.jsonl", b"\n" * 20_000 + jsonl(GOOD))
    assert r.code == EXIT_OK and r.comments() == GOOD_COMMENTS
    r.verify_passes()


def test_a_binary_file_is_errors_per_line_and_the_data_fails(ingest):
    r = ingest("d.jsonl", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 40)
    assert r.code == EXIT_DATA and "records failed" in r.error_line()
    assert r.items.height == 0 and r.errors.height > 1
    r.errors_name_where()
    r.verify_passes()

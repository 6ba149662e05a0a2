"""Hostile values inside well-formed records: wrong types, extreme numbers, markup."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.adversarial.conftest import EXIT_OK, GOOD, csv_text, jsonl

BASE = {"before": "a = 1", "after": "a = 2", "comment": "c"}


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("before", 5, "wrong type: before"),
        ("after", {"x": 1}, "wrong type: after"),
        ("comment", [1, 2], "wrong type: comment"),
        ("path", {"a": "b"}, "wrong type: path"),
        ("repo", [], "wrong type: repo"),
        ("context", True, "wrong type: context"),
    ],
)
def test_a_text_field_of_the_wrong_type_is_an_error_record(ingest, field, value, words):
    r = ingest("d.jsonl", jsonl([*GOOD, {**BASE, field: value}]))
    assert r.code == EXIT_OK
    assert r.items.height == 3
    (err,) = r.errors.iter_rows(named=True)
    assert err["source_ref"] == "line 4" and err["reason"].startswith(words)
    r.verify_passes()


def test_a_list_of_strings_for_comment_is_joined(ingest):
    r = ingest("d.jsonl", jsonl([{**BASE, "comment": ["one", "two"]}]))
    assert r.code == EXIT_OK and r.items["comment"].to_list() == ["one\ntwo"]


JSON_TIMES = [
    (1e30, "created_at out of range"),
    (-1e30, "created_at out of range"),
    (10**19, "created_at out of range"),  # beyond int64: orjson reads it as a float
    (-(10**18), "created_at out of range"),
    ("yesterday", "created_at unparseable"),
    ("1" * 400, "created_at out of range"),
    ("0001-01-01T00:00:00+05:00", "created_at out of range"),
    ([2024], "created_at unparseable"),
    ({"t": 1}, "created_at unparseable"),
    (True, "created_at unparseable"),
]


@pytest.mark.parametrize(
    ("value", "problem"), JSON_TIMES, ids=[repr(t[0])[:20] for t in JSON_TIMES]
)
def test_an_unreadable_created_at_leaves_an_item_with_no_time(ingest, value, problem):
    rows = [{**BASE, "created_at": 1700000000}, {**BASE, "comment": "bad", "created_at": value}]
    r = ingest("d.jsonl", jsonl(rows))
    assert r.code == EXIT_OK, r.res.output
    assert r.items.height == 2 and r.errors.height == 0
    bad = r.items.filter(pl.col("comment") == "bad")
    assert bad["created_at"].to_list() == [None]
    assert r.items.filter(pl.col("comment") == "c")["created_at"].null_count() == 0
    s = r.source
    assert s["field_problems"] == {problem: 1} and s["field_problem_refs"] == {problem: ["line 2"]}
    assert problem in r.res.output and "line 2" in r.res.output  # the summary says so
    r.verify_passes()


def test_nan_and_infinity_times_in_a_csv(ingest):
    rows = [
        {**BASE, "created_at": v, "comment": f"t{v}"} for v in ("NaN", "inf", "1e30", "2024-01-01")
    ]
    r = ingest("d.csv", csv_text(rows, ("before", "after", "comment", "created_at")))
    assert r.code == EXIT_OK and r.items.height == 4
    assert r.items["created_at"].null_count() == 3
    assert sum(r.source["field_problems"].values()) == 3
    r.verify_passes()


@pytest.mark.parametrize("value", [1e30, -5, 2**40, "many", 1.5])
def test_an_unreadable_line_count_is_counted_from_the_text(ingest, value):
    r = ingest("d.jsonl", jsonl([{**BASE, "lines_added": value, "lines_removed": 1}]))
    assert r.code == EXIT_OK and r.items.height == 1
    assert r.items["lines_added"].to_list() == [1]  # counted from `after`
    (problem,) = r.source["field_problems"]
    assert problem.startswith("lines_added ")
    r.verify_passes()


MARKUP = [
    "[bold]x[/]",
    "[/]",
    "[link=file:///etc/passwd]click[/link]",
    "<script>alert(1)</script>",
    "{{ 7*7 }} ${HOME} $(rm -rf /)",
    "\x1b[31mred\x1b[0m",
]


@pytest.mark.parametrize("text", MARKUP)
@pytest.mark.parametrize("fname", ["d.jsonl", "d.csv"])
def test_markup_in_fields_is_plain_data(ingest, text, fname):
    row = {"before": text, "after": text + "!", "comment": text, "path": text, "repo": text}
    cols = ("before", "after", "comment", "path", "repo")
    data = jsonl([row]) if fname == "d.jsonl" else csv_text([row], cols)
    r = ingest(fname, data)
    assert r.code == EXIT_OK, r.res.output
    got = r.items.row(0, named=True)
    assert (got["before"], got["comment"], got["path"], got["repo"]) == (text,) * 4
    r.verify_passes()


def test_markup_in_error_reasons_and_column_names_does_not_break_the_summary(ingest):
    data = "[bold]before[/],after,comment\n[/],b,c\n"
    r = ingest("d.csv", data, '[ingest.sources.fields]\nbefore = "[red]missing[/]"\n')
    assert r.code == 2  # the mapped column is in no record: a config error naming it
    assert "[red]missing[/]" in r.res.output and "[bold]before[/]" in r.res.output
    assert "Traceback" not in r.res.output


def test_a_markup_file_name_is_plain_data(ingest):
    r = ingest("[bold]x[red].jsonl", jsonl(GOOD))
    assert r.code == EXIT_OK, r.res.output
    assert r.items["source"].unique().to_list() == ["[bold]x[red].jsonl"]
    r.verify_passes()


def test_every_field_of_the_wrong_type_at_once(ingest):
    hostile = {
        "before": 1,
        "after": [1],
        "comment": {"a": 1},
        "path": 2.5,
        "repo": None,
        "created_at": [],
        "lines_added": {},
        "author_is_bot": "maybe",
    }
    r = ingest("d.jsonl", jsonl([*GOOD, hostile]) + json.dumps([1, 2]).encode() + b"\n")
    assert r.code == EXIT_OK and r.items.height == 3
    assert sorted(r.errors["source_ref"].to_list()) == ["line 4", "line 5"]
    r.verify_passes()


def test_a_csv_header_repeating_a_column_is_a_warning(ingest):
    """Was silent: `before,after,comment,comment` read the second comment, the first one lost
    without a word."""
    r = ingest("d.csv", "before,after,comment,comment\nx = 1,y = 1,first,second\n")
    assert r.code == EXIT_OK
    assert r.comments() == ["second"]
    (w,) = r.source["warnings"]
    assert "repeats column(s) ['comment']; only the last column of each name is read" in w
    r.verify_passes()


def test_a_parquet_file_repeating_a_column_is_a_warning(ingest, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = ["before", "after", "comment", "comment"]
    cols = [pa.array([v]) for v in ("x = 1", "y = 1", "first", "second")]
    pq.write_table(pa.Table.from_arrays(cols, names=names), tmp_path / "d.parquet")
    r = ingest("d.parquet", None)
    assert r.code == EXIT_OK and r.comments() == ["second"]
    assert any("repeats column(s) ['comment']" in w for w in r.source["warnings"])
    r.verify_passes()

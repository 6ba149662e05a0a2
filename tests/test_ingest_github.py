"""The GitHub review-comments source: suggestion blocks in, review edits out."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pytest

from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext, Record, RecordError, SourceUnreadable
from pipeline.ingest.sources.github import read

HUNK = (
    "@@ -1,6 +1,6 @@ def main():\n import os\n import sys\n-x = 1\n+x = 2\n-y = 1\n+y = 2\n z = 3"
)


def comment(**over) -> dict:
    c = {
        "id": 1,
        "body": "Use a constant.\n```suggestion\nz = THREE\n```",
        "diff_hunk": HUNK,
        "path": "src/app.py",
        "line": 5,
        "start_line": None,
        "original_line": 5,
        "original_start_line": None,
        "side": "RIGHT",
        "start_side": None,
        "commit_id": "abc123",
        "pull_request_url": "https://api.github.com/repos/octo/widgets/pulls/42",
        "html_url": "https://github.com/octo/widgets/pull/42#discussion_r1",
        "user": {"login": "alice", "type": "User"},
        "in_reply_to_id": None,
        "created_at": "2023-05-10T00:49:04Z",
    }
    c.update(over)
    return c


def write_lines(tmp_path: Path, rows: list, name: str = "c.jsonl") -> Path:
    p = tmp_path / name
    p.write_bytes(b"".join(r if isinstance(r, bytes) else orjson.dumps(r) + b"\n" for r in rows))
    return p


def run(path: Path, **ctx) -> list[Record | RecordError]:
    return list(read(SourceConfig(kind="github", path=str(path)), path, IngestContext(**ctx)))


def one(tmp_path: Path, c) -> Record | RecordError:
    (rec,) = run(write_lines(tmp_path, [c]))
    return rec


def test_single_line_suggestion(tmp_path):
    rec = one(tmp_path, comment())
    assert isinstance(rec, Record) and rec.ref == "line 1"
    (it,) = rec.items
    assert (it.before, it.after) == ("z = 3", "z = THREE")
    assert it.context == "import sys\nx = 2\ny = 2"
    assert it.comment == "Use a constant."
    assert (it.repo, it.change, it.path) == ("octo/widgets", "42", "src/app.py")
    assert (it.author, it.author_is_bot) == ("alice", None)
    assert (it.lines_removed, it.lines_added) == (1, 1)
    assert it.created_at == datetime(2023, 5, 10, 0, 49, 4, tzinfo=timezone.utc)


def test_multi_line_skips_the_other_sides_lines(tmp_path):
    body = "Simpler:\n```suggestion\nx, y = 2, 2\nz = 3\n```"
    (it,) = one(tmp_path, comment(body=body, start_line=3, line=5)).items
    assert it.before == "x = 2\ny = 2\nz = 3"
    assert it.context == "import os\nimport sys"
    assert it.after == "x, y = 2, 2\nz = 3"
    assert (it.lines_removed, it.lines_added) == (3, 2)


def test_left_side_takes_removed_lines(tmp_path):
    hunk = HUNK.rsplit("\n", 2)[0]  # ends with "-y = 1"
    body = "```suggestion\nx = y = 1\n```"
    c = comment(body=body, diff_hunk=hunk, start_line=3, line=4, side="LEFT", start_side="LEFT")
    (it,) = one(tmp_path, c).items
    assert it.before == "x = 1\ny = 1"
    assert it.context == "import os\nimport sys"


def test_no_newline_marker_and_header_are_not_code(tmp_path):
    hunk = "@@ -0,0 +1,2 @@\n+first\n+last\n\\ No newline at end of file"
    (it,) = one(tmp_path, comment(diff_hunk=hunk, line=2, start_line=1)).items
    assert it.before == "first\nlast"
    assert it.context == ""
    rec = one(tmp_path, comment(diff_hunk=hunk, line=3, start_line=1))
    assert isinstance(rec, RecordError)
    assert rec.reason == "hunk too short: 2 lines on the RIGHT side, the comment spans 3"


def test_several_blocks_are_alternatives_for_the_same_lines(tmp_path):
    body = "Either\n```suggestion\nz = 4\n```\nor\n```suggestion\nz = 5\n```\n"
    rec = one(tmp_path, comment(body=body))
    assert [it.after for it in rec.items] == ["z = 4", "z = 5"]
    assert {(it.before, it.comment) for it in rec.items} == {("z = 3", "Either\nor")}


def test_empty_suggestion_deletes_the_lines(tmp_path):
    (it,) = one(tmp_path, comment(body="Not needed.\n```suggestion\n```")).items
    assert (it.before, it.after, it.lines_removed, it.lines_added) == ("z = 3", "", 1, 0)
    (it,) = one(tmp_path, comment(body="```suggestion\n\n```")).items  # one blank line
    assert (it.after, it.lines_added, it.comment) == ("", 1, "")


def test_replies_and_comments_without_suggestion_are_skipped(tmp_path):
    rows = [
        comment(body="Thanks, done!", in_reply_to_id=7),
        comment(body="Fixed:\n```suggestion\nz = 4\n```", in_reply_to_id=7),
        comment(body="Why is this 3?\n```python\nz = 3\n```"),
    ]
    recs = run(write_lines(tmp_path, rows))
    assert [(r.ref, r.severity, r.reason) for r in recs if isinstance(r, RecordError)] == [
        ("line 1", "skip", "reply"),
        ("line 3", "skip", "no_suggestion"),
    ]
    assert recs[1].items[0].after == "z = 4"


def test_crlf_in_body_and_hunk(tmp_path):
    body = "Use a constant.\r\n\r\n```suggestion\r\nz = THREE\r\n```\r\n"
    (it,) = one(tmp_path, comment(body=body, diff_hunk=HUNK.replace("\n", "\r\n"))).items
    assert (it.before, it.after, it.comment) == ("z = 3", "z = THREE", "Use a constant.")
    assert it.context == "import sys\nx = 2\ny = 2"


def test_outdated_comment_uses_the_original_lines(tmp_path):
    c = comment(line=None, start_line=None, original_line=5, original_start_line=4)
    (it,) = one(tmp_path, c).items
    assert it.before == "y = 2\nz = 3"
    rec = one(tmp_path, comment(line=None, original_line=None))
    assert rec.reason == "missing field: line (and original_line)"


def test_bot_user_type(tmp_path):
    (it,) = one(tmp_path, comment(user={"login": "lint-helper", "type": "Bot"})).items
    assert (it.author, it.author_is_bot) == ("lint-helper", True)
    (it,) = one(tmp_path, comment(user=None)).items  # a deleted account
    assert (it.author, it.author_is_bot) == (None, None)


def test_four_backtick_fence_holds_a_three_backtick_line(tmp_path):
    body = 'Document it:\n````suggestion  \n"""Example:\n```\nz = 3\n```\n"""\n````'
    (it,) = one(tmp_path, comment(body=body)).items
    assert it.after == '"""Example:\n```\nz = 3\n```\n"""'
    assert it.lines_added == 5
    assert it.comment == "Document it:"


def test_suggestion_quoted_inside_another_fence_is_not_taken(tmp_path):
    body = "Write it like this:\n````markdown\n```suggestion\nx\n```\n````"
    rec = one(tmp_path, comment(body=body))
    assert (rec.severity, rec.reason) == ("skip", "no_suggestion")


def test_comment_is_tidied(tmp_path):
    body = "  First.\n\n\n\n\nSecond.\n```suggestion\nz = 4\n```\n\n"
    (it,) = one(tmp_path, comment(body=body)).items
    assert it.comment == "First.\n\nSecond."


def test_unclosed_suggestion_block(tmp_path):
    rec = one(tmp_path, comment(body="Try\n````suggestion\nz = 4\n```"))
    assert (rec.severity, rec.reason) == (
        "error",
        "unclosed suggestion block: opened on body line 2",
    )


@pytest.mark.parametrize(
    ("over", "reason"),
    [
        ({"body": None}, "missing field: body"),
        ({"diff_hunk": None}, "missing field: diff_hunk"),
        ({"line": "5"}, "wrong type: line is str, expected int"),
        ({"line": True}, "wrong type: line is bool, expected int"),
        ({"user": {"login": 5}}, "wrong type: user.login is int, expected str"),
        ({"start_line": 9}, "wrong value: start_line 9 > line 5"),
        ({"start_side": "LEFT"}, "mixed sides: start_side LEFT, side RIGHT"),
    ],
)
def test_bad_fields(tmp_path, over, reason):
    rec = one(tmp_path, comment(**over))
    assert isinstance(rec, RecordError)
    assert (rec.severity, rec.reason) == ("error", reason)


@pytest.mark.parametrize(
    ("created", "problem"),
    [
        ("yesterday", "created_at unparseable"),
        (1e30, "created_at unparseable"),
        ("0001-01-01T00:00:00+05:00", "created_at out of range"),
    ],
)
def test_an_unreadable_time_leaves_an_item_with_no_time(tmp_path, created, problem):
    rec = one(tmp_path, comment(created_at=created))
    assert isinstance(rec, Record) and rec.problems == [problem]
    assert rec.items[0].created_at is None


def test_missing_path_key(tmp_path):
    c = comment()
    del c["path"]
    assert one(tmp_path, c).reason == "missing field: path"


def test_repo_from_html_url_when_no_api_url(tmp_path):
    c = comment(pull_request_url=None, html_url="https://github.com/o/r/pull/7#discussion_r9")
    (it,) = one(tmp_path, c).items
    assert (it.repo, it.change) == ("o/r", "7")


def test_json_lines_bad_lines_among_good_ones(tmp_path):
    rows = [
        comment(),
        b'{"body": tru}\n',
        b"\n",  # blank: not a record
        b'{"body": "caf\xe9"}\n',
        b"[1, 2]\n",
        comment(body="```suggestion\nz = 9\n```"),
    ]
    recs = run(write_lines(tmp_path, rows))
    assert [r.ref for r in recs] == ["line 1", "line 2", "line 4", "line 5", "line 6"]
    assert recs[0].items[0].after == "z = THREE" and recs[4].items[0].after == "z = 9"
    assert recs[1].reason.startswith("malformed JSON: invalid literal")  # orjson's words
    assert recs[1].reason.endswith(" at col 10")
    assert recs[1].raw == '{"body": tru}'  # the line's text, as jsonio.iter_lines gives it
    assert recs[2].reason == "invalid UTF-8: invalid continuation byte at byte 13"
    assert recs[3].reason == "not an object: list"


def test_over_long_line_is_reported_and_reading_goes_on(tmp_path):
    big = comment(body="x" * 5000)
    recs = run(write_lines(tmp_path, [big, comment()]), max_record_bytes=1000)
    size = len(orjson.dumps(big))
    assert recs[0].reason == f"record too large: {size} bytes > 1000"
    assert len(recs[0].raw) == 1002  # the limit and 2 bytes more, as jsonio.iter_lines reads
    assert recs[1].ref == "line 2" and isinstance(recs[1], Record)


def test_array_input(tmp_path):
    page = [comment(), comment(body="no suggestion here"), comment(body="```suggestion\n```")]
    p = tmp_path / "page.json"
    p.write_text(json.dumps(page, indent=2))
    recs = run(p)
    assert [r.ref for r in recs] == ["element 1", "element 2", "element 3"]
    assert recs[0].items[0].after == "z = THREE"
    assert recs[1].reason == "no_suggestion"
    assert recs[1].raw == json.dumps(page[1], indent=2).replace("\n", "\n  ").encode()
    assert recs[2].items[0].after == ""


def test_gzip_input_of_either_kind(tmp_path):
    rows = [comment(), comment(body="```suggestion\nz = 9\n```")]
    lines = tmp_path / "c.jsonl.gz"
    lines.write_bytes(gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in rows)))
    array = tmp_path / "c.json.gz"
    array.write_bytes(gzip.compress(orjson.dumps(rows)))
    for p, unit in ((lines, "line"), (array, "element")):
        recs = run(p)
        assert [r.ref for r in recs] == [f"{unit} 1", f"{unit} 2"]
        assert [r.items[0].after for r in recs] == ["z = THREE", "z = 9"]


def test_pretty_printed_single_object(tmp_path):
    p = tmp_path / "one.json"
    p.write_text(json.dumps(comment(), indent=2))
    (rec,) = run(p)
    assert rec.ref == "value 1" and rec.items[0].after == "z = THREE"


def test_array_element_that_does_not_parse_is_one_error(tmp_path):
    good = orjson.dumps(comment())
    p = tmp_path / "page.json"
    p.write_bytes(b"[" + good + b', {"body": "caf\xe9"}, {"a": nul}, ' + good + b"]")
    recs = run(p)
    assert [r.ref for r in recs] == ["element 1", "element 2", "element 3", "element 4"]
    at = len(good) + 3  # the first element, ", " and the "["
    assert recs[1].reason == f"invalid UTF-8: invalid continuation byte at byte {at + 13}"
    assert recs[2].reason.startswith("malformed JSON: invalid literal")
    assert recs[2].reason.endswith(f" at byte {at + 24}")  # past element 2, ", " and {"a":
    assert isinstance(recs[0], Record) and isinstance(recs[3], Record)


def test_truncated_array_stops_with_one_error(tmp_path):
    data = orjson.dumps([comment(), comment()])
    p = tmp_path / "page.json"
    p.write_bytes(data[:-40])
    recs = run(p)
    assert isinstance(recs[0], Record)
    start = len(orjson.dumps(comment())) + 2
    assert recs[1].ref == "element 2"
    assert recs[1].reason == (
        f"malformed JSON array: file ends inside element 2 at byte {start}; rest of file not read"
    )


def test_broken_array_structure_names_the_offset(tmp_path):
    good = orjson.dumps(comment(body="```suggestion\nz = 4\n```\n" + "y" * 3000))
    p = tmp_path / "page.json"
    data = b"[" + good + b" " + good + b"]"
    p.write_bytes(data)
    recs = run(p)
    assert isinstance(recs[0], Record)
    at = len(good) + 2
    assert recs[1].reason == (
        f"malformed JSON array: expected ',' or ']', found '{{' at byte {at}; rest of file not read"
    )
    assert recs[1].ref == "element 2"
    assert recs[1].raw == data[at - 200 : at + 200]  # the text around the fault


def test_truncated_gzip_keeps_what_came_before(tmp_path):
    rows = [comment(id=i, body=f"{'x' * 40 * i}\n```suggestion\nz = {i}\n```") for i in range(500)]
    data = gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(data[: len(data) // 2])
    recs = run(p)
    assert all(isinstance(r, Record) for r in recs[:-1]) and len(recs) > 100
    assert [r.items[0].after for r in recs[:-1]] == [f"z = {i}" for i in range(len(recs) - 1)]
    assert recs[-1].ref == f"line {len(recs)}"
    assert recs[-1].reason.startswith("unreadable input: Compressed file ended")
    assert recs[-1].reason.endswith("; rest of file not read")


def test_array_element_too_large_stops_the_file(tmp_path):
    rows = [comment(), comment(body="x" * 50_000), comment()]
    data = orjson.dumps(rows)
    p = tmp_path / "page.json"
    p.write_bytes(data)
    recs = run(p, max_record_bytes=10_000)
    assert len(recs) == 2 and isinstance(recs[0], Record)
    start = len(orjson.dumps(rows[0])) + 2
    assert recs[1].ref == "element 2"
    assert recs[1].reason == (
        f"record too large: element 2 at byte {start} is over 10000 bytes; "
        f"rest of file not read ({len(data) - start} bytes)"
    )


def test_missing_file_is_unreadable(tmp_path):
    with pytest.raises(SourceUnreadable, match="missing.json"):
        run(tmp_path / "missing.json")


def test_progress_covers_the_file(tmp_path):
    p = write_lines(tmp_path, [comment(), comment(), b"oops\n"])
    totals, steps = [], []
    recs = list(
        read(
            SourceConfig(kind="github", path=str(p)),
            p,
            IngestContext(set_total=totals.append, advance=steps.append),
        )
    )
    assert len(recs) == 3
    assert totals == [p.stat().st_size] and sum(steps) == p.stat().st_size

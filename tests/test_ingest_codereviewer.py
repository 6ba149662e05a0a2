"""The CodeReviewer source: refinement and comment records in, review edits out."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson

from pipeline.ingest.base import IngestContext, Record, RecordError
from pipeline.ingest.sources import codereviewer
from pipeline.ingest.sources.codereviewer import hunk_sides, strip_diff_prefixes
from tests.conftest import read_source

OLDF = "import os\n" * 500  # the whole old file: must never be kept

PATCH = (
    "@@ -10,9 +10,10 @@ class Store:\n"
    "     def __init__(self, path):\n"
    "         self.path = path\n"
    "         self.cache = {}\n"
    "         self.lock = None\n"
    "-        self.open = False\n"
    "+        self.opened = False\n"
    "+        self.size = 0\n"
    " \n"
    "     def get(self, key):\n"
    "-        return self.cache[key]\n"
    "+        return self.cache.get(key)\n"
    "\\ No newline at end of file\n"
)


def write(tmp_path: Path, rows: list, name: str = "cr.jsonl") -> Path:
    p = tmp_path / name
    p.write_bytes(b"".join(r if isinstance(r, bytes) else orjson.dumps(r) + b"\n" for r in rows))
    return p


def run(path: Path, **kw) -> list[Record | RecordError]:
    return read_source(codereviewer, path, kind="codereviewer", **kw)


def one(tmp_path: Path, row, **kw):
    (rec,) = run(write(tmp_path, [row]), **kw)
    return rec


def test_refinement_record_with_diff_prefixes(tmp_path):
    row = {
        "old_hunk": "@@ -1,2 +1,3 @@",
        "oldf": OLDF,
        "hunk": "...",
        "comment": "Use .get() here, [0] raises IndexError.\r\nThanks!",
        "ids": [1, 2, 3],
        "repo": "octo/widgets",
        "ghid": 4242,
        "id": 7,
        "old": "@@ -1,3 +1,3 @@\r\n def get_user(uid):\r\n+    u = User.filter(id=uid)[0]\r\n"
        "+    return u\r\n",
        "new": " def get_user(uid):\n+    return User.get(id=uid)\n",
        "lang": "py",
    }
    rec = one(tmp_path, row)
    assert isinstance(rec, Record) and rec.ref == "line 1"
    (it,) = rec.items
    assert it.before == "def get_user(uid):\n    u = User.filter(id=uid)[0]\n    return u"
    assert it.after == "def get_user(uid):\n    return User.get(id=uid)"
    assert it.comment == "Use .get() here, [0] raises IndexError.\nThanks!"
    assert (it.repo, it.change, it.path, it.language) == ("octo/widgets", "4242", "", "py")
    assert it.context == "" and (it.lines_removed, it.lines_added) == (None, None)
    assert OLDF not in repr(it)


def test_refinement_without_prefixes_is_left_as_it_is(tmp_path):
    old = "    if len(items) == 0:\n        return\n"  # space-led, but plain code
    new = "n = (\n+1\n)\nif not items:\n    return"  # a '+1' line, but not uniform: untouched
    rec = one(tmp_path, {"old": old, "new": new, "comment": "simpler", "id": 9}, repo="a/b")
    (it,) = rec.items
    assert it.before == "    if len(items) == 0:\n        return"
    assert it.after == new
    assert (it.repo, it.change, it.language) == ("a/b", "9", "")


def test_prefix_stripping_is_decided_per_record():
    # only spaces on one side: stripped because its pair is diff text
    assert strip_diff_prefixes(" a\n b", " a\n+c") == ("a\nb", "a\nc")
    assert strip_diff_prefixes(" a\n b", " a\n c") == (" a\n b", " a\n c")
    # an empty line is an unchanged empty line
    assert strip_diff_prefixes("+a\n\n+b", "+a") == ("a\n\nb", "a")
    # YAML-ish plain code with a non-diff line is not touched
    assert strip_diff_prefixes("- a\nb: 1", "- a\nb: 2") == ("- a\nb: 1", "- a\nb: 2")


def test_comment_record_recovers_both_sides_of_the_hunk(tmp_path):
    row = {
        "patch": PATCH,
        "msg": "Why rename `open`?",
        "oldf": OLDF,
        "lang": "py",
        "proj": "octo/store",
        "id": 31,
        "y": 1,
    }
    rec = one(tmp_path, row)
    assert isinstance(rec, Record) and rec.ref == "line 1"
    (it,) = rec.items
    assert (
        it.context == "        self.path = path\n        self.cache = {}\n        self.lock = None"
    )
    assert it.before == (
        "        self.open = False\n\n    def get(self, key):\n        return self.cache[key]"
    )
    assert it.after == (
        "        self.opened = False\n        self.size = 0\n\n    def get(self, key):\n"
        "        return self.cache.get(key)"
    )
    assert (it.lines_removed, it.lines_added) == (2, 3)
    assert it.comment == "Why rename `open`?"
    assert (it.repo, it.change, it.path, it.language) == ("octo/store", "31", "", "py")
    assert OLDF not in repr(it)


def test_comment_record_context_lines_option_and_missing_msg(tmp_path):
    rec = one(tmp_path, {"patch": PATCH, "oldf": OLDF, "y": 0}, context_lines=1, repo="d/r")
    (it,) = rec.items
    assert it.context == "        self.lock = None"
    assert (it.comment, it.repo, it.change) == ("", "d/r", "")


def test_hunk_sides_without_header_and_with_file_headers():
    assert hunk_sides("-a\n+b") == ([], ["a"], ["b"], 1, 1)
    patch = "--- a/f.py\n+++ b/f.py\n@@ -1,2 +1,1 @@\n x\n-y"
    assert hunk_sides(patch) == (["x"], ["y"], [], 1, 0)


def test_a_patch_without_changes_is_skipped_without_oldf(tmp_path):
    row = {"patch": "@@ -1,2 +1,2 @@\n a\n b", "msg": "nit", "oldf": OLDF, "id": 5}
    rec = one(tmp_path, row)
    assert isinstance(rec, RecordError) and rec.severity == "skip"
    assert rec.reason == "no_change: the patch has no added or removed line"
    assert "nit" in rec.raw and "oldf" not in rec.raw


def test_bad_lines_among_good_ones(tmp_path):
    good = {"old": "+a = 1", "new": "+a = 2", "comment": "bump"}
    p = write(
        tmp_path,
        [
            good,
            b"{not json\n",
            b"[1, 2]\n",
            {"old": 3, "new": "x", "comment": "c"},
            {"old": "a", "new": "b"},
            {"foo": 1, "bar": 2},
            b'{"old": "\xff", "new": "b", "comment": "c"}\n',
            {"patch": "-a\n+b", "msg": 1},
            {"old": "a", "new": "b", "comment": "c", "ghid": [1]},
            b"\n",
            {**good, "comment": "last", "oldf": OLDF, "lang": 3},
            {**good, "comment": "again"},
        ],
    )
    recs = run(p)
    assert [r.items[0].comment for r in recs if isinstance(r, Record)] == ["bump", "again"]
    errs = {r.ref: r.reason for r in recs if isinstance(r, RecordError)}
    assert errs["line 2"].startswith("malformed JSON: ")
    assert errs["line 3"] == "not an object: got array"
    assert errs["line 4"] == "wrong type: old is int, expected string"
    assert errs["line 5"] == "missing field: comment"
    assert errs["line 6"].startswith("unknown record layout: keys bar, foo;")
    assert errs["line 7"].startswith("invalid UTF-8: ")
    assert errs["line 8"] == "wrong type: msg is int, expected string"
    assert errs["line 9"] == "wrong type: ghid is array, expected string or integer"
    assert errs["line 11"] == "wrong type: lang is int, expected string"
    assert len(recs) == 11  # every non-blank line is accounted for
    (last,) = [r for r in recs if r.ref == "line 11"]
    assert "oldf" not in last.raw and '"last"' in last.raw


def test_gzip_and_a_too_large_record(tmp_path):
    rows = [
        {"old": "+a", "new": "+b", "comment": "one"},
        {"old": "+a", "new": "+b", "comment": "x" * 5000},
        {"old": "+a", "new": "+c", "comment": "two"},
    ]
    plain = write(tmp_path, rows)
    gz = tmp_path / "cr.jsonl.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    recs = run(gz, ctx=IngestContext(max_record_bytes=1000))
    assert [r.ref for r in recs] == ["line 1", "line 2", "line 3"]
    assert [r.items[0].after for r in recs if isinstance(r, Record)] == ["b", "c"]
    assert recs[1].reason.startswith("record too large: ")


def test_empty_file_is_one_skip(tmp_path):
    (rec,) = run(write(tmp_path, [b"\n\n"]))
    assert isinstance(rec, RecordError) and rec.severity == "skip"
    assert rec.reason.startswith("empty_source")

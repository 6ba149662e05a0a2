"""The git source on a tiny real repository built here with fixed authors and dates."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext, Record, RecordError, SourceUnreadable
from pipeline.ingest.sources import git as gitsrc
from tests.conftest import read_source

APP_V1 = "".join(f"line{i}\n" for i in range(1, 11))
NOTES = "".join(f"note {i}: some words here\n" for i in range(1, 11))
PRECOMMIT = (
    "repos:\n-   repo: https://github.com/pre-commit/pre-commit-hooks\n"
    "    rev: v4.5.0\n    hooks:\n    -   id: trailing-whitespace\n"
)
BOT = ("pre-commit-ci[bot]", "66853113+pre-commit-ci[bot]@users.noreply.github.com")


class Repo:
    """A repository whose commits get increasing fixed dates, so every sha is reproducible."""

    def __init__(self, path: Path):
        self.path = path
        self.tick = 0
        path.mkdir()
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str, author: tuple[str, str] = ("Ada", "ada@example.com")) -> str:
        date = f"@{1_700_000_000 + self.tick * 60} +0000"
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": author[0],
            "GIT_AUTHOR_EMAIL": author[1],
            "GIT_COMMITTER_NAME": "Ada",
            "GIT_COMMITTER_EMAIL": "ada@example.com",
            "GIT_AUTHOR_DATE": date,
            "GIT_COMMITTER_DATE": date,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
        cmd = [
            "git",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.autocrlf=false",
            "-C",
            str(self.path),
        ]
        out = subprocess.run([*cmd, *args], env=env, check=True, capture_output=True)
        return out.stdout.decode().strip()

    def write(self, name: str, data: str | bytes) -> None:
        p = self.path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)

    def commit(self, msg: str, author: tuple[str, str] = ("Ada", "ada@example.com")) -> str:
        self.tick += 1
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", msg, author=author)
        return self.git("rev-parse", "HEAD")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    r = Repo(tmp_path_factory.mktemp("git") / "demo")
    sha = {}
    r.write("app.py", APP_V1)
    r.write("notes.txt", NOTES)
    r.write("gone.txt", "bye\nfor now\n")
    r.write("blank.py", "a = 1\n\nb = 2\n")
    r.write(".pre-commit-config.yaml", PRECOMMIT)
    sha["root"] = r.commit("Initial commit")
    r.write("app.py", APP_V1.replace("line3\n", "LINE3\n").replace("line6\n", "LINE6\nextra\n"))
    sha["two_runs"] = r.commit("Shout twice")
    r.write(".pre-commit-config.yaml", PRECOMMIT.replace("v4.5.0", "v5.0.0"))
    sha["bump"] = r.commit("[pre-commit.ci] pre-commit autoupdate", author=BOT)
    r.write("blank.py", "a = 1\nb = 2\n")
    sha["blank"] = r.commit("Drop blank line")
    r.write("logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    r.write("latin.txt", "café\n".encode("latin-1"))
    sha["binary"] = r.commit("Add logo and a latin-1 file")
    (r.path / "gone.txt").unlink()
    sha["delete"] = r.commit("Delete gone.txt")
    (r.path / "notes.txt").unlink()
    r.write("docs/notes.md", NOTES.replace("note 5:", "NOTE 5:"))
    sha["rename"] = r.commit("Move notes")
    r.write("big.txt", "".join(f"row {i}\n" for i in range(500)))
    sha["big"] = r.commit("Add a big file")
    (r.path / "app.py").chmod(0o755)
    sha["mode"] = r.commit("Make app.py executable")
    r.write('odd "name" #1.py', "x = 1\n")
    sha["odd"] = r.commit("Add an oddly named file")
    r.git("checkout", "-q", "-b", "side")
    r.write("side.py", "s = 1\r\n")
    sha["side"] = r.commit(
        "Side work", author=("Deps", "49699333+dependabot[bot]@users.noreply.github.com")
    )
    r.git("checkout", "-q", "main")
    r.write("main.py", "m = 1\n")
    sha["main"] = r.commit("Main work")
    r.tick += 1
    r.git("merge", "-q", "--no-ff", "-m", "Merge side", "side")
    sha["merge"] = r.git("rev-parse", "HEAD")
    return r.path, sha


def mine(path: Path, **kw) -> list[Record | RecordError]:
    return read_source(gitsrc, path, kind="git", **kw)


def by_ref(recs: list[Record | RecordError]) -> dict[str, Record | RecordError]:
    out = {r.ref: r for r in recs}
    assert len(out) == len(recs), "refs must be unique"
    return out


def test_root_commit_adds_whole_files(repo):
    path, sha = repo
    rec = by_ref(mine(path))[f"{sha['root']}:app.py:0"]
    (it,) = rec.items
    assert (it.before, it.after, it.context) == ("", APP_V1.rstrip("\n"), "")
    assert (it.lines_removed, it.lines_added) == (0, 10)
    assert it.repo == "demo" and it.change == sha["root"] and it.comment == "Initial commit"
    assert it.author == "Ada" and it.author_is_bot is False
    assert it.created_at == datetime.fromtimestamp(1_700_000_060, timezone.utc)


def test_two_change_runs_in_one_hunk_give_two_items(repo):
    path, sha = repo
    rec = by_ref(mine(path))[f"{sha['two_runs']}:app.py:0"]
    first, second = rec.items
    assert (first.before, first.after) == ("line3", "LINE3")
    assert first.context == "line1\nline2\n...\nline4\nline5"
    assert (second.before, second.after) == ("line6", "LINE6\nextra")
    assert (second.lines_removed, second.lines_added) == (1, 2)
    assert second.context == "line4\nline5\n...\nline7\nline8\nline9"
    assert first.comment == "Shout twice" and first.path == "app.py"


def test_pre_commit_bump_by_bot(repo):
    path, sha = repo
    (it,) = by_ref(mine(path))[f"{sha['bump']}:.pre-commit-config.yaml:0"].items
    assert (it.before, it.after) == ("    rev: v4.5.0", "    rev: v5.0.0")
    assert it.author == "pre-commit-ci[bot]" and it.author_is_bot is True
    assert it.comment == "[pre-commit.ci] pre-commit autoupdate"


def test_bot_detected_from_email_alone(repo):
    path, sha = repo
    (it,) = by_ref(mine(path))[f"{sha['side']}:side.py:0"].items
    assert it.author == "Deps" and it.author_is_bot is True
    assert it.after == "s = 1"  # CRLF normalised


def test_removed_blank_line(repo):
    path, sha = repo
    (it,) = by_ref(mine(path))[f"{sha['blank']}:blank.py:0"].items
    assert (it.before, it.after, it.lines_removed, it.lines_added) == ("", "", 1, 0)
    assert it.context == "a = 1\n...\nb = 2"


def test_binary_and_non_utf8_files_are_counted_skips(repo):
    path, sha = repo
    recs = by_ref(mine(path))
    png = recs[f"{sha['binary']}:logo.png:binary"]
    latin = recs[f"{sha['binary']}:latin.txt:non_utf8"]
    assert isinstance(png, RecordError) and (png.reason, png.severity) == ("binary", "skip")
    assert isinstance(latin, RecordError) and (latin.reason, latin.severity) == ("non_utf8", "skip")
    assert b"caf\xe9" in latin.raw
    assert not [r for r in recs if r.startswith(sha["binary"]) and r.endswith(":0")]


def test_deletion_rename_and_mode_change(repo):
    path, sha = repo
    recs = by_ref(mine(path))
    (gone,) = recs[f"{sha['delete']}:gone.txt:0"].items
    assert (gone.path, gone.before, gone.after) == ("gone.txt", "bye\nfor now", "")
    (moved,) = recs[f"{sha['rename']}:docs/notes.md:0"].items
    assert (moved.before, moved.after) == ("note 5: some words here", "NOTE 5: some words here")
    assert [r for r in recs if r.startswith(sha["rename"])] == [f"{sha['rename']}:docs/notes.md:0"]
    assert not [r for r in recs if r.startswith(sha["mode"])]  # nothing to account for


def test_huge_hunk_is_skipped_with_its_size(repo):
    path, sha = repo
    err = by_ref(mine(path))[f"{sha['big']}:big.txt:0"]
    assert isinstance(err, RecordError) and err.severity == "skip"
    assert err.reason == "hunk_too_large: 500 changed lines > 400"
    ok = by_ref(mine(path, max_hunk_lines=500))[f"{sha['big']}:big.txt:0"]
    assert isinstance(ok, Record) and ok.items[0].lines_added == 500


def test_quoted_path_and_hash_kept_out_of_the_ref(repo):
    path, sha = repo
    recs = by_ref(mine(path))
    (it,) = recs[f'{sha["odd"]}:odd "name" %231.py:0'].items
    assert it.path == 'odd "name" #1.py' and it.after == "x = 1"
    assert all("#" not in ref for ref in recs)
    assert gitsrc._unquote(b'"a/\\303\\251 \\"q\\"\\t.txt"') == 'a/é "q"\t.txt'.encode()


def test_merges_not_mined_and_progress_counts_commits(repo):
    path, sha = repo
    totals, steps = [], []
    ctx = IngestContext(set_total=totals.append, advance=steps.append)
    recs = mine(path, ctx=ctx)
    assert not [r for r in recs if r.ref.startswith(sha["merge"])]
    assert {r.ref.split(":")[0] for r in recs} >= {sha["side"], sha["main"]}
    assert totals == [len(sha) - 1] and sum(steps) == len(sha) - 1


def test_max_commits_keeps_the_newest(repo):
    path, sha = repo
    recs = mine(path, max_commits=1)
    assert [r.ref for r in recs] == [f"{sha['main']}:main.py:0"]
    older = mine(path, rev=sha["rename"])
    assert not [r for r in older if r.ref.startswith(sha["big"])]


def test_deterministic(repo):
    path, _ = repo
    assert mine(path) == mine(path)


def test_unreadable_sources(tmp_path, repo):
    path, _ = repo
    (tmp_path / "plain").mkdir()
    with pytest.raises(SourceUnreadable, match="not a git repository"):
        mine(tmp_path / "plain")
    with pytest.raises(SourceUnreadable, match="no such folder"):
        mine(tmp_path / "missing")
    with pytest.raises(SourceUnreadable, match="'nope' is not a commit"):
        mine(path, rev="nope")


def test_empty_repository_gives_nothing(tmp_path):
    r = Repo(tmp_path / "empty")
    warnings = []
    assert mine(r.path, ctx=IngestContext(warn=warnings.append)) == []
    assert warnings and "no commits" in warnings[0]


def test_symlink_is_a_counted_skip(tmp_path):
    r = Repo(tmp_path / "links")
    r.write("a.py", "x = 1\n")
    os.symlink("a.py", r.path / "b.py")
    sha = r.commit("Add a link")
    recs = by_ref(mine(r.path))
    assert recs[f"{sha}:b.py:symlink"].reason == "symlink"
    assert isinstance(recs[f"{sha}:a.py:0"], Record)


def test_source_config_path_resolution_uses_folder_name(repo):
    path, _ = repo
    spec = SourceConfig(kind="git", path=str(path), repo="org/demo")
    (first, *_) = gitsrc.read(spec, path, IngestContext())
    assert first.items[0].repo == "org/demo"


def test_long_line_and_type_change_stay_accounted(tmp_path):
    r = Repo(tmp_path / "odd")
    r.write("min.js", "x" * 500 + "\n")
    r.write("c.py", "c = 1\n")
    first = r.commit("Add minified js")
    (r.path / "c.py").unlink()
    os.symlink("min.js", r.path / "c.py")  # a type change: a deletion and an addition
    second = r.commit("Replace c.py by a link")
    recs = by_ref(mine(r.path, ctx=IngestContext(max_record_bytes=100)))
    assert recs[f"{first}:min.js:0"].reason == "hunk_too_large: over 100 bytes"
    (gone,) = recs[f"{second}:c.py:0"].items
    assert (gone.before, gone.after) == ("c = 1", "")
    assert recs[f"{second}:c.py:symlink"].severity == "skip"

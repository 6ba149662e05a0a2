"""Git history: a local repository's commits -> one record per diff hunk.

One `git log --patch` process is streamed line by line as bytes, so memory stays bounded by
one file's diff in one commit, whatever the size of the history. A hunk gives one item per
contiguous change run (consecutive '-'/'+' lines), with the commit subject as the comment.

Commits come newest first, git's own order (`--reverse` would make git walk the whole history
before printing anything), so `max_commits = N` mines the newest N. Merges are not mined:
their changes are already in the commits they merge. Every setting that shapes the patch is
pinned on the command line, so the records do not depend on the user's git config.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext, RawItem, Record, RecordError, SourceUnreadable
from pipeline.ingest.gitpaths import _diff_path, _header_path, _unquote
from pipeline.secrets.masking import mask

EXPECTS = "folder"  # a repository's working tree or .git folder
remote = False  # git reads a local repository

__all__ = ["_diff_path", "_header_path", "_unquote", "read"]

MARK = b"\x1e"  # starts our commit line; no diff line can start with it
FORMAT = "%x1e%H%x1f%an%x1f%ae%x1f%at%x1f%s"
PINNED_CONFIG = (
    "core.quotePath=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "diff.suppressBlankEmpty=false",
    "diff.interHunkContext=0",
    "diff.algorithm=myers",
    "diff.indentHeuristic=true",
    "diff.submodule=short",
    "diff.renameLimit=1000",
    "log.showSignature=false",
    "log.showRoot=true",
    "i18n.logOutputEncoding=UTF-8",
)
# Variables that would point git at another repository or inject config.
_DROP_ENV = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_NAMESPACE",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
)
_HUNK_RE = re.compile(rb"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_SPECIAL_MODES = {b"120000": "symlink", b"160000": "submodule"}
_HEADS = (MARK, b"diff --git ", b"@@ ")


def read(spec: SourceConfig, path: Path, ctx: IngestContext) -> Iterator[Record | RecordError]:
    """Yield one Record or RecordError per hunk (or per skipped file) of the history at `rev`."""
    if spec.context_lines < 0 or spec.max_commits < 0:
        raise ValueError("context_lines and max_commits must be >= 0")
    sha = _resolve(path, spec.rev or "HEAD", ctx)
    if sha is None:
        return
    total = int(_git(path, "rev-list", "--count", "--no-merges", sha).stdout.strip() or 0)
    ctx.set_total(min(total, spec.max_commits) if spec.max_commits else total)
    args = [
        "log",
        "--no-merges",
        f"--format={FORMAT}",
        "--patch",
        f"--unified={spec.context_lines}",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--find-renames",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        "--encoding=UTF-8",
    ]
    if spec.max_commits:
        args.append(f"--max-count={spec.max_commits}")
    miner = _Miner(spec, ctx, spec.repo or _repo_name(path))
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            _cmd(path, *args, sha, "--"), stdout=subprocess.PIPE, stderr=err, env=_env()
        )
        assert proc.stdout is not None  # stdout=PIPE
        try:
            yield from miner.mine(_Lines(proc.stdout, ctx.max_record_bytes))
            rc = proc.wait()
        finally:
            if proc.poll() is None:  # the consumer stopped early
                proc.kill()
            proc.stdout.close()
            proc.wait()
        if rc != 0:
            err.seek(0)
            raise SourceUnreadable(f"{path}: git log failed: {_first_line(err.read())}")


def _resolve(path: Path, rev: str, ctx: IngestContext) -> str | None:
    """The commit sha to mine, None for a repository without commits; else SourceUnreadable."""
    if not path.exists():
        raise SourceUnreadable(f"{path}: no such folder")
    if not path.is_dir():
        raise SourceUnreadable(f"{path}: not a folder; a git source reads a repository folder")
    if rev.startswith("-"):
        raise SourceUnreadable(f"{path}: rev {rev!r} must not start with '-'")
    r = _git(path, "rev-parse", "--git-dir")
    if r.returncode != 0:
        raise SourceUnreadable(f"{path}: {_first_line(r.stderr) or 'not a git repository'}")
    r = _git(path, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if r.returncode == 0:
        return r.stdout.decode().strip()
    if not _git(path, "rev-list", "-n", "1", "--all").stdout.strip():
        ctx.warn(f"{path}: the repository has no commits")
        ctx.set_total(0)
        return None
    raise SourceUnreadable(f"{path}: rev {rev!r} is not a commit in this repository")


def _cmd(path: Path, *args: str) -> list[str]:
    pinned = [x for kv in PINNED_CONFIG for x in ("-c", kv)]
    return ["git", *pinned, "-C", str(path), *args]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    env["LC_ALL"] = "C"
    return env


def _git(path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(_cmd(path, *args), capture_output=True, env=_env(), check=False)
    except FileNotFoundError:
        raise SourceUnreadable(f"{path}: the git command is not installed") from None


def _when(at: str) -> datetime | None:
    """The author time; None when it is not a time in years 1..9999 (a crafted commit)."""
    try:
        return datetime.fromtimestamp(int(at), timezone.utc) if at.isdigit() else None
    except (OverflowError, OSError, ValueError):
        return None


def _first_line(stderr: bytes) -> str:
    text = stderr.decode("utf-8", "replace").strip()
    return text.splitlines()[0].removeprefix("fatal: ") if text else ""


def _repo_name(path: Path) -> str:
    p = path.resolve()
    if p.name == ".git":
        p = p.parent
    return p.name.removesuffix(".git")


class _Lines:
    """git's output as lines without the newline. A line over `limit` bytes is cut there (the
    rest is read and dropped, `cut` is set) so one huge minified line cannot fill memory;
    `size` is the last line's whole length."""

    def __init__(self, f, limit: int):
        self.f, self.limit = f, limit
        self.back: bytes | None = None
        self.cut = False
        self.size = 0

    def next(self) -> bytes | None:
        if self.back is not None:
            line, self.back = self.back, None
            return line
        line = self.f.readline(self.limit + 1)
        if not line:
            return None
        self.cut = False
        if line.endswith(b"\n"):
            self.size = len(line) - 1
            return line[:-1]
        self.size = len(line)
        if len(line) > self.limit:
            self.cut = True
            while chunk := self.f.readline(1 << 20):
                self.size += len(chunk) - chunk.endswith(b"\n")
                if chunk.endswith(b"\n"):
                    break
            return line[: self.limit]
        return line

    def push(self, line: bytes | None) -> None:
        self.back = line


@dataclass
class _Commit:
    sha: str
    author: str
    is_bot: bool
    when: datetime | None
    subject: str
    subject_bytes: int  # its whole size: the line holding it is cut at the limit
    line_bytes: int  # the commit line's whole size; over the limit, the subject was cut
    used: set[str]  # refs given so far, so a path seen twice (a type change) stays unique
    hunks: dict[str, int]  # path -> next hunk index


@dataclass
class _Hunk:
    header: bytes
    rows: list[tuple[str, str]] | None  # (" " | "-" | "+", text); None: too large to keep
    changed: int
    size: int
    short: bool = False  # fewer lines than its header says: git's output was cut


class _Miner:
    def __init__(self, spec: SourceConfig, ctx: IngestContext, repo: str):
        self.spec, self.ctx, self.repo = spec, ctx, repo
        self.max_changed = spec.max_hunk_lines if spec.max_hunk_lines > 0 else None

    def mine(self, lines: _Lines) -> Iterator[Record | RecordError]:
        commit = None
        while (line := lines.next()) is not None:
            if line.startswith(MARK):
                commit = self._commit(line, lines.size if lines.cut else len(line))
                self.ctx.advance(1)
            elif line.startswith(b"diff --git ") and commit is not None:
                yield from self._file(commit, line, lines)

    def _commit(self, line: bytes, size: int) -> _Commit:
        sha, name, email, at, subject = (
            line[1:].decode("utf-8", "replace").split("\x1f", 4) + [""] * 4
        )[:5]
        head = line.split(b"\x1f", 4)[:4]  # the fields before the subject, each + a separator
        subject_bytes = max(size - sum(len(f) + 1 for f in head), 0)
        local = re.sub(r"^\d+\+", "", email.split("@", 1)[0])  # GitHub "123+name@users..."
        is_bot = self.ctx.is_bot(name) or self.ctx.is_bot(local)
        when = _when(at)
        return _Commit(sha, name, is_bot, when, subject, subject_bytes, size, set(), {})

    def _file(self, c: _Commit, head: bytes, lines: _Lines) -> Iterator[Record | RecordError]:
        """One file's diff: its hunks, or one skip for the whole file (binary, non-UTF-8 ...)."""
        old = new = None
        kind = ""  # "binary" | "symlink" | "submodule"
        bad: bytes | None = None  # the first line that is not UTF-8
        while (line := lines.next()) is not None and not line.startswith(_HEADS):
            if line.startswith(b"--- "):
                old = _diff_path(line[4:], b"a/")
            elif line.startswith(b"+++ "):
                new = _diff_path(line[4:], b"b/")
            elif line.startswith((b"rename from ", b"copy from ")):
                old = _unquote(line.split(b" ", 2)[2])
            elif line.startswith((b"rename to ", b"copy to ")):
                new = _unquote(line.split(b" ", 2)[2])
            elif line.startswith(b"Binary files "):
                kind = "binary"
            elif line.startswith((b"new file mode ", b"deleted file mode ", b"index ")):
                kind = _SPECIAL_MODES.get(line.rsplit(b" ", 1)[-1], kind)
        raw_path = new or old or _header_path(head)
        try:
            path = raw_path.decode()
        except UnicodeDecodeError:
            path, bad = raw_path.decode("utf-8", "backslashreplace"), head
        # "#" is the batcher's; a secret in a path is masked here, so refs stay unique
        ref_path = mask(path)[0].replace("%", "%25").replace("#", "%23")
        out: list[Record | RecordError] = []
        n_hunks = 0
        while line is not None and line.startswith(b"@@ "):
            idx = c.hunks.get(ref_path, 0)
            c.hunks[ref_path] = idx + 1
            ref = f"{c.sha}:{ref_path}:{idx}"
            c.used.add(ref)
            n_hunks += 1
            hunk, bad_line, line = self._hunk(line, lines)
            if bad is None and bad_line is not None:
                bad = head + b"\n" + bad_line
            if bad is None and not kind:
                out.append(self._record(c, ref, path, hunk))
        lines.push(line)
        if not n_hunks and bad is None and kind != "binary":
            return  # a pure rename or mode change, an empty file: nothing to account for
        tag = "non_utf8" if bad is not None else kind
        if tag:
            ref = f"{c.sha}:{ref_path}:{tag}"
            n = 1
            while ref in c.used:
                n += 1
                ref = f"{c.sha}:{ref_path}:{tag}{n}"
            c.used.add(ref)
            yield RecordError(ref, bad[:1024] if bad is not None else head, tag, "skip")
        else:
            yield from out

    def _hunk(self, header: bytes, lines: _Lines) -> tuple[_Hunk, bytes | None, bytes | None]:
        """Read one hunk by its line counts; returns it, its first non-UTF-8 line, the next line."""
        m = _HUNK_RE.match(header)
        old_n = int(m[1]) if m and m[1] is not None else 1
        new_n = int(m[2]) if m and m[2] is not None else 1
        hunk = _Hunk(header, [], 0, 0)
        bad = None
        limit = self.ctx.max_record_bytes
        while (old_n > 0 or new_n > 0) and (line := lines.next()) is not None:
            tag = line[:1]
            if tag == b"\\":  # "\ No newline at end of file": not content
                continue
            if tag == b"-":
                old_n -= 1
            elif tag == b"+":
                new_n -= 1
            elif tag in (b" ", b""):
                old_n, new_n = old_n - 1, new_n - 1
            else:  # not a hunk line: the hunk is shorter than its header says
                lines.push(line)
                break
            sign = tag.decode() or " "
            hunk.changed += sign != " "
            text = line[1:].removesuffix(b"\r")
            hunk.size += len(text) + 1 + (limit if lines.cut else 0)
            try:
                s = text.decode()
            except UnicodeDecodeError:
                bad = bad or line
                s = ""
            too_big = self.max_changed is not None and hunk.changed > self.max_changed
            if too_big or hunk.size > limit:
                hunk.rows = None
            elif hunk.rows is not None:
                hunk.rows.append((sign, s))
        hunk.short = old_n > 0 or new_n > 0
        line = lines.next()
        while line is not None and line.startswith(b"\\"):
            line = lines.next()
        return hunk, bad, line

    def _record(self, c: _Commit, ref: str, path: str, hunk: _Hunk) -> Record | RecordError:
        if hunk.short:
            return RecordError(ref, hunk.header, "malformed diff: hunk shorter than its header")
        if self.max_changed is not None and hunk.changed > self.max_changed:
            reason = f"hunk_too_large: {hunk.changed} changed lines > {self.max_changed}"
            return RecordError(ref, hunk.header, reason, "skip")
        limit = self.ctx.max_record_bytes
        if hunk.rows is None:
            return RecordError(ref, hunk.header, f"hunk_too_large: over {limit} bytes", "skip")
        # the subject is the item's comment: the record is the hunk and it (and a commit line
        # over the limit was cut, so its subject is not whole)
        size = hunk.size + c.subject_bytes
        if size > limit or c.line_bytes > limit:
            what = f"{size} bytes" if size > limit else f"its commit line {c.line_bytes} bytes"
            reason = (
                f"record too large: {what} > {limit} "
                f"(field 'comment', the commit subject: {c.subject_bytes} bytes)"
            )
            return RecordError(ref, hunk.header, reason)
        items = [
            RawItem(
                repo=self.repo,
                change=c.sha,
                path=path,
                before=before,
                after=after,
                context=context,
                comment=c.subject,
                author=c.author,
                author_is_bot=c.is_bot,
                lines_removed=removed,
                lines_added=added,
                created_at=c.when,
            )
            for before, after, removed, added, context in _runs(hunk.rows, self.spec.context_lines)
        ]
        if not items:
            return RecordError(ref, hunk.header, "malformed diff: a hunk without changes")
        return Record(ref, items)


def _runs(rows: list[tuple[str, str]], n_ctx: int) -> Iterator[tuple[str, str, int, int, str]]:
    """(before, after, removed, added, context) per run of changed lines, in hunk order.
    context = up to n_ctx unchanged lines before, "...", up to n_ctx after (as the shared
    corpora spell it); "" when there are none."""
    i = 0
    while i < len(rows):
        if rows[i][0] == " ":
            i += 1
            continue
        start = i
        while i < len(rows) and rows[i][0] != " ":
            i += 1
        j, k = start, i
        while j > 0 and rows[j - 1][0] == " " and start - j < n_ctx:
            j -= 1
        while k < len(rows) and rows[k][0] == " " and k - i < n_ctx:
            k += 1
        ctx = [t for _, t in rows[j:start]] + ["..."] + [t for _, t in rows[i:k]]
        minus = [t for sign, t in rows[start:i] if sign == "-"]
        plus = [t for sign, t in rows[start:i] if sign == "+"]
        context = "\n".join(ctx) if len(ctx) > 1 else ""
        yield "\n".join(minus), "\n".join(plus), len(minus), len(plus), context


def rev(spec: SourceConfig) -> str:
    """The revision the source's content fingerprint pins (its history up to it)."""
    return spec.rev

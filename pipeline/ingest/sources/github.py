"""GitHub pull-request review comments with ```suggestion blocks, as review edits.

Input is what the REST API returns for `GET /repos/{owner}/{repo}/pulls/comments` (or
`/pulls/{n}/comments`), saved as one JSON array (an API page), as JSON lines (one comment per
line), or as one pretty-printed object (several, whitespace-separated, are read too); gzip or
not. jsonio.iter_json_records tells the layout and reads it.

Refs: "line N" (JSON lines, 1-based), "element N" (array elements, 1-based), "value N" (the
pretty-printed case, 1-based).

A suggestion replaces the commented lines (`start_line..line`) with the block's lines. The
commented lines are not in the comment itself: they are the last lines on the commented side
of `diff_hunk`, which GitHub cuts off at the commented line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext, RawItem, Record, RecordError
from pipeline.ingest.count import count_json
from pipeline.ingest.jsonio import iter_json_records
from pipeline.storage import Location

EXPECTS = "file"  # one JSON file of review comments (a REST dump)

# --- review comments -> items -------------------------------------------------------------


class CommentError(Exception):
    """A comment that gives no item: `reason` and `severity` go into its RecordError."""

    def __init__(self, reason: str, severity: str = "error"):
        super().__init__(reason)
        self.reason, self.severity = reason, severity


_OPEN_BACKTICK = re.compile(r"^(`{3,})([^`]*)$")  # CommonMark: no backtick in the info string
_OPEN_TILDE = re.compile(r"^(~{3,})(.*)$")
_CLOSE = re.compile(r"^(`{3,}|~{3,})[ \t]*$")
_BLANK_RUNS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_PR_API_URL = re.compile(r"/repos/([^/]+)/([^/]+)/pulls/(\d+)(?:$|[/?#])")
_PR_HTML_URL = re.compile(r"^https?://[^/]+/([^/]+)/([^/]+)/pull/(\d+)(?:$|[/?#])")


def split_suggestions(body: str) -> tuple[list[list[str]], str]:
    """The lines of each ```suggestion block, and the body with those blocks removed.

    A suggestion opens with a line of 3+ backticks then `suggestion` and closes with a line of
    at least as many backticks. Other fenced blocks are passed over whole, so a ```suggestion
    quoted inside one is not taken. The rest is stripped and runs of blank lines become one.
    """
    lines = body.split("\n")
    blocks: list[list[str]] = []
    kept: list[str] = []
    i = 0
    while i < len(lines):
        m = _OPEN_BACKTICK.match(lines[i]) or _OPEN_TILDE.match(lines[i])
        if not m:
            kept.append(lines[i])
            i += 1
            continue
        fence = m.group(1)
        j = i + 1
        while j < len(lines) and not _closes(lines[j], fence):
            j += 1
        if fence[0] == "`" and m.group(2).strip() == "suggestion":
            if j == len(lines):
                raise CommentError(f"unclosed suggestion block: opened on body line {i + 1}")
            blocks.append(lines[i + 1 : j])
        else:
            kept.extend(lines[i : j + 1])
        i = j + 1
    comment = _BLANK_RUNS.sub("\n\n", "\n".join(kept).strip())
    return blocks, comment


def _closes(line: str, fence: str) -> bool:
    m = _CLOSE.match(line)
    return m is not None and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence)


def commented_lines(hunk: str, side: str, n: int, context: int = 3) -> tuple[list[str], list[str]]:
    """The last `n` lines of `hunk` on `side`, and up to `context` lines on it just before.

    Walks back from the hunk's end (GitHub cuts the hunk at the commented line), skipping the
    other side's lines and "\\ No newline at end of file"; stops at the "@@" header.
    """
    own = "+" if side == "RIGHT" else "-"
    lines = hunk.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    found: list[str] = []
    for line in reversed(lines):
        if len(found) >= n + context or line.startswith("@@"):
            break
        if line == "":  # a context line whose leading space was trimmed
            found.append("")
        elif line[0] in (own, " "):
            found.append(line[1:])
    if len(found) < n:
        raise CommentError(
            f"hunk too short: {len(found)} lines on the {side} side, the comment spans {n}"
        )
    return found[:n][::-1], found[n : n + context][::-1]


def comment_items(
    obj: Any, context_lines: int = 3, default_repo: str = "", problems: list[str] | None = None
) -> list[RawItem]:
    """The items of one review comment: one per suggestion block, or CommentError.

    A `created_at` that is not a readable time leaves the items' time null and is appended
    to `problems` ("created_at unparseable"): the comment is still an edit."""
    if not isinstance(obj, dict):
        raise CommentError(f"not an object: {type(obj).__name__}")
    body = _field(obj, "body", str, required=True).replace("\r\n", "\n")
    hunk = _field(obj, "diff_hunk", str, required=True).replace("\r\n", "\n")
    path = _field(obj, "path", str, required=True)
    line = _field(obj, "line", int)
    start_line = _field(obj, "start_line", int)
    original_line = _field(obj, "original_line", int)
    original_start_line = _field(obj, "original_start_line", int)
    side = _field(obj, "side", str) or "RIGHT"
    start_side = _field(obj, "start_side", str)
    pr_url = _field(obj, "pull_request_url", str)
    html_url = _field(obj, "html_url", str)
    reply_to = _field(obj, "in_reply_to_id", int)
    created = obj.get("created_at")
    user = _field(obj, "user", dict) or {}
    login = _field(user, "login", str, name="user.login")
    user_type = _field(user, "type", str, name="user.type")

    blocks, comment = split_suggestions(body)
    if not blocks:
        raise CommentError("reply" if reply_to is not None else "no_suggestion", "skip")

    if side not in ("RIGHT", "LEFT"):
        raise CommentError(f"wrong value: side {side!r}, expected RIGHT or LEFT")
    if start_side is not None and start_side != side:
        raise CommentError(f"mixed sides: start_side {start_side}, side {side}")
    if line is None:  # outdated: the lines the comment was made on
        line, start_line = original_line, original_start_line
        if line is None:
            raise CommentError("missing field: line (and original_line)")
    first = line if start_line is None else start_line
    if first > line:
        raise CommentError(f"wrong value: start_line {first} > line {line}")
    n = line - first + 1
    before, context = commented_lines(hunk, side, n, context_lines)

    repo, change = _repo_change(pr_url, html_url)
    item = dict(
        repo=repo or default_repo,
        change=change,
        path=path,
        before="\n".join(before),
        context="\n".join(context),
        comment=comment,
        author=login,
        author_is_bot=True if user_type == "Bot" else None,
        lines_removed=n,
        created_at=_parse_time(created, problems),
    )
    return [RawItem(after="\n".join(b), lines_added=len(b), **item) for b in blocks]


_TYPE_NAMES = {str: "str", int: "int", dict: "object"}


def _field(obj: dict, key: str, tp: type, required: bool = False, name: str = "") -> Any:
    value = obj.get(key)
    name = name or key
    if value is None:
        if required:
            raise CommentError(f"missing field: {name}")
        return None
    if not isinstance(value, tp) or (tp is int and isinstance(value, bool)):
        raise CommentError(
            f"wrong type: {name} is {type(value).__name__}, expected {_TYPE_NAMES[tp]}"
        )
    return value


def _repo_change(pr_url: str | None, html_url: str | None) -> tuple[str, str]:
    for url, pattern in ((pr_url, _PR_API_URL), (html_url, _PR_HTML_URL)):
        m = pattern.search(url) if url else None
        if m:
            return f"{m.group(1)}/{m.group(2)}", m.group(3)
    return "", ""


def _parse_time(value: Any, problems: list[str] | None) -> datetime | None:
    if value is None:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)
    except (AttributeError, ValueError):  # not a string, not ISO 8601
        problem = "created_at unparseable"
    except OverflowError:  # year 1 or 9999 shifted out of range by its offset
        problem = "created_at out of range"
    if problems is not None:
        problems.append(problem)
    return None


# --- the source ---------------------------------------------------------------------------


def read(spec: SourceConfig, path: Location, ctx: IngestContext) -> Iterator[Record | RecordError]:
    """One Record or RecordError per comment of a GitHub review-comments dump."""
    for ref, value, raw in iter_json_records(path, ctx):
        if isinstance(value, RecordError):
            yield value
            continue
        problems: list[str] = []
        try:
            yield Record(
                ref, comment_items(value, spec.context_lines, spec.repo, problems), problems
            )
        except CommentError as e:
            yield RecordError(ref, raw, e.reason, e.severity)


def count(spec: SourceConfig, path: Location, limit: int) -> tuple[int, str]:
    """The file's records by their own count (count.py), for verify."""
    return count_json(path, limit)

"""The contract every source module follows, and the batcher that turns records into Arrow.

A source module exposes `read(spec, path, ctx) -> Iterator[Record | RecordError]`. Each input
record (a JSON line, a CSV row, a git hunk, a review comment) yields exactly one of:

- `Record(ref, items)`: one or more review edits (several suggestion blocks, several change
  runs of a hunk), or
- `RecordError(ref, raw, reason, severity)`: a malformed record (`error`) or a well-formed one
  that holds no edit (`skip`: a comment without a suggestion, a binary file change ...).
- `Items(refs, fields)`: many records of one item each, field by field (a block of clean JSON
  lines read at once: no per-record step).

So ingest can account for every input record: it is in items.parquet or errors.parquet.
Sources never compute ids or language; the batcher does, once, for all of them. A record whose
secret scan passes `ingest.record_scan_budget` (pipeline.secrets.finding's Budget: work
counted, not timed) becomes an error record too, all its items with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import pyarrow as pa

from pipeline import linear
from pipeline.schema import (
    ERROR_SCHEMA,
    ITEM_SCHEMA,
    RAW_MAX_CHARS,
    SECRET_FIELDS,
    TEXT_FIELDS,
    item_id,
    language_from_path,
    normalise_language,
)
from pipeline.secrets.masking import HEAD_MARGIN, mask, mask_batch, mask_head


@dataclass(slots=True)
class RawItem:
    """A review edit as a source found it; the batcher fills id, source and language."""

    repo: str = ""
    change: str = ""
    path: str = ""
    before: str = ""
    after: str = ""
    context: str = ""
    comment: str = ""
    author: str | None = None
    author_is_bot: bool | None = None  # None: decided from `author` by the bot patterns
    lines_removed: int | None = None  # None: counted from before/after (changed_counts)
    lines_added: int | None = None
    created_at: datetime | None = None
    language: str = ""  # "" : from the path extension


@dataclass(slots=True)
class Record:
    ref: str  # where in the source: "line 12", "row 3", "<sha>:<path>:<hunk>"
    items: list[RawItem]
    # Optional fields that could not be read and were left null, as "created_at out of
    # range": counted per source in the manifest, the record is still an item.
    problems: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Items:
    """Records of one item each, read field by field (mapping.Mapper.columns): `refs[k]` is
    record k's ref, `fields[name][k]` its item's value of RawItem field `name` (every field)."""

    refs: list[str]
    fields: dict[str, list[Any]]


@dataclass(slots=True)
class RecordError:
    ref: str
    raw: str | bytes
    reason: str
    severity: str = "error"  # "error" | "skip"


class SourceUnreadable(Exception):
    """A source that cannot be read at all (missing path, not a git repository, a FIFO or a
    device ...): the message is one line naming it."""


PROBLEM_REFS = 5  # source refs kept per field problem, for the manifest and the summary

DEFAULT_BOT_PATTERNS = (
    r"\[bot\]$",
    r"^dependabot",
    r"^renovate",
    r"^pre-commit-ci",
    r"^github-actions",
    r"^greenkeeper",
    r"^snyk-bot$",
    r"^codecov",
    r"^mergify",
    r"^allcontributors",
    r"^imgbot",
    r"^web-flow$",
    r"-bot$",
)


@dataclass
class IngestContext:
    """What a source needs from the stage: limits, bot patterns, progress."""

    max_record_bytes: int = 8 * 1024 * 1024
    batch_size: int = 10_000
    bot_patterns: tuple[str, ...] = DEFAULT_BOT_PATTERNS
    scan_budget: int | None = None  # the secret-scan work one item may take (None: no bound)
    advance: Callable[[int], None] = lambda n: None  # progress in the source's own unit
    set_total: Callable[[int | None], None] = lambda n: None
    warn: Callable[[str], None] = lambda msg: None  # a problem with the whole source, once
    # How many more records the consumer takes before it writes a batch: a reader that reads
    # records a block at a time (jsonio's Blocks) reads that many, so batches end where they
    # would one record at a time.
    room: Callable[[], int] = lambda: 10_000
    # Read only this piece of the source (shards.py), and hand the field mapping's state to
    # `fields_seen` instead of checking it: the stage checks it over every piece.
    shard: Any = None
    fields_seen: Callable[[Any], None] = lambda mapper: None
    _bot_re: linear.Regex | None = field(default=None, init=False, repr=False)

    def is_bot(self, author: str | None) -> bool:
        if not author:
            return False
        if self._bot_re is None:  # RE2: a crafted name cannot make `(a+)+$` backtrack
            self._bot_re = linear.compile(bot_regex(self.bot_patterns), re.I)
        return self._bot_re.search(author.strip()) is not None


def bot_regex(patterns: tuple[str, ...] | list[str]) -> str:
    """The bot patterns as one regex (case-insensitive, on RE2: pipeline.linear)."""
    return "|".join(f"(?:{p})" for p in patterns)


def count_lines(text: str) -> int:
    """Lines of a code fragment: "" is 0 lines, "a" and "a\\n" are 1."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def changed_counts(before: str, after: str) -> tuple[int, int]:
    """(removed, added) lines of a line diff of `before` and `after`: their common leading and
    trailing lines cut, then the longest common subsequence of what is left (a line keeps its
    newline, so a changed end-of-file newline is a changed line, as in git). For whole files
    it is the edit, not the file's length, nor the lines between two distant edits."""
    if before == after:
        return 0, 0
    if "\n" not in before and "\n" not in after:  # one line at most each, and they differ
        return (1 if before else 0), (1 if after else 0)
    a, b = _lines(before), _lines(after)
    head = 0
    for la, lb in zip(a, b, strict=False):
        if la != lb:
            break
        head += 1
    tail, most = 0, min(len(a), len(b)) - head  # the suffix may not reach into the prefix
    while tail < most and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    rest_a, rest_b = a[head : len(a) - tail], b[head : len(b) - tail]
    if len(rest_a) > 1 or len(rest_b) > 1:  # edits far apart: lines between are not changed
        from rapidfuzz.distance import LCSseq

        same = LCSseq.similarity(rest_a, rest_b)
        return len(rest_a) - same, len(rest_b) - same
    return len(rest_a), len(rest_b)


def _lines(text: str) -> list[str]:
    """The lines count_lines counts, as keys that compare as the lines do (each with its
    newline): a line ending in a newline is its text, the last line without one is its text
    and a newline (no line's text holds one), so no line is copied to compare it."""
    lines = text.split("\n")
    last = lines.pop()  # "" when the text ends with a newline: no line there
    if last:
        lines.append(last + "\n")
    return lines


def _counts(removed: int | None, added: int | None, before: str, after: str) -> tuple[int, int]:
    """(removed, added) lines: the input's own counts where it has them, else changed_counts."""
    if removed is None or added is None:
        r, a = changed_counts(before, after)
        return (r if removed is None else removed), (a if added is None else added)
    return removed, added


@lru_cache(maxsize=65_536)
def _language(given: str, path: str) -> str:
    """The language a source gave (its name normalised), else the path's."""
    return normalise_language(given) if given else language_from_path(path)


def to_utc(value: datetime | None) -> datetime | None:
    """`value` in UTC (naive is taken as UTC); None when it has no UTC equivalent (year 1
    with a positive offset ...): sources check times before this, so that is a last guard."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    try:
        return value.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        return None


class Batcher:
    """Collects records into columnar batches of items and of errors."""

    def __init__(self, source: str, ctx: IngestContext):
        self.source = mask(source)[0]  # a file name can hold a token too
        self.ctx = ctx
        self._items: dict[str, list] = {f.name: [] for f in ITEM_SCHEMA}
        self._errors: dict[str, list] = {f.name: [] for f in ERROR_SCHEMA}
        self.records = 0
        self.items = 0
        self.errors = 0
        self.skipped = 0
        self.reasons: dict[str, int] = {}
        self.field_problems: dict[str, int] = {}  # "created_at out of range" -> records
        self.problem_refs: dict[str, list[str]] = {}  # the first PROBLEM_REFS refs of each
        self.secrets: dict[str, int] = {}  # rule -> secrets masked (items and errors)
        self._refs: list[str] = []  # the pending items' records, in order
        self._record_of: list[int] = []  # each pending item's record (an index in _refs)
        self._bots: dict[str | None, bool] = {}  # author -> is_bot, for _bot

    def add(self, rec: Record | RecordError | Items) -> None:
        if isinstance(rec, Items):
            self._add_items(rec)
            return
        self.records += 1
        if isinstance(rec, RecordError):
            self._add_error(rec)
            return
        for p in rec.problems:
            self.field_problems[p] = self.field_problems.get(p, 0) + 1
            refs = self.problem_refs.setdefault(p, [])
            if len(refs) < PROBLEM_REFS:
                refs.append(rec.ref)
        if not rec.items:  # a source bug, but never lose the record
            self._add_error(RecordError(rec.ref, "", "record produced no item", "error"))
            return
        many = len(rec.items) > 1
        self._refs.append(rec.ref)
        for k, it in enumerate(rec.items):
            self._record_of.append(len(self._refs) - 1)
            self._add_item(f"{rec.ref}#{k}" if many else rec.ref, it)

    def _add_error(self, err: RecordError) -> None:
        e = self._errors
        e["source"].append(self.source)
        ref, fired_ref = mask(err.ref)
        e["source_ref"].append(ref)
        e["severity"].append(err.severity)
        reason, fired = mask(err.reason)
        raw, fired_raw = masked_raw(err.raw)
        e["reason"].append(reason)
        e["raw"].append(raw)
        self._count_secrets(fired_ref + fired + fired_raw)
        if err.severity == "skip":
            self.skipped += 1
        else:
            self.errors += 1
        key = _reason_key(reason)
        self.reasons[key] = self.reasons.get(key, 0) + 1

    def _add_item(self, ref: str, it: RawItem) -> None:
        c = self._items
        c["id"].append(item_id(it.repo, it.change, it.path, it.before, it.after, it.comment))
        c["source"].append(self.source)
        c["source_ref"].append(ref)
        c["repo"].append(it.repo)
        c["change"].append(it.change)
        c["path"].append(it.path)
        c["language"].append(_language(it.language, it.path))
        c["before"].append(it.before)
        c["after"].append(it.after)
        c["context"].append(it.context)
        c["comment"].append(it.comment)
        c["author"].append(it.author)
        c["author_is_bot"].append(self._bot(it.author_is_bot, it.author))
        removed, added = _counts(it.lines_removed, it.lines_added, it.before, it.after)
        c["lines_removed"].append(removed)
        c["lines_added"].append(added)
        c["created_at"].append(to_utc(it.created_at))
        self.items += 1

    def _add_items(self, rec: Items) -> None:
        """What add() does for each of the records, a field at a time."""
        n = len(rec.refs)
        f, c = rec.fields, self._items
        ids = map(item_id, f["repo"], f["change"], f["path"], f["before"], f["after"], f["comment"])
        c["id"].extend(ids)
        c["source"].extend([self.source] * n)
        c["source_ref"].extend(rec.refs)
        for name in ("repo", "change", "path", "before", "after", "context", "comment", "author"):
            c[name].extend(f[name])
        c["language"].extend(map(_language, f["language"], f["path"]))
        c["author_is_bot"].extend(map(self._bot, f["author_is_bot"], f["author"]))
        counts = map(_counts, f["lines_removed"], f["lines_added"], f["before"], f["after"])
        for removed, added in counts:
            c["lines_removed"].append(removed)
            c["lines_added"].append(added)
        c["created_at"].extend(map(to_utc, f["created_at"]))
        first = len(self._refs)
        self._refs.extend(rec.refs)
        self._record_of.extend(range(first, first + n))
        self.records += n
        self.items += n

    def _bot(self, flag: bool | None, author: str | None) -> bool:
        """The input's own flag, else whether the author matches the bot patterns (each name
        decided once: a corpus has far fewer authors than items)."""
        if flag is not None:
            return bool(flag)
        bot = self._bots.get(author)
        if bot is None:
            if len(self._bots) >= 65_536:
                self._bots.clear()
            bot = self._bots[author] = self.ctx.is_bot(author)
        return bot

    @property
    def pending(self) -> int:
        return len(self._items["id"]) + len(self._errors["source"])

    def _count_secrets(self, names: list[str] | dict[str, int]) -> None:
        for n, k in names.items() if isinstance(names, dict) else ((n, 1) for n in names):
            self.secrets[n] = self.secrets.get(n, 0) + k

    def take_items(self) -> pa.RecordBatch | None:
        """The pending items as a batch, secrets masked (before anything is written). A
        record one of whose items passes the scan budget is an error record instead."""
        if not self._items["id"]:
            return None
        batch = pa.RecordBatch.from_pydict(self._items, schema=ITEM_SCHEMA)
        record_of, refs = self._record_of, self._refs
        self._items = {f.name: [] for f in ITEM_SCHEMA}
        self._record_of, self._refs = [], []
        out = mask_batch(batch, SECRET_FIELDS, self.ctx.scan_budget)
        while out.over:  # rare: those records out, and the rest masked again (exact counts)
            over = {record_of[k]: k for k in reversed(out.over)}  # record -> its first row
            for r, k in sorted(over.items()):
                self._over_budget(refs[r], batch.slice(k, 1).to_pylist()[0])
            keep = [r not in over for r in record_of]
            self.items -= keep.count(False)
            batch = batch.filter(pa.array(keep))
            record_of = [r for r in record_of if r not in over]
            out = mask_batch(batch, SECRET_FIELDS, self.ctx.scan_budget)
        self._count_secrets(out.fired)
        return out.batch if out.batch.num_rows else None

    def _over_budget(self, ref: str, item: dict[str, Any]) -> None:
        """An error record for a record whose secret scan passed the budget: its raw the
        item's text fields (masked and cut as every raw is: a bounded scan)."""
        text = {f: item[f] for f in TEXT_FIELDS if item.get(f)}
        why = (
            f"secret scan over budget: more than {self.ctx.scan_budget:,} units of work "
            "(ingest.record_scan_budget); not an item"
        )
        self._add_error(RecordError(ref, json.dumps(text, ensure_ascii=False), why, "error"))

    def take_errors(self) -> pa.RecordBatch | None:
        if not self._errors["source"]:
            return None
        batch = pa.RecordBatch.from_pydict(self._errors, schema=ERROR_SCHEMA)
        self._errors = {f.name: [] for f in ERROR_SCHEMA}
        return batch


def masked_raw(raw: str | bytes, limit: int = RAW_MAX_CHARS) -> tuple[str, list[str]]:
    """truncate_raw, with secrets masked: the cut is made in the raw text, and a secret it
    goes through is masked whole (mask_head), so none is left half-shown at it."""
    if isinstance(raw, bytes):
        total = None
        raw = raw[: (limit + HEAD_MARGIN) * 4].decode("utf-8", errors="backslashreplace")
    else:
        total = len(raw)
    text, fired = mask_head(raw, limit)
    if len(raw) <= limit:
        return text, fired
    more = (total if total is not None else len(raw)) - limit
    return text + f"... [{more} more chars]", fired


def _reason_key(reason: str) -> str:
    """The reason's stable head ("malformed JSON: ..." -> "malformed JSON") for counting."""
    return reason.split(":", 1)[0].strip()


Reader = Callable[..., Iterator[Record | RecordError | Items]]

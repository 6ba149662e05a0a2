"""The ingest stage: every configured source -> items.parquet + errors.parquet.

Sources are read in config order and streamed in batches, so memory stays bounded whatever the
input size. Every input record ends in exactly one of the two outputs; the manifest records,
per source, how many records the reader gave and how many the input holds by a separate
count (count.py), so `editcurate verify` can re-check both later.

Failures: a source that cannot be read at all (missing, a FIFO, a device, permission denied,
not a git repository) raises IngestIOError before or while reading (exit 3); a bad option
raises IngestFailed (exit 2); an ingest that gives no item at all finishes and writes its
outputs (items_out 0), and the CLI then exits 1: the data failed.
"""

from __future__ import annotations

import json
from contextlib import ExitStack, closing
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
from rich.markup import escape
from rich.table import Table

from pipeline import storage
from pipeline.config import Config, SourceConfig
from pipeline.console import console
from pipeline.errors import DataError
from pipeline.executors import partitioned, tasks, writer
from pipeline.ingest import shards
from pipeline.ingest.base import Batcher, IngestContext, RecordError, SourceUnreadable
from pipeline.ingest.count import LineCuts
from pipeline.ingest.mapping import ALIASES, input_field
from pipeline.ingest.opening import UNREADABLE, check_source_path
from pipeline.ingest.shards import Params
from pipeline.ingest.sources import SOURCES
from pipeline.ingest.sources.table import EMPTY
from pipeline.parts import Writer
from pipeline.runs import StageFailed, input_fingerprint, input_state
from pipeline.schema import ERROR_SCHEMA, ITEM_SCHEMA
from pipeline.secrets.masking import mask, shown
from pipeline.storage import Location

if TYPE_CHECKING:
    from pipeline.runner import StageIO

STAGE = "ingest"


class IngestFailed(StageFailed):
    """The ingest cannot run (a bad option); the message is one line naming the source."""

    exit_code = 2


class IngestIOError(IngestFailed):
    """A source cannot be read at all (missing, a FIFO or device, permission denied, not a
    git repository): an I/O or environment failure, one line naming it."""

    exit_code = 3


def source_path(cfg: Config, spec: SourceConfig) -> Location:
    """A source's file or folder: its path, a relative one read from ingest.root if set;
    an object in storage where either is a URL (pipeline/storage.py)."""
    root = cfg.ingest.root
    local = Path(spec.path).expanduser().is_absolute()  # read from no root, a URL's included
    if storage.is_url(spec.path) or (storage.is_url(root) and not local):
        url = storage.join(root, spec.path) if root else spec.path
        if not SOURCES[spec.kind].remote:
            raise IngestIOError(
                f"source {source_name(spec)!r} ({spec.kind}): {shown(url)}: this kind reads a "
                "local path only; copy it to local disk first"
            )
        return storage.at(url, cfg.run.storage_options)
    if not root:
        return cfg.resolve(spec.path)
    return cfg.resolve(str(cfg.resolve(root) / Path(spec.path).expanduser()))


def source_name(spec: SourceConfig) -> str:
    """The source's name (by default its file name), secrets masked: it is the `source`
    column, a key of the manifests and in messages, and a file name can hold a token."""
    return mask(spec.display_name())[0]


def source_names(cfg: Config) -> list[str]:
    """source_name of each source, in config order; names the masking made equal get their
    place in the config appended (`#1`), so each source keeps its own counts."""
    names = [source_name(s) for s in cfg.ingest.sources]
    return [f"{n}#{i}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def key(cfg: Config) -> tuple[str, dict[str, str]]:
    """Every source checked readable, then fingerprinted by content: the stage's inputs."""
    if not cfg.ingest.sources:
        raise IngestFailed("no sources configured: add [[ingest.sources]] to the config")
    inputs: dict[str, str] = {}
    for spec, name in zip(cfg.ingest.sources, source_names(cfg), strict=True):
        p = source_path(cfg, spec)
        try:  # before fingerprinting: hashing /dev/zero or a FIFO would never end
            check_source_path(p, SOURCES[spec.kind].expects)
        except SourceUnreadable as e:
            raise IngestIOError(f"source {name!r} ({spec.kind}): {shown(str(e))}") from None
        pin = SOURCES[spec.kind].rev
        inputs[name] = input_fingerprint(p, pin(spec) if pin else None, cfg.run_dir)
    return "", inputs


def step(cfg: Config, io: StageIO) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each source in its pieces (shards.py) on the configured executor; the batches written
    re-chunked to ingest.batch_size rows, so the output is the same however it was cut."""
    per_source: dict[str, dict[str, Any]] = {}
    params = Params(
        cfg.ingest.max_record_bytes,
        cfg.ingest.batch_size,
        tuple(cfg.ingest.bot_patterns),
        cfg.ingest.record_scan_budget,
    )
    schemas = {"items.parquet": ITEM_SCHEMA, "errors.parquet": ERROR_SCHEMA}
    with ExitStack() as stack:
        out = writer(cfg.run, io.sink, schemas, cfg.ingest.batch_size, stack)
        bar = stack.enter_context(io.progress())
        for i, (spec, name) in enumerate(zip(cfg.ingest.sources, source_names(cfg), strict=True)):
            path = source_path(cfg, spec)
            before = _state(spec, path, cfg.run_dir)  # before its read (the plan reads it)
            pieces = shards.plan(spec, path, cfg.ingest.shard_bytes, cfg.run)
            first = pieces[0]
            whole = first is None
            task = bar.add_task(escape(f"ingest {name}"), total=None if first is None else first.of)
            tally = shards.Tally()
            todo = [(name, spec, path, piece) for piece in pieces]
            work = tasks(cfg.run, todo, shards.read_piece, params, held=schemas)
            results = stack.enter_context(closing(work))
            for outs, c in results:
                if "raise" in c:
                    raise _failure(c["raise"], spec, i)
                if "done" in c:
                    tally.add(c)
                    if c["done"]["reasons"].get(UNREADABLE):  # as a whole read: the rest of
                        break  # the file is not read (the later pieces' records are dropped)
                    continue
                out.add(outs)
                if whole and c["total"] is not None:
                    bar.update(task, total=c["total"])
                bar.advance(task, c["advance"])
            _whole_source(tally, spec, i, name, out, pieces)
            hint = _required_fields(tally, spec, i)
            if hint is not None:
                tally.warnings.append(hint)
            bar.update(task, completed=bar.tasks[task].total or 0)
            per_source[name] = _source_counts(spec, tally, tally.warnings)
            cuts = _line_cuts(pieces, cfg)
            per_source[name].update(_input_count(cfg, spec, tally.records, tally.warnings, cuts))
            _check_unchanged(spec, name, path, before, io.run.inputs.get(name), cfg.run_dir)
            for w in tally.warnings:
                console.print(f"[yellow]warning[/] source {escape(repr(name))}: {escape(w)}")
        out.close()
    counts = _counts(cfg, io.dir / "items.parquet", per_source)
    return counts, {"conservation": {"kind": "records", "sources": per_source}}


def _state(spec: SourceConfig, path: Location, run_dir: Location) -> Any:
    """The source's stat (runs.input_state), the run's own folder left out where the source
    folder holds it; None for a kind whose fingerprint is a pinned revision (git: its files
    may change, the history at the revision cannot)."""
    return None if SOURCES[spec.kind].rev else input_state(path, run_dir)


def _check_unchanged(
    spec: SourceConfig,
    name: str,
    path: Location,
    before: Any,
    recorded: str | None,
    run_dir: Location,
) -> None:
    """IngestIOError (exit 3) unless the source is as it was fingerprinted and as it was when
    its read began: a file truncated or rewritten while it was read (restored or not) would
    otherwise leave a partial read recorded under the whole file's fingerprint, and the next
    run would skip it as unchanged. Costs one more hash of each input (sha256, ~0.8 GB/s)."""
    pin = SOURCES[spec.kind].rev
    now = _state(spec, path, run_dir)
    try:
        fingerprint = input_fingerprint(path, pin(spec) if pin else None, run_dir)
    except OSError:  # gone, or unreadable now
        fingerprint = None
    if now == before and fingerprint == recorded and _state(spec, path, run_dir) == now:
        return
    what = "its revision" if pin else "its size, times or content"
    raise IngestIOError(
        f"source {name!r} ({spec.kind}): {shown(str(path))} changed while ingest read it "
        f"({what} differ from when it was fingerprinted); nothing was recorded: run again "
        "once it no longer changes"
    )


def _failure(what: list[str], spec: SourceConfig, i: int) -> IngestFailed:
    """The one-line failure a piece reported (kind, message), as the stage's exception."""
    kind, msg = what[0], shown(what[1])  # a path in it can hold a token
    name = source_name(spec)
    if kind == "unreadable":
        return IngestIOError(f"source {name!r} ({spec.kind}): {msg}")
    if kind == "unmapped":  # a config error found by reading: exit 2
        return IngestFailed(f"source {name!r}: ingest.sources.{i}.{msg}")
    return IngestFailed(f"source {name!r} ({spec.kind}): {msg}")


UNMAPPED_REQUIRED = "no record has the required field"
# What a required item field is often called elsewhere: suggested, never mapped unasked
LIKELY = {
    "before": ("old", "old_code", "original", "source", "source_code", "src", "old_file"),
    "after": ("new", "new_code", "target", "target_code", "patched", "fixed", "new_file"),
}


# The keys of a GitHub REST review comment: a dump read as a table is one of these
GITHUB_KEYS = {"diff_hunk", "body", "path"}
DELIMITERS = (";", "\t", "|")


def _other_delimiter(keys: list[str]) -> tuple[str, list[str]] | None:
    """(delimiter, the columns it gives) where the header came out as one column that another
    delimiter splits into several (a `;`-separated CSV read with `,`)."""
    if len(keys) != 1:
        return None
    for d in DELIMITERS:
        parts = [k.strip() for k in keys[0].split(d)]
        if len(parts) > 1 and all(parts):
            return d, parts
    return None


def _required_fields(tally: shards.Tally, spec: SourceConfig, i: int) -> str | None:
    """Where none of a source's records gave an item because a required field has another
    name in it: a warning naming the fields, the fields the records had, and the --set lines
    that map them (when no source gave an item, check() fails the run with it, exit 2)."""
    if tally.items or not tally.objects or not tally.reasons.get("missing field"):
        return None
    keys = list(tally.keys)
    missing = [
        f
        for f in spec.required
        if f not in spec.defaults
        and input_field(spec, f) not in tally.keys
        and not any(a in tally.keys for a in ALIASES.get(f, ()))
    ]
    if not missing:
        return None
    fixes = []
    lower = {k.lower(): k for k in keys}
    split = _other_delimiter(keys) if spec.kind == "table" else None
    if split is not None:  # one column named "id;repo;before;...": another delimiter
        delim, keys = split
        fixes.append(f"--set ingest.sources.{i}.csv_delimiter={json.dumps(delim)}")
        lower = {k.lower(): k for k in keys}
        missing = [f for f in missing if input_field(spec, f) not in keys]
    github = spec.kind == "table" and GITHUB_KEYS <= {k.lower() for k in keys}
    if github:  # a REST dump of review comments: their suggestion blocks are the edits
        fixes.append(f'--set ingest.sources.{i}.kind="github"')
    for f in missing if not github else ():
        like = [k for k in keys if f in k.lower()]
        like += [lower[w] for w in LIKELY.get(f, ()) if w in lower]
        like += get_close_matches(f, keys, 1, 0.5)
        fixes.append(f"--set ingest.sources.{i}.fields.{f}={like[0] if like else '<field>'}")
    seen = ", ".join(shown(k) for k in keys[:20]) + (", ..." if len(keys) > 20 else "")
    head = f"{UNMAPPED_REQUIRED}{'s' if len(missing) > 1 else ''} {', '.join(missing)} (fields "
    if github:
        return f"{head}seen: {seen}): they are GitHub review comments; read them as such: " + shown(
            fixes[0]
        )
    return f"{head}seen: {seen}); map {'them' if len(fixes) > 1 else 'it'}: " + " ".join(
        shown(x) for x in fixes
    )


def _whole_source(
    tally: shards.Tally,
    spec: SourceConfig,
    i: int,
    name: str,
    out: Writer,
    pieces: list[shards.Shard | None],
) -> None:
    """What a source read in pieces is checked for as a whole: a mapped field no record had
    (exit 2); a JSON file with no record (one skip, so the file is accounted for, as the
    whole reader gives; a Parquet table of no rows has none)."""
    first = pieces[0]
    if first is None:  # read whole: the reader checked both itself
        return
    unmapped = tally.unmapped()
    if unmapped is not None:
        raise _failure(["unmapped", str(unmapped)], spec, i)
    if tally.records == 0 and first.kind == "lines":
        b = Batcher(name, IngestContext())
        b.add(RecordError("file", "", EMPTY, "skip"))
        out.add({"errors.parquet": b.take_errors()})
        tally.add({"done": shards.tallied(b), "warnings": [], "fields": {}})


def check(m: dict[str, Any]) -> None:
    """An ingest that gave no item fails the data (exit 1), naming what went wrong."""
    c = m.get("counts", {})
    if c.get("items_out", 0) > 0:
        return
    n = c.get("records_in", 0)
    if not n:
        raise DataError("ingest: the sources held no records; nothing to curate")
    sources = (m.get("conservation") or {}).get("sources") or {}
    for name, s in sources.items():  # a field named otherwise in the data: say what to type
        for w in s.get("warnings", []):
            if isinstance(w, str) and w.startswith(UNMAPPED_REQUIRED):
                raise IngestFailed(f"source {name!r}: {w}")
    why = "; ".join(  # what each source's records said: empty_source, missing field ...
        f"source {name!r}: "
        + ", ".join(f"{r} {k}" for r, k in sorted(s.get("reasons", {}).items(), key=_most))
        for name, s in sorted(sources.items())
        if s.get("reasons")
    )
    raise DataError(
        f"ingest: every one of {n} records failed or was skipped ({c.get('errors_out', 0)} "
        f"errors, {c.get('skipped_out', 0)} skipped{': ' + why if why else ''}); see "
        "ingest/errors.parquet"
    )


def _most(reason: tuple[str, int]) -> tuple[int, str]:
    return -reason[1], reason[0]


def _source_counts(spec: SourceConfig, b: Any, warnings: list[str]) -> dict[str, Any]:
    return {
        "kind": spec.kind,
        "records": b.records,
        "items": b.items,
        "errors": b.errors,
        "skipped": b.skipped,
        "reasons": dict(sorted(b.reasons.items())),
        "field_problems": dict(sorted(b.field_problems.items())),
        "field_problem_refs": dict(sorted(b.problem_refs.items())),
        "secrets_masked": dict(sorted(b.secrets.items())),
        "warnings": warnings,
    }


def _line_cuts(pieces: list[shards.Shard | None], cfg: Config) -> LineCuts | None:
    """A JSON-lines file read in pieces is counted in the same pieces, on the executor."""
    if len(pieces) < 2 or any(p is None or p.kind != "lines" for p in pieces):
        return None
    return LineCuts([(p.start, p.end) for p in pieces if p is not None], cfg.run)


def _input_count(
    cfg: Config,
    spec: SourceConfig,
    records: int,
    warnings: list[str],
    cuts: LineCuts | None = None,
) -> dict[str, Any]:
    """The input's own record count (count.py), for verify; {} for kinds not counted."""
    counter = SOURCES[spec.kind].count
    try:
        p = source_path(cfg, spec)
        by_piece = {"cuts": cuts} if cuts else {}  # only a kind that cuts takes them
        got = counter(spec, p, cfg.ingest.max_record_bytes, **by_piece) if counter else None
    except SourceUnreadable as e:
        msg = shown(str(e))
        raise IngestIOError(f"source {source_name(spec)!r} ({spec.kind}): {msg}") from None
    if got is None:
        return {}
    n, unit = got
    if n != records:
        warnings.append(
            f"the input holds {n} records ({unit}), the reader gave {records}: "
            "`editcurate verify` will fail"
        )
    return {"input_records": n, "input_unit": unit}


def _counts(
    cfg: Config, items_path: Location, per_source: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The stage's counts; items and distinct ids counted per partition of the ids (on Ray
    by tasks: the driver adds two numbers a partition)."""
    got = partitioned(cfg, items_path, "id", ["id"], _id_counts, None)
    rows, unique = sum(r for r, _ in got), sum(u for _, u in got)
    return {
        "records_in": sum(s["records"] for s in per_source.values()),
        "items_out": rows,
        "errors_out": sum(s["errors"] for s in per_source.values()),
        "skipped_out": sum(s["skipped"] for s in per_source.values()),
        "unique_ids": unique,
        "exact_duplicates": rows - unique,
    }


def print_summary(m: dict[str, Any] | None) -> None:
    """A table per source (records, items, errors, skipped, top reasons) and the totals."""
    if not m:
        return
    t = Table(title="ingest", title_justify="left")
    for c in ("source", "kind", "records", "items", "errors", "skipped", "reasons"):
        numeric = c in ("records", "items", "errors", "skipped")
        t.add_column(c, justify="right" if numeric else "left")
    for name, s in m["conservation"]["sources"].items():
        top = ", ".join(f"{k} {v}" for k, v in sorted(s["reasons"].items(), key=lambda kv: -kv[1]))
        t.add_row(
            escape(name),
            escape(s["kind"]),
            str(s["records"]),
            str(s["items"]),
            str(s["errors"]),
            str(s["skipped"]),
            escape(top[:120]),
        )
    console.print(t)
    for name, s in m["conservation"]["sources"].items():
        for problem, n in s.get("field_problems", {}).items():
            refs = ", ".join(s.get("field_problem_refs", {}).get(problem, []))
            console.print(
                f"[yellow]field problem[/] source {escape(repr(name))}: {escape(problem)}: "
                f"{n} items kept with the field null (e.g. {escape(refs)})",
                soft_wrap=True,
            )
    for name, s in m["conservation"]["sources"].items():
        if s.get("secrets_masked"):
            kinds = ", ".join(f"{k} {v}" for k, v in s["secrets_masked"].items())
            console.print(
                f"[yellow]secrets masked[/] source {escape(repr(name))}: {escape(kinds)} "
                + escape("(as [REDACTED:<rule>], before anything was written)"),
                soft_wrap=True,
            )
    c = m["counts"]
    console.print(
        f"ingest: {c['records_in']} records -> {c['items_out']} items "
        f"({c['exact_duplicates']} exact-duplicate rows kept for dedup), "
        f"{c['errors_out']} errors, {c['skipped_out']} skipped"
    )


def _id_counts(items: pl.LazyFrame, _: Any) -> tuple[int, int]:
    """(rows, distinct ids) of `items`, the ids compared by 128-bit hashes: 16 bytes a row
    (at 10M rows the strings and their hash table took gigabytes)."""
    from pipeline.verify import unique_rows

    h = items.select(pl.col("id").hash(seed=1), pl.col("id").hash(seed=2).alias("h2")).collect()
    return h.height, len(unique_rows(h.to_numpy()))

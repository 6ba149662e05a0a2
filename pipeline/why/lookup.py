"""Reading a run's outputs lazily, resolving ids and prefixes, the item view."""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from pipeline.console import visible
from pipeline.parts import scan_output
from pipeline.runs import committed_outputs, read_manifest, stale_stages
from pipeline.stage import NAMES, SPLITS
from pipeline.storage import Location

MIN_PREFIX = 8  # shortest id prefix accepted
ROW_KEY = ["id", "source", "source_ref"]
SHOW_CHARS = 100  # one-line views of before / after / comment
MAX_LISTED = 10  # cluster members, group members, ambiguous matches, near pairs listed
TEXTS = ("before", "after", "comment")
META = (
    *ROW_KEY,
    "repo",
    "change",
    "path",
    "language",
    "author",
    "author_is_bot",
    "created_at",
    "lines_removed",
    "lines_added",
)
_HEX = re.compile(r"[0-9a-fA-F]+")


def read_stages(run_dir: Location) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Per stage: done (manifest written) | stale (its inputs changed after it ran: its
    outputs are not read) | unfinished (folder, no manifest) | not run, and its manifest ({}
    when none)."""
    states, manifests = {}, {}
    stale = stale_stages(run_dir)
    for s in NAMES:  # a stage is shown only where the run has it (older runs lack some)
        m = read_manifest(run_dir / s)
        if m is not None:
            states[s] = "done"
        elif s in stale:
            states[s] = "stale"
        else:
            states[s] = "unfinished" if (run_dir / s).exists() else "not run"
        manifests[s] = m or {}
    return states, manifests


def scan(run_dir: Location, stage: str, name: str) -> pl.LazyFrame | None:
    """The Parquet output `name` of `stage` (a file, or a folder of parts) once its stage
    finished writing it, or None."""
    done = committed_outputs(run_dir / stage)
    for p in (run_dir / stage / f"{name}.parquet", run_dir / stage / name):
        if p.name not in done:
            continue
        if p.is_file():
            return scan_output(p)
        if p.is_dir() and any(p.glob("**/*.parquet")):
            return scan_output(p / "**" / "*.parquet")
    return None


def columns(lf: pl.LazyFrame) -> list[str]:
    return list(lf.collect_schema().names())


def pick(lf: pl.LazyFrame, ids: list[str], cols: list[str]) -> pl.LazyFrame:
    """Rows of `lf` whose id is one of `ids`, only `cols` (those it has)."""
    have = set(columns(lf))
    return lf.filter(pl.col("id").is_in(ids)).select([c for c in cols if c in have])


def one_line(s: str | None, limit: int = SHOW_CHARS) -> str:
    """`s` on one line: newlines as ⏎, other control characters escaped, cut at `limit`."""
    if s is None:
        return ""
    s = s.replace("\r\n", "\n").replace("\n", "⏎")
    s = visible(s, one_line=True)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _universe(run_dir: Location) -> list[pl.LazyFrame]:
    """Tables holding every id of the run: ingest's items, else every item table present."""
    items = scan(run_dir, "ingest", "items")
    if items is not None:
        return [items]
    names: dict[str, tuple[str, ...]] = {
        "filter": ("kept", "rejected"),
        "dedup": ("kept", "removed"),
        "decontaminate": ("kept", "removed"),
        "shapes": ("kept", "removed"),
        "export": SPLITS,
    }
    out = [scan(run_dir, st, n) for st, ns in names.items() for n in ns]
    return [lf for lf in out if lf is not None]


def resolve(run_dir: Location, queries: list[str]) -> list[dict[str, Any]]:
    """Per query: status found | unknown | ambiguous | too_short, `id` when found, `matches`.

    A query is a full id or a prefix of at least MIN_PREFIX characters (case-insensitive).
    """
    norm = [q.strip().lower() if _HEX.fullmatch(q.strip()) else q.strip() for q in queries]
    tables = _universe(run_dir)
    probes = sorted({q for q in norm if q})
    found: set[str] = set()
    if tables and probes:
        exact = [q for q in probes if len(q) < MIN_PREFIX]
        prefixes = [q for q in probes if len(q) >= MIN_PREFIX]
        cond = pl.col("id").is_in(exact)
        for p in prefixes:
            cond = cond | pl.col("id").str.starts_with(p)
        for lf in tables:
            found |= set(lf.select("id").filter(cond).unique().collect()["id"].to_list())
    ordered = sorted(found)
    out = []
    for raw, q in zip(queries, norm, strict=True):
        r: dict[str, Any] = {"query": raw}
        if q in found:
            r |= {"status": "found", "id": q, "matches": [q]}
        elif len(q) < MIN_PREFIX:
            r |= {"status": "unknown" if not q else "too_short", "matches": []}
        else:
            m = [i for i in ordered if i.startswith(q)]
            if len(m) == 1:
                r |= {"status": "found", "id": m[0], "matches": m}
            else:
                r |= {"status": "ambiguous" if m else "unknown", "matches": m}
        out.append(r)
    return out


def unresolved(results: list[dict[str, Any]]) -> int:
    """How many queries named no single item (unknown, ambiguous or too short)."""
    return sum(r["status"] != "found" for r in results)


def item_view(run_dir: Location, ids: list[str]) -> pl.DataFrame | None:
    """Ingested rows of `ids` with short views of the text (decoded for these rows only)."""
    for st, n in (("ingest", "items"), ("filter", "kept"), ("filter", "rejected")):
        lf = scan(run_dir, st, n)
        if lf is not None:
            break
    else:
        return None
    text = [pl.col(c).str.slice(0, SHOW_CHARS + 40).alias(f"{c}_head") for c in TEXTS]
    lines = [
        (
            pl.col(c).str.count_matches("\n")
            + (~pl.col(c).str.ends_with("\n") & (pl.col(c).str.len_chars() > 0)).cast(pl.UInt32)
        ).alias(f"{c}_lines")
        for c in TEXTS
    ]
    have = set(columns(lf))
    meta = [c for c in META if c in have]
    return lf.filter(pl.col("id").is_in(ids)).select(*meta, *text, *lines).collect()


def item_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The item as shown: where it is from and one-line views of its texts."""
    out = {
        k: row.get(k)
        for k in ("repo", "change", "path", "language", "lines_removed", "lines_added")
    }
    for c in TEXTS:
        out[c] = one_line(row.get(f"{c}_head"))
        out[f"{c}_lines"] = row.get(f"{c}_lines")
    return out

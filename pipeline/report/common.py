"""Helpers every report section uses: counts and shares, short before/after snippets of items,
and run-relative paths (the report never names a folder of the machine it was built on)."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.parts import read_output
from pipeline.runs import StageFailed
from pipeline.schema import ID_HEX_CHARS
from pipeline.stage import SPLITS
from pipeline.storage import Location

ITEM_COLS = ["id", "repo", "path", "before", "after", "comment"]
SNIPPET_LINES = 14  # diff lines shown per item
SNIPPET_WIDTH = 160  # characters shown per diff line
DIFF_INPUT_LINES = 200  # lines of before/after compared (a minified file is one long line)
COMMENT_CHARS = 300


class ReportFailed(StageFailed):
    """report cannot run: the run folder lacks the stages it reads."""


def export_files(run_dir: Location) -> dict[str, Location]:
    """The export's split files that exist, by split (none where the export has not run)."""
    d = run_dir / "export"
    if not (d / "manifest.json").exists():
        return {}
    return {s: p for s in SPLITS if (p := d / f"{s}.parquet").exists()}


NONE = "(none)"  # how a report shows a null or blank value (a language, a repo, a path)


def shown_value(col: str) -> pl.Expr:
    """The column as the report's tables name its values: text, NONE where null or blank."""
    v = pl.col(col).cast(pl.String)
    return pl.when(v.is_null() | (v.str.strip_chars() == "")).then(pl.lit(NONE)).otherwise(v)


RANGE_ITEMS = 1 << 20  # items whose ids are held as text at once: a range of ids (id_ranges)


def id_ranges(n: int, per: int | None = None) -> list[pl.Expr]:
    """Filters cutting `n` items into ranges of ids of about `per` (RANGE_ITEMS) items each,
    in id order. Ids are hex digests, spread evenly over their range; an id of any other form
    still falls in exactly one range."""
    k = max(1, -(-n // (per or RANGE_ITEMS)))
    bounds = [f"{i * 16**ID_HEX_CHARS // k:0{ID_HEX_CHARS}x}" for i in range(1, k)]
    cuts = []
    for lo, hi in zip([None, *bounds], [*bounds, None], strict=True):
        cut = pl.lit(True)
        if lo is not None:
            cut &= pl.col("id") >= lo
        if hi is not None:
            cut &= pl.col("id") < hi
        cuts.append(cut)
    return cuts


def pct(a: float, b: float) -> float:
    return round(100.0 * a / b, 2) if b else 0.0


def read(p: Location, columns: list[str] | None = None) -> pl.DataFrame | None:
    return read_output(p, columns) if p.exists() else None


Rows = pl.DataFrame | pl.LazyFrame  # an output's rows, or a scan of them (read as needed)


def tally(df: Rows, col: str) -> pl.DataFrame:
    """Rows per raw value of `col` (col, items); a lazy `df` is read as a stream."""
    return df.lazy().group_by(col).len("items").collect()


def counts(df: Rows, col: str, top: int | None = None) -> list[dict[str, Any]]:
    """[{value, items, share}] sorted by items desc then value, a null or blank value shown as
    NONE (ranked over tally: only the distinct values are ever shown as text)."""
    return ranked(tally(df, col), col, top)


def ranked(t: pl.DataFrame, col: str, top: int | None = None) -> list[dict[str, Any]]:
    """counts of a tally `t` (col, items; a value may repeat: its rows are added)."""
    c = (
        t.select(shown_value(col).alias("value"), "items")
        .group_by("value")
        .agg(pl.col("items").sum())
        .sort(["items", "value"], descending=[True, False])
    )
    n = int(c["items"].sum())
    if not n:
        return []
    rows = [{**r, "share": pct(r["items"], n)} for r in c.iter_rows(named=True)]
    if top is not None and len(rows) > top:
        rest = sum(r["items"] for r in rows[top:])
        rows = rows[:top] + [{"value": "(other)", "items": rest, "share": pct(rest, n)}]
    return rows


def stats(s: pl.Series) -> dict[str, Any]:
    if s.len() == 0:
        return {"n": 0, "median": 0, "p95": 0, "max": 0, "mean": 0}
    return {
        "n": s.len(),
        "median": float(s.median()),  # type: ignore[arg-type]
        "p95": float(s.quantile(0.95, interpolation="nearest")),  # type: ignore[arg-type]
        "max": int(s.max()),  # type: ignore[arg-type]
        "mean": round(float(s.mean()), 2),  # type: ignore[arg-type]
    }


def _clip(line: str) -> str:
    return line if len(line) <= SNIPPET_WIDTH else line[: SNIPPET_WIDTH - 1] + "…"


def snippet(before: str, after: str) -> str:
    """A short unified diff of before -> after: at most SNIPPET_LINES lines, each clipped."""
    a = (before or "").split("\n")[:DIFF_INPUT_LINES]
    b = (after or "").split("\n")[:DIFF_INPUT_LINES]
    lines = [_clip(x) for x in difflib.unified_diff(a, b, "before", "after", lineterm="", n=2)]
    if not lines:
        return "(no change)"
    if len(lines) > SNIPPET_LINES:
        more = len(lines) - SNIPPET_LINES
        lines = lines[:SNIPPET_LINES] + [f"... ({more} more diff lines)"]
    return "\n".join(lines)


def member(row: dict[str, Any]) -> dict[str, Any]:
    """An item as the report shows it: where it is, its comment (one line) and a short diff."""
    return {
        "id": row["id"],
        "repo": row["repo"],
        "path": row["path"],
        "comment": " ".join((row["comment"] or "").split())[:COMMENT_CHARS],
        "diff": snippet(row["before"], row["after"]),
    }


def _prefixes(run_dir: Location, wide: bool) -> list[tuple[str, str]]:
    """(absolute prefix, what replaces it), longest first: the run folder; wide: cwd, home."""
    out: list[tuple[str, str]] = []
    for p in {run_dir.absolute(), run_dir.resolve()}:
        out.append((str(p) + os.sep, ""))
        out.append((str(p), "."))
    if wide:
        for p in {Path.cwd(), Path.cwd().resolve()}:
            out.append((str(p) + os.sep, ""))
        home = str(Path.home())
        if home not in ("/", ""):
            out.append((home + os.sep, "~" + os.sep))
    return sorted(out, key=lambda x: -len(x[0]))


def relativize(fig: Any, run_dir: Location, wide: bool = False) -> Any:
    """Every string in `fig` with the run folder written run-relative (wide: also the cwd and
    home, for figures from manifests; item text is left as it is, bar the run folder)."""
    prefixes = _prefixes(run_dir, wide)

    def fix(v: Any) -> Any:
        if isinstance(v, str):
            for p, r in prefixes:
                if p in v:
                    v = v.replace(p, r)
            return v
        if isinstance(v, dict):
            return {fix(k): fix(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [fix(x) for x in v]
        return v

    return fix(fig)

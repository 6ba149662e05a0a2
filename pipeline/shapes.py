"""The shapes stage: dedup/kept.parquet -> shapes.parquet, kept / removed, by edit shape.

Two items have the same edit shape when the lines their before -> after diff removes and adds
are equal after normalisation: digit runs and dotted versions become NUM, hex runs of 7+
characters (commit SHAs) become HEX, whitespace collapses. Such items (version bumps, pinned
SHA bumps) share almost no shingles, so dedup never sees them; batched together they can
still blow up a training step. Items are grouped by (file key, shape, digit_only [, nearest
context line]) at three scopes: the change, the repository, and the corpus by file name.

Cost: the line diff is difflib per item and normalisation is Python `re` over the distinct
changed lines (cached), roughly 20-50 us per item; the grouping, ranking and ordering are polars.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from rich.table import Table

from pipeline.config import Config, ShapesConfig
from pipeline.console import console, progress
from pipeline.dedup import clusters as C
from pipeline.runs import (
    StageFailed,
    StageRun,
    code_version,
    input_fingerprint,
    require_output,
    stage_fingerprint,
    write_parquet,
)

STAGE = "shapes"
PREV_STAGE, INPUT_FILE = "dedup", "kept.parquet"
NUM, HEX = "⟨N⟩", "⟨H⟩"  # placeholders; input holding these characters may merge with numbers
SCOPES = ("change", "repo", "corpus")
POLICIES = ("annotate", "cap", "spread")
SHAPES_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("scope", pa.string()),
        ("shape_key", pa.string()),  # sha256 of the group's key: scope, file key, shape ...
        ("shape_text", pa.string()),  # "-removed" / "+added" normalised lines
        ("digit_only", pa.bool_()),
        ("group_id", pa.int64()),  # per scope, numbered in shape_key order
        ("group_size", pa.int64()),
    ]
)
REMOVED_EXTRA = [
    ("reason", pa.string()),
    ("scope", pa.string()),
    ("group_id", pa.int64()),
    ("keeper_id", pa.string()),
]

_COUNTS = ("lines_removed", "lines_added")
_WS = re.compile(r"\s+")
# A hex run of 7+ characters holding at least one digit (so words like "defaced" stay).
_HEX = re.compile(r"\b(?=[a-fA-F]*[0-9])[0-9a-fA-F]{7,}\b")
# A digit run or dotted version, optional leading `v`, optional pre-release suffix:
# v4.5.0, 6.1.0, 1.2.3rc1, 2.0.0-beta.2, 1.0a1.
_NUM = re.compile(
    r"(?:\bv)?[0-9]+(?:\.[0-9]+)*"
    r"(?:(?:a|b|rc)[0-9]+|[-.](?:rc|alpha|beta|dev|pre|post)(?:\.?[0-9]+)?)?"
)


class ShapesFailed(StageFailed):
    """The shapes stage cannot run: no dedup output, or a config it cannot use."""


# ------------------------------------------------------------------------ normalisers


def collapse_ws(line: str) -> str:
    """Whitespace runs become one space; leading and trailing whitespace goes."""
    return _WS.sub(" ", line).strip()


@lru_cache(maxsize=1 << 18)
def normalise_line(line: str) -> str:
    """One line with whitespace collapsed, hex runs -> HEX, numbers and versions -> NUM.

    Punctuation and identifiers stay: normalising more would make unrelated lines equal.
    """
    return _NUM.sub(NUM, _HEX.sub(HEX, collapse_ws(line)))


def _lines(text: str, blank: bool = False) -> list[str]:
    """Lines of an edit side; "" is no line, or one blank line when `blank` (the item counts
    a removed or added line: lines are joined without a trailing newline)."""
    return text.split("\n") if text or blank else []


def changed_lines(
    before: str, after: str, blank_before: bool = False, blank_after: bool = False
) -> tuple[list[str], list[str]]:
    """(removed, added) raw lines of the before -> after line diff (difflib), no positions."""
    a, b = _lines(before, blank_before), _lines(after, blank_after)
    removed: list[str] = []
    added: list[str] = []
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return removed, added


def edit_shape(
    before: str, after: str, lines_removed: int = 0, lines_added: int = 0
) -> tuple[str, bool]:
    """(shape_text, digit_only) of one edit; the line counts tell "" from one blank line.

    digit_only: the normalised before equals the normalised after, yet the text differs
    beyond whitespace, so the edit changes only numbers or hashes (a version bump).
    """
    removed, added = changed_lines(before, after, lines_removed > 0, lines_added > 0)
    shape = "\n".join(
        [f"-{normalise_line(x)}" for x in removed] + [f"+{normalise_line(x)}" for x in added]
    )
    na = [normalise_line(x) for x in _lines(before)]
    nb = [normalise_line(x) for x in _lines(after)]
    differs = [collapse_ws(x) for x in _lines(before)] != [collapse_ws(x) for x in _lines(after)]
    return shape, differs and na == nb


def nearest_context_line(context: str) -> str:
    """The normalised context line nearest above the edit: the last non-blank line before the
    first `...` separator (ingest writes context as lines before, `...`, lines after)."""
    above = context.split("\n...\n", 1)[0] if "\n...\n" in context else context
    if above.startswith("...\n") or above == "...":
        return ""
    for line in reversed(above.split("\n")):
        if line.strip():
            return normalise_line(line)
    return ""


# ------------------------------------------------------------------------ pure part


def check_config(s: ShapesConfig) -> None:
    def bad(msg: str) -> None:
        raise ShapesFailed(f"config: shapes.{msg}")

    if s.policy not in POLICIES:
        bad(f"policy = {s.policy!r}: use one of {', '.join(POLICIES)}")
    if s.scope not in SCOPES:
        bad(f"scope = {s.scope!r}: use one of {', '.join(SCOPES)}")
    if s.cap_digit_only < 1 or s.cap_other < 1:
        bad(f"cap_digit_only / cap_other = {s.cap_digit_only} / {s.cap_other}: must be >= 1")
    if s.window < 1:
        bad(f"window = {s.window}: must be >= 1")


def _file_key(scope: str) -> pl.Expr:
    if scope == "change":
        return pl.concat_str(["repo", "change", "path"], separator="\0")
    if scope == "repo":
        return pl.concat_str(["repo", "path"], separator="\0")
    return pl.col("path").str.split("/").list.last()


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shape_columns(df: pl.DataFrame, context_key: bool = False) -> pl.DataFrame:
    """_row, shape_text, digit_only and (optionally) the nearest context line of each item."""
    counts = [df[c].fill_null(0) if c in df.columns else [0] * df.height for c in _COUNTS]
    shapes = [
        edit_shape(b, a, r, d)
        for b, a, r, d in zip(df["before"], df["after"], *counts, strict=True)
    ]
    ctx = [nearest_context_line(c) for c in df["context"]] if context_key else [""] * df.height
    return pl.DataFrame(
        {
            "_row": np.arange(df.height, dtype=np.int64),
            "shape_text": [s for s, _ in shapes],
            "digit_only": [d for _, d in shapes],
            "_ctx": ctx,
        },
        schema={
            "_row": pl.Int64,
            "shape_text": pl.String,
            "digit_only": pl.Boolean,
            "_ctx": pl.String,
        },
    )


def group_shapes(df: pl.DataFrame, s: ShapesConfig) -> pl.DataFrame:
    """SHAPES_SCHEMA rows (+ `_row`) for every item at every scope, sorted (scope, group, id)."""
    base = pl.concat(
        [df.select("id", "repo", "change", "path"), shape_columns(df, s.context_key)],
        how="horizontal",
    )
    parts = []
    for scope in SCOPES:
        key = pl.concat_str(
            [
                pl.lit(scope),
                _file_key(scope),
                pl.col("digit_only").cast(pl.String),
                pl.col("_ctx"),
                pl.col("shape_text"),
            ],
            separator="\x1f",
        )
        part = base.with_columns(scope=pl.lit(scope), _key=key)
        keys = part.select(pl.col("_key").unique())
        keys = keys.with_columns(
            shape_key=pl.col("_key").map_elements(_sha, return_dtype=pl.String)
        ).sort("shape_key", "_key")
        keys = keys.with_row_index("group_id").with_columns(pl.col("group_id").cast(pl.Int64))
        part = part.join(keys, on="_key", how="left")
        parts.append(part.with_columns(group_size=pl.len().over("group_id").cast(pl.Int64)))
    out = pl.concat(parts).sort(["scope", "group_id", "id", "_row"])
    return out.select(*SHAPES_SCHEMA.names, "_row")


def cap_groups(
    df: pl.DataFrame, shapes: pl.DataFrame, s: ShapesConfig, keeper: list[str]
) -> pl.DataFrame:
    """Rows removed by `cap` at s.scope: _row, scope, group_id, keeper_id (input row order).

    Within a group, items are ranked as dedup ranks its keepers; the first k stay.
    """
    g = shapes.filter(pl.col("scope") == s.scope).select("_row", "group_id", "digit_only")
    ranked = C.best_first(
        df.with_row_index("_row").with_columns(pl.col("_row").cast(pl.Int64)).join(g, on="_row"),
        "group_id",
        keeper,
    )
    ranked = ranked.with_columns(
        _k=pl.int_range(pl.len()).over("group_id"),
        keeper_id=pl.col("id").first().over("group_id"),
        _cap=pl.when(pl.col("digit_only")).then(s.cap_digit_only).otherwise(s.cap_other),
    )
    return (
        ranked.filter(pl.col("_k") >= pl.col("_cap"))
        .sort("_row")
        .select("_row", pl.lit(s.scope).alias("scope"), "group_id", "keeper_id")
    )


def spread_order(
    df: pl.DataFrame, shapes: pl.DataFrame, scope: str, window: int, seed: int
) -> tuple[np.ndarray, int]:
    """(batch_order per input row, conflicts): a seeded order in which members of one group
    at `scope` never share an aligned window of `window` positions, where that is possible.

    Items are sorted by (group size, largest first; seeded hash of group; seeded hash of
    item), then dealt row by row over the B = ceil(n / window) windows, so any run of up to
    B - 1 consecutive items of that list lands in distinct windows, and the largest group
    (first, on a full row) gets B. A larger group must collide: each item sharing a window
    with an earlier member of its group counts as one conflict.
    """
    n = df.height
    if n == 0:
        return np.empty(0, np.int64), 0
    g = shapes.filter(pl.col("scope") == scope).select("_row", "shape_key", "group_size")
    ids = df.select("id", "source", "source_ref").with_row_index("_row")
    t = ids.with_columns(pl.col("_row").cast(pl.Int64)).join(g, on="_row")
    t = t.with_columns(
        _gh=pl.col("shape_key").map_elements(lambda k: _sha(f"{seed}\0{k}"), pl.String),
        _ih=pl.concat_str(["id", "source", "source_ref"], separator="\0").map_elements(
            lambda k: _sha(f"{seed}\0{k}"), pl.String
        ),
    ).sort(
        ["group_size", "_gh", "shape_key", "_ih", "_row"],
        descending=[True, False, False, False, False],
    )
    nb = -(-n // window)
    last = n - (nb - 1) * window  # slots in the last window
    slots = [(b, r) for r in range(window) for b in range(nb) if b < nb - 1 or r < last]
    pos = np.array([b * window + r for b, r in slots], dtype=np.int64)
    order = np.empty(n, np.int64)
    order[t["_row"].to_numpy()] = pos
    win = pl.DataFrame({"k": t["shape_key"], "w": pos // window})
    conflicts = int(win.height - win.unique().height)
    return order, conflicts


@dataclass
class ShapesResult:
    shapes: pl.DataFrame  # SHAPES_SCHEMA + _row
    annotations: pl.DataFrame  # per input row: group columns to add to kept (annotate)
    removed: pl.DataFrame  # _row, scope, group_id, keeper_id
    batch_order: np.ndarray | None  # spread only
    counts: dict[str, Any]
    largest: list[dict[str, Any]]
    by_size: dict[str, dict[str, int]]


def _size_bucket(n: int) -> str:
    for hi, label in ((1, "1"), (2, "2"), (4, "3-4"), (9, "5-9"), (49, "10-49")):
        if n <= hi:
            return label
    return "50+"


def find_shapes(df: pl.DataFrame, s: ShapesConfig, keeper: list[str]) -> ShapesResult:
    """Shapes, groups and the policy's outcome for the items df (item columns)."""
    shapes = group_shapes(df, s)
    wide = pl.DataFrame({"_row": np.arange(df.height, dtype=np.int64)})
    for scope in SCOPES:
        part = shapes.filter(pl.col("scope") == scope).select(
            "_row",
            pl.col("group_id").alias(f"shape_group_{scope}"),
            pl.col("group_size").alias(f"shape_size_{scope}"),
        )
        wide = wide.join(part, on="_row", how="left")
    digit = shapes.filter(pl.col("scope") == "change").select("_row", "digit_only")
    wide = wide.join(digit.rename({"digit_only": "shape_digit_only"}), on="_row").sort("_row")

    removed = pl.DataFrame(
        schema={"_row": pl.Int64, "scope": pl.String, "group_id": pl.Int64, "keeper_id": pl.String}
    )
    order, conflicts = None, 0
    if s.policy == "cap":
        removed = cap_groups(df, shapes, s, keeper)
    elif s.policy == "spread":
        order, conflicts = spread_order(df, shapes, s.scope, s.window, s.seed)

    by_size: dict[str, dict[str, int]] = {}
    for scope in SCOPES:
        sizes = shapes.filter(pl.col("scope") == scope).group_by("group_id").agg(pl.len())
        hist: dict[str, int] = {}
        for k in sizes["len"].to_list():
            hist[_size_bucket(k)] = hist.get(_size_bucket(k), 0) + 1
        by_size[scope] = hist
    top = (
        shapes.filter((pl.col("scope") == s.scope) & (pl.col("group_size") > 1))
        .sort(["group_size", "group_id", "id"], descending=[True, False, False])
        .unique("group_id", keep="first", maintain_order=True)
        .head(10)
    )
    largest = []
    for r in top.iter_rows(named=True):
        item = df.row(r["_row"], named=True)
        largest.append(
            {
                "group_id": r["group_id"],
                "size": r["group_size"],
                "digit_only": r["digit_only"],
                "path": item["path"],
                "repo": item["repo"],
                "shape_text": r["shape_text"][:200],
                "comment": item["comment"][:80],
            }
        )
    n = df.height
    n_digit = int(wide["shape_digit_only"].sum()) if n else 0
    counts: dict[str, Any] = {
        "items_in": n,
        "kept": n - removed.height,
        "removed": removed.height,
        "digit_only": n_digit,
        "digit_only_share": round(n_digit / n, 4) if n else 0.0,
        "spread_conflicts": conflicts,
    }
    for scope in SCOPES:
        sc = shapes.filter((pl.col("scope") == scope) & (pl.col("group_size") > 1))
        counts[f"groups_{scope}"] = int(sc["group_id"].n_unique())
        counts[f"grouped_items_{scope}"] = sc.height
    return ShapesResult(shapes, wide, removed, order, counts, largest, by_size)


# ------------------------------------------------------------------------ stage I/O


def input_path(cfg: Config) -> Path:
    return cfg.run_dir / PREV_STAGE / INPUT_FILE


def prepare(cfg: Config) -> StageRun:
    check_config(cfg.shapes)
    src = input_path(cfg)
    require_output(src, PREV_STAGE, STAGE, ShapesFailed)
    section_fp = cfg.fingerprint(STAGE) + ",".join(cfg.dedup.keeper)  # cap ranks as dedup
    return StageRun(
        run_dir=cfg.run_dir,
        stage=STAGE,
        fingerprint=stage_fingerprint(STAGE, section_fp, code_version(STAGE)),
        config_fingerprint=cfg.fingerprint(),
        inputs={f"{PREV_STAGE}/{INPUT_FILE}": input_fingerprint(src)},
    )


def _arrow(df: pl.DataFrame) -> pa.Table:
    return df.to_arrow(compat_level=pl.CompatLevel.oldest())


def run(cfg: Config, sr: StageRun) -> dict[str, Any]:
    s = cfg.shapes
    sr.begin()
    src = input_path(cfg)
    table = pq.read_table(src)
    with progress() as bar:
        task = bar.add_task("shapes: line diffs", total=1)
        res = find_shapes(pl.from_arrow(table), s, list(cfg.dedup.keeper))
        bar.advance(task, 1)
    write_outputs(table, res, s, sr)
    sr.finish(
        res.counts,
        {
            "conservation": {
                "kind": "ids",
                "input": f"../{PREV_STAGE}/{INPUT_FILE}",
                "outputs": ["kept.parquet", "removed.parquet"],
            },
            "policy": s.policy,
            "scope": s.scope,
            "groups_by_size": res.by_size,
            "largest": res.largest,
        },
    )
    return res.counts


def write_outputs(table: pa.Table, res: ShapesResult, s: ShapesConfig, sr: StageRun) -> None:
    """kept (input order, or batch_order for spread), removed (input order), shapes."""
    n = table.num_rows
    keep = np.setdiff1d(np.arange(n, dtype=np.int64), res.removed["_row"].to_numpy())
    kept = table
    if s.policy == "annotate":
        for c in res.annotations.columns[1:]:
            kept = kept.append_column(c, res.annotations[c].to_arrow())
    if s.policy == "spread":
        kept = kept.append_column("batch_order", pa.array(res.batch_order, pa.int64()))
        keep = np.argsort(res.batch_order, kind="stable")
    write_parquet(kept.take(pa.array(keep, pa.int64())), sr.dir / "kept.parquet", sr.meta)
    rem = table.take(pa.array(res.removed["_row"].to_numpy(), pa.int64()))
    rem = rem.append_column("reason", pa.array(["edit_shape"] * rem.num_rows, pa.string()))
    for name, typ in REMOVED_EXTRA[1:]:
        rem = rem.append_column(name, res.removed[name].to_arrow().cast(typ))
    write_parquet(rem, sr.dir / "removed.parquet", sr.meta)
    shapes = _arrow(res.shapes.drop("_row")).cast(SHAPES_SCHEMA)
    write_parquet(shapes, sr.dir / "shapes.parquet", sr.meta)
    sr.record_output("kept.parquet", "items")
    sr.record_output("removed.parquet", "terminal")
    sr.record_output("shapes.parquet", "aux")


def print_summary(m: dict[str, Any] | None) -> None:
    """Groups by size per scope, the digit-only share, and the ten largest groups."""
    if not m:
        return
    c = m["counts"]
    t = Table(title="shapes: groups by size", title_justify="left")
    t.add_column("size")
    for scope in SCOPES:
        t.add_column(scope, justify="right")
    labels = ("1", "2", "3-4", "5-9", "10-49", "50+")
    for label in labels:
        t.add_row(label, *(str(m["groups_by_size"][sc].get(label, 0)) for sc in SCOPES))
    console.print(t)
    big = Table(title=f"ten largest groups (scope {m['scope']})", title_justify="left")
    for col in ("group", "size", "digit-only", "file", "shape", "example comment"):
        big.add_column(col, justify="right" if col in ("group", "size") else "left")
    for g in m["largest"]:
        big.add_row(
            str(g["group_id"]),
            str(g["size"]),
            "yes" if g["digit_only"] else "no",
            f"{g['repo']}:{g['path']}",
            g["shape_text"].replace("\n", " | ")[:70] or "(no changed lines)",
            g["comment"].replace("\n", " ")[:40],
        )
    console.print(big)
    console.print(
        f"shapes ({m['policy']}, scope {m['scope']}): {c['items_in']} items, "
        f"{c['digit_only']} digit-only ({100 * c['digit_only_share']:.1f}%); grouped items "
        + ", ".join(f"{sc} {c[f'grouped_items_{sc}']} in {c[f'groups_{sc}']}" for sc in SCOPES)
        + f"; {c['kept']} kept, {c['removed']} removed"
        + (f", {c['spread_conflicts']} spread conflicts" if m["policy"] == "spread" else "")
    )

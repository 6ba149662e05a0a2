"""Filter drop rules: how many items each rule dropped, and a few of them to judge it by; and
the flags: how many kept items each flag rule marked (they stay in the corpus, flagged).

Examples are the lowest ids of each rule (ids are content hashes, so this is a stable, spread
sample that does not depend on the order of the input or of the Parquet parts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import polars as pl

from pipeline.parts import Parts, as_frame, num_rows, scan_output
from pipeline.report.common import ITEM_COLS, export_files, member, pct
from pipeline.stage import SPLITS
from pipeline.storage import Location

EXAMPLES = 5  # examples shown per rule
FLAG_EXAMPLES = 2  # examples shown per flag
# what rule_examples counts and orders the rejected items by; the rest only for examples
COUNTED = ("id", "rule", "rules", "source", "source_ref")


def _lowest(best: pl.DataFrame | None, batch: pl.DataFrame, k: int) -> pl.DataFrame:
    """The `k` rows of each rule first in (id, source, source_ref) order, of `best` (those of
    the batches before) and `batch`."""
    rows = batch if best is None else pl.concat([best, batch])
    sort_by = ["id"] + [c for c in ("source", "source_ref") if c in rows.columns]
    lowest = rows.sort(sort_by).group_by("rule", maintain_order=True).head(k)
    return lowest.select(rows.columns)  # head puts the rule first


def rule_examples(
    rejected: pl.DataFrame | Iterable[pl.DataFrame],
    per_rule: int = EXAMPLES,
    text: Callable[[np.ndarray], pl.DataFrame] | None = None,
) -> list[dict[str, Any]]:
    """[{rule, dropped, matched, share, examples: [member + reason, rules]}], most dropped first.

    `dropped` counts items whose first matching rule is this one (the `rule` column, so the
    counts add up to the rejected items); `matched` counts rejected items this rule matched at
    all (the `rules` list: an item a lock-file rule dropped may also have a bot author).
    `rejected`: its rows, or batches of them in order (counted, and their examples chosen, as
    they come: a batch at a time is held). `text(rows)`: the examples' other columns
    (ITEM_COLS, reason), given their row numbers in `rejected`, where it holds only what is
    counted and sorted on (the rejected items' text is read for the examples alone).
    """
    n, dropped, matched, picks = 0, [], [], None
    for b in [rejected] if isinstance(rejected, pl.DataFrame) else rejected:
        b = b.with_row_index("_at", offset=n)
        n += b.height
        dropped.append(b.group_by("rule").len("dropped"))
        if "rules" in b.columns:
            rules = b.select(pl.col("rules").alias("rule")).explode("rule")
            matched.append(rules.group_by("rule").len("matched"))
        picks = _lowest(picks, b, per_rule)
    if not n or picks is None:
        return []
    counted = pl.concat(dropped).group_by("rule").agg(pl.col("dropped").sum())
    if matched:
        m = pl.concat(matched).group_by("rule").agg(pl.col("matched").sum())
        counted = counted.join(m, on="rule", how="left")
    else:
        counted = counted.with_columns(matched=pl.col("dropped"))
    counted = counted.sort(["dropped", "rule"], descending=[True, False])
    if text is not None:
        picks = pl.concat([picks, text(picks["_at"].to_numpy())], how="horizontal")
    out = []
    for r in counted.iter_rows(named=True):
        ex = []
        for x in picks.filter(pl.col("rule") == r["rule"]).iter_rows(named=True):
            also = [q for q in (x.get("rules") or []) if q != r["rule"]]
            ex.append({**member(x), "reason": x.get("reason") or "", "also": also})
        out.append(
            {
                "rule": r["rule"],
                "dropped": r["dropped"],
                "matched": r["matched"] if r["matched"] is not None else r["dropped"],
                "share": pct(r["dropped"], n),
                "examples": ex,
            }
        )
    return out


COUNT_BATCH = 1 << 18  # rejected rows counted at once


def filter_rules(run_dir: Location, manifest: dict[str, Any]) -> dict[str, Any]:
    """The filter section: items in, rejected, and each drop rule with its examples."""
    p = run_dir / "filter" / "rejected.parquet"
    rejected, rules = 0, []
    if p.exists():
        parts = Parts(p)
        have = parts.schema_arrow.names
        counted = [c for c in COUNTED if c in have]
        shown = [c for c in (*ITEM_COLS, "reason") if c in have and c not in counted]

        def text(rows: np.ndarray) -> pl.DataFrame:
            return as_frame(parts.take(rows, shown))

        rejected = num_rows(p)
        batches = (as_frame(b) for b in parts.iter_batches(COUNT_BATCH, counted, exact=False))
        rules = rule_examples(batches, text=text) if rejected else []
    c = manifest.get("counts", {})
    return {
        "items_in": c.get("items_in"),
        "rejected": rejected,
        "flagged": c.get("flagged"),
        "examples_per_rule": EXAMPLES,
        "rules": rules,
        "flags": flag_counts(run_dir),
    }


def _exported(run_dir: Location, ids: pl.DataFrame) -> pl.DataFrame | None:
    """Which of `ids` (a column id) were exported (None when the export has not run): the
    split files' ids are matched as they are read, never all held."""
    files = export_files(run_dir)
    if len(files) < len(SPLITS):
        return None
    want = ids.lazy()
    found = [scan_output(f).select("id").join(want, on="id", how="semi") for f in files.values()]
    return pl.concat(pl.collect_all(found)).unique()


NOT_SHOWN = ("possible_secret",)  # flags whose examples the report leaves out


def flag_counts(run_dir: Location, per_flag: int = FLAG_EXAMPLES) -> dict[str, Any]:
    """{kept, flagged, exported_known, flags: [{flag, items, share, exported, examples}]}: per
    flag, the rows of filter/kept.parquet it marks (an item may carry several flags), how many
    exported items carry it, and the lowest ids as examples. Only the id and flags columns
    are read whole; the examples' text is read for those ids alone."""
    p = run_dir / "filter" / "kept.parquet"
    none = {"kept": 0, "flagged": 0, "exported_known": False, "examples_per_flag": 0, "flags": []}
    if not p.exists():
        return none
    lf = scan_output(p)
    if "flags" not in lf.collect_schema().names():
        return none
    kept = int(lf.select(pl.len()).collect().item())
    # only the flagged rows are held (a filter as the file is read)
    marked = (
        lf.select("id", "flags")
        .with_row_index("row")
        .filter(pl.col("flags").list.len() > 0)
        .collect()
    )
    per = (
        marked.explode("flags")
        .rename({"flags": "flag"})
        .drop_nulls("flag")
        .unique(["row", "flag"])  # a flag twice in one row's list counts once
    )
    counted = per.group_by("flag").agg(
        pl.len().alias("items"), pl.col("id").unique().sort().head(per_flag).alias("ids")
    )
    exported = _exported(run_dir, per.select(pl.col("id").unique()))
    if exported is not None:  # exported items (one per id) that carry the flag
        out = (
            per.unique(["id", "flag"])
            .join(exported, on="id", how="semi")
            .group_by("flag")
            .len("exported")
        )
        counted = counted.join(out, on="flag", how="left").with_columns(
            pl.col("exported").fill_null(0)
        )
    counted = counted.sort(["items", "flag"], descending=[True, False])
    wanted = sorted({i for ids in counted["ids"].to_list() for i in ids})
    have = set(lf.collect_schema().names())
    byid = {
        r["id"]: r
        for r in lf.filter(pl.col("id").is_in(wanted))
        .select([c for c in (*ITEM_COLS, "flags") if c in have])
        .collect()
        .unique("id")
        .iter_rows(named=True)
    }
    rows = []
    for r in counted.iter_rows(named=True):
        ex = []
        # a possible secret is kept as written: the report counts it, never shows its text
        for i in [] if r["flag"].startswith(NOT_SHOWN) else r["ids"]:
            if i in byid:
                x = byid[i]
                ex.append({**member(x), "flags": list(x.get("flags") or [])})
        rows.append(
            {
                "flag": r["flag"],
                "items": int(r["items"]),
                "share": pct(int(r["items"]), kept),
                "exported": None if exported is None else int(r["exported"]),
                "examples": ex,
            }
        )
    return {
        "kept": kept,
        "flagged": marked.height,
        "exported_known": exported is not None,
        "examples_per_flag": per_flag,
        "flags": rows,
    }

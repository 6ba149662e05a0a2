"""Filter drop rules: how many items each rule dropped, and a few of them to judge it by.

Examples are the lowest ids of each rule (ids are content hashes, so this is a stable, spread
sample that does not depend on the order of the input or of the Parquet parts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from pipeline.report.common import member, pct

EXAMPLES = 5  # examples shown per rule


def rule_examples(rejected: pl.DataFrame, per_rule: int = EXAMPLES) -> list[dict[str, Any]]:
    """[{rule, dropped, matched, share, examples: [member + reason, rules]}], most dropped first.

    `dropped` counts items whose first matching rule is this one (the `rule` column, so the
    counts add up to the rejected items); `matched` counts rejected items this rule matched at
    all (the `rules` list: an item a lock-file rule dropped may also have a bot author).
    """
    if rejected.is_empty():
        return []
    n = rejected.height
    dropped = rejected.group_by("rule").len("dropped")
    if "rules" in rejected.columns:
        matched = (
            rejected.select(pl.col("rules").alias("rule"))
            .explode("rule")
            .group_by("rule")
            .len("matched")
        )
        dropped = dropped.join(matched, on="rule", how="left")
    else:
        dropped = dropped.with_columns(matched=pl.col("dropped"))
    dropped = dropped.sort(["dropped", "rule"], descending=[True, False])
    sort_by = ["id"] + [c for c in ("source", "source_ref") if c in rejected.columns]
    picks = rejected.sort(sort_by).group_by("rule", maintain_order=True).head(per_rule)
    out = []
    for r in dropped.iter_rows(named=True):
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


def filter_rules(run_dir: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """The filter section: items in, rejected, and each drop rule with its examples."""
    p = run_dir / "filter" / "rejected.parquet"
    rej = pl.read_parquet(p) if p.exists() else pl.DataFrame()
    c = manifest.get("counts", {})
    flagged = c.get("flagged")
    return {
        "items_in": c.get("items_in"),
        "rejected": rej.height,
        "flagged": flagged,
        "examples_per_rule": EXAMPLES,
        "rules": rule_examples(rej) if rej.height else [],
    }

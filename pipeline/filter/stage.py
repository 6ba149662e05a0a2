"""The filter stage: ingest/items.parquet -> kept.parquet (+ flags), rejected.parquet.

Streams the input in batches (memory stays bounded), keeps input order, and records per rule
what it dropped, flagged and also matched, and which drop rules overlapped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from rich.markup import escape
from rich.table import Table

from pipeline.config import Config
from pipeline.console import console
from pipeline.executors import partitioned
from pipeline.filter.apply import apply_rules
from pipeline.filter.kinds import KINDS
from pipeline.filter.kinds.contract import FindFn, Found
from pipeline.filter.rules import Rule, RulesError, RuleSet, load_rules, rules_path
from pipeline.parts import num_rows
from pipeline.runs import StageFailed
from pipeline.schema import ITEM_SCHEMA
from pipeline.storage import Location

if TYPE_CHECKING:
    from pipeline.runner import StageIO

STAGE = "filter"
# every column that reaches the export is described once in schema.COLUMN_DOCS (the card)
_FLAGS = pa.field("flags", pa.list_(pa.string()), nullable=False)
KEPT_SCHEMA = pa.schema([*ITEM_SCHEMA, _FLAGS])
REJECTED_SCHEMA = pa.schema(
    [
        *ITEM_SCHEMA,
        pa.field("rule", pa.string(), nullable=False),  # the first drop rule that matched
        pa.field("reason", pa.string(), nullable=False),  # why, in words; never matched text
        pa.field("rules", pa.list_(pa.string()), nullable=False),  # every drop rule matched
        _FLAGS,
    ]
)


class FilterFailed(StageFailed):
    """The filter stage cannot run (no ingest output, bad rules file)."""


def _load(cfg: Config) -> RuleSet:
    try:
        return load_rules(rules_path(cfg))
    except RulesError as e:
        raise FilterFailed(str(e)) from None


def key(cfg: Config) -> tuple[str, dict[str, str]]:
    """The rule set, loaded and validated before anything runs: its content is fingerprinted
    (editing a rules file re-runs the stage)."""
    return _load(cfg).fingerprint, {}


@dataclass(frozen=True)
class Context:
    """What every batch is filtered with: the rules, and what each rule of a kind that finds
    over the whole input found there (a mirror rule's folders, a moved rule's deletions)."""

    rules: RuleSet
    found: dict[str, Found]


def start(cfg: Config, source: Location) -> Context:
    """The rules, and what the rules of kinds that find over the whole input found there.
    A finding is whole within a repository (Kind.find), so on Ray each hash partition of
    the input by repo is searched by a task of its own, and the findings, sorted, are the
    same as one search over everything."""
    rules = _load(cfg)
    finders = [r for r in rules.active if KINDS[r.type].find is not None]
    if not finders:
        return Context(rules, {})
    columns = sorted({c for r in finders for c in KINDS[r.type].find_columns})
    found_in = partitioned(cfg, source, "repo", columns, _find, finders)
    found = {r.name: tuple(sorted(x for f in found_in for x in f[r.name])) for r in finders}
    return Context(rules, found)


def _find(items: pl.LazyFrame, finders: list[Rule]) -> dict[str, Found]:
    """What each rule of `finders` finds over `items`."""
    return {r.name: cast(FindFn, KINDS[r.type].find)(items, r.params) for r in finders}


def _arrow(df: pl.DataFrame, schema: pa.Schema) -> pa.Table:
    return df.to_arrow(compat_level=pl.CompatLevel.oldest()).cast(schema)


def map_batch(batch: pa.RecordBatch, ctx: Context) -> tuple[dict[str, pa.Table], dict[str, Any]]:
    """One batch of items -> kept and rejected rows, and counts to be summed."""
    frame = cast(pl.DataFrame, pl.from_arrow(pa.Table.from_batches([batch])))
    res = apply_rules(frame, ctx.rules, ctx.found)
    mirrored = {}
    mirror_rules = [r.name for r in ctx.rules.active if r.type == "mirror"]
    if mirror_rules and res.rejected.height:
        why = res.rejected.filter(pl.col("rule").is_in(mirror_rules))
        mirrored = dict(why.group_by("reason").len().iter_rows())
    kept = _arrow(res.kept, KEPT_SCHEMA)
    counts = {
        "items_in": batch.num_rows,
        "hits": res.hits,
        "dropped": res.dropped,
        "flagged_by": res.flagged,
        "overlaps": {"\x1f".join(k): v for k, v in res.overlaps.items()},
        "masked": res.masked,
        "flagged": int(pc.sum(pc.greater(pc.list_value_length(kept["flags"]), 0)).as_py() or 0),
        "mirrored": mirrored,  # a mirror folder's reason -> its items dropped
    }
    return {"kept.parquet": kept, "rejected.parquet": _arrow(res.rejected, REJECTED_SCHEMA)}, counts


def finalize(cfg: Config, t: dict[str, Any], io: StageIO) -> tuple[dict[str, Any], dict[str, Any]]:
    """The summed batch counts -> the manifest's counts and per-rule table."""
    rules = _load(cfg)
    rows = {n: num_rows(io.dir / n) for n in STAGE_FILES}
    counts = {
        "items_in": t.get("items_in", 0),
        "kept": rows["kept.parquet"],
        "rejected": rows["rejected.parquet"],
        "flagged": t.get("flagged", 0),
        "secrets_masked": t.get("masked", 0),
    }
    hits, dropped, flagged = t.get("hits", {}), t.get("dropped", {}), t.get("flagged_by", {})
    per_rule = []
    for r in rules.rules:
        row: dict[str, Any] = {
            "rule": r.name,
            "type": r.type,
            "action": r.action if r.enabled else "off",
        }
        if r.enabled:
            h, d, f = hits.get(r.name, 0), dropped.get(r.name, 0), flagged.get(r.name, 0)
            row.update(hits=h, dropped=d, flagged=f, also=h - d - f)
        per_rule.append(row)
    overlaps = sorted(t.get("overlaps", {}).items(), key=lambda kv: (-kv[1], kv[0]))
    extra = {
        "rules": {"set": rules.name, "files": list(rules.files), "fingerprint": rules.fingerprint},
        "per_rule": per_rule,
        "overlaps": [{"rules": k.split("\x1f"), "items": v} for k, v in overlaps],
        "mirrors": [{"mirror": k, "items": v} for k, v in sorted(t.get("mirrored", {}).items())],
    }
    return counts, extra


STAGE_FILES = ("kept.parquet", "rejected.parquet")


def print_summary(m: dict[str, Any] | None) -> None:
    """Rule by rule: what it dropped (first match), flagged (kept), also matched, share."""
    if not m:
        return
    c = m["counts"]
    n = c["items_in"]

    def share(k: int) -> str:
        return f"{100 * k / n:.2f}%" if n else "-"

    title = f"filter (rules: {escape(str(m['rules']['set']))}, {n} items in)"
    t = Table(title=title, title_justify="left")
    for col in ("rule", "action", "dropped", "flagged", "also hit", "share of input"):
        t.add_column(col, justify="left" if col in ("rule", "action") else "right")
    for r in m["per_rule"]:
        if r["action"] == "off":
            t.add_row(f"[dim]{r['rule']}", "[dim]off", "", "", "", "")
            continue
        k = r["dropped"] if r["action"] == "drop" else r["flagged"]
        t.add_row(
            r["rule"], r["action"], str(r["dropped"]), str(r["flagged"]), str(r["also"]), share(k)
        )
    t.add_section()
    t.add_row("total", "", str(c["rejected"]), str(c["flagged"]), "", share(c["rejected"]))
    console.print(t)
    console.print(
        f"filter: {n} items -> {c['kept']} kept ({c['flagged']} flagged), {c['rejected']} "
        f"rejected, {c['secrets_masked']} with secrets masked. 'also hit': matched by the rule "
        f"but already dropped by an earlier one (or, for a flag, rejected)."
    )
    for mirror in m.get("mirrors", []):
        console.print(f"filter: {escape(mirror['mirror'])} ({mirror['items']} items dropped)")
    if m["overlaps"]:
        top = ", ".join(f"{' & '.join(o['rules'])} {o['items']}" for o in m["overlaps"][:8])
        console.print(f"overlaps (items matched by both): {top}")

"""The filter stage: ingest/items.parquet -> kept.parquet (+ flags), rejected.parquet.

Streams the input in batches (memory stays bounded), keeps input order, and records per rule
what it dropped, flagged and also matched, and which drop rules overlapped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from rich.markup import escape
from rich.table import Table

from pipeline.config import Config
from pipeline.console import console, progress
from pipeline.filter.apply import apply_rules
from pipeline.filter.rules import RulesError, RuleSet, load_rules, rules_path
from pipeline.runs import (
    StageFailed,
    StageRun,
    code_version,
    input_fingerprint,
    parquet_sink,
    require_output,
    stage_fingerprint,
)
from pipeline.schema import ITEM_SCHEMA

STAGE = "filter"
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


def _input(cfg: Config) -> Path:
    return cfg.run_dir / "ingest" / "items.parquet"


def _load(cfg: Config) -> RuleSet:
    try:
        return load_rules(rules_path(cfg))
    except RulesError as e:
        raise FilterFailed(str(e)) from None


def prepare(cfg: Config) -> StageRun:
    rules = _load(cfg)
    inp = _input(cfg)
    require_output(inp, "ingest", "filter", FilterFailed)
    section_fp = cfg.fingerprint(STAGE) + rules.fingerprint
    return StageRun(
        run_dir=cfg.run_dir,
        stage=STAGE,
        fingerprint=stage_fingerprint(STAGE, section_fp, code_version(STAGE)),
        config_fingerprint=cfg.fingerprint(),
        inputs={"ingest/items.parquet": input_fingerprint(inp)},
    )


def _arrow(df: pl.DataFrame, schema: pa.Schema) -> pa.Table:
    return df.to_arrow(compat_level=pl.CompatLevel.oldest()).cast(schema)


def run(cfg: Config, sr: StageRun) -> dict[str, Any]:
    rules = _load(cfg)
    sr.begin()
    src = pq.ParquetFile(_input(cfg))
    total = src.metadata.num_rows
    hits = dict.fromkeys((r.name for r in rules.active), 0)
    dropped: dict[str, int] = {}
    flagged: dict[str, int] = {}
    overlaps: dict[tuple[str, str], int] = {}
    masked = 0
    with (
        parquet_sink(sr.dir / "kept.parquet", KEPT_SCHEMA, sr.meta) as kept_w,
        parquet_sink(sr.dir / "rejected.parquet", REJECTED_SCHEMA, sr.meta) as rej_w,
        progress() as bar,
    ):
        task = bar.add_task("filter", total=total)
        for batch in src.iter_batches(batch_size=cfg.filter.batch_size):
            frame = cast(pl.DataFrame, pl.from_arrow(pa.Table.from_batches([batch])))
            res = apply_rules(frame, rules)
            kept_w.write_table(_arrow(res.kept, KEPT_SCHEMA))
            rej_w.write_table(_arrow(res.rejected, REJECTED_SCHEMA))
            for acc, part in (
                (hits, res.hits),
                (dropped, res.dropped),
                (flagged, res.flagged),
                (overlaps, res.overlaps),
            ):
                counter: dict[Any, int] = acc
                for k, v in part.items():
                    counter[k] = counter.get(k, 0) + v
            masked += res.masked
            bar.advance(task, batch.num_rows)
    sr.record_output("kept.parquet", "items")
    sr.record_output("rejected.parquet", "terminal")
    kept_rows = sr.outputs["kept.parquet"]["rows"]
    n_flagged = (
        pl.scan_parquet(sr.dir / "kept.parquet")
        .select((pl.col("flags").list.len() > 0).sum())
        .collect()
        .item()
    )
    counts = {
        "items_in": total,
        "kept": kept_rows,
        "rejected": sr.outputs["rejected.parquet"]["rows"],
        "flagged": n_flagged,
        "secrets_masked": masked,
    }
    per_rule = []
    for r in rules.rules:
        row: dict[str, Any] = {
            "rule": r.name,
            "type": r.type,
            "action": r.action if r.enabled else "off",
        }
        if r.enabled:
            d = dropped.get(r.name, 0)
            f = flagged.get(r.name, 0)
            row.update(hits=hits[r.name], dropped=d, flagged=f, also=hits[r.name] - d - f)
        per_rule.append(row)
    extra = {
        "rules": {"set": rules.name, "files": list(rules.files), "fingerprint": rules.fingerprint},
        "per_rule": per_rule,
        "overlaps": [
            {"rules": list(k), "items": v}
            for k, v in sorted(overlaps.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        "conservation": {
            "kind": "ids",
            "input": "../ingest/items.parquet",
            "outputs": ["kept.parquet", "rejected.parquet"],
        },
    }
    sr.finish(counts, extra)
    return counts


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
    if m["overlaps"]:
        top = ", ".join(f"{' & '.join(o['rules'])} {o['items']}" for o in m["overlaps"][:8])
        console.print(f"overlaps (items matched by both): {top}")

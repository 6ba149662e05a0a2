"""The export's dataset card (README.md) in the Hugging Face convention, and the HF dataset.

The card opens with YAML front matter the Hub reads (configs / data_files per split, license
and, for license "other", license_name and license_link, task_categories, size_categories,
tags), then the splits (and the validation and test items that share a change with train, as
the export counted them: a warning with that figure per source where the split rule let a
change span splits), the fields (every column of the exported files, its type and what it
holds: pipeline/schema.py COLUMN_DOCS), the curation funnel (every stage that ran, in PIPELINE
order, from its manifest), the sources, the license and the provenance. Every name from the
data is escaped for Markdown.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from pipeline import storage
from pipeline.config import Config
from pipeline.export.split import sharing_change
from pipeline.parts import remove
from pipeline.report.render import md_cell_code as code_cell
from pipeline.report.render import md_text
from pipeline.runs import StageRun, output_sha, read_manifest
from pipeline.schema import column_doc
from pipeline.stage import NAMES, SPLITS
from pipeline.storage import Location

SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
    (1_000_000_000, "100M<n<1B"),
)


def size_category(n: int) -> str:
    for hi, label in SIZE_CATEGORIES:
        if n < hi:
            return label
    return "n>1B"


OTHER = "other"  # the Hub's license for one it does not list: license_name names it
UNKNOWN_LICENSE = "unknown"  # license_name when export.license_name is unset


def front_matter(cfg: Config, n: int) -> str:
    """The YAML block the Hub reads (safe_dump: a run name cannot break out of it)."""
    e = cfg.export
    lic: dict[str, str] = {"license": e.license}
    if e.license == OTHER:  # the Hub's dataset-card spec: an id, and a URL or a repo file
        lic["license_name"] = e.license_name or UNKNOWN_LICENSE
        if e.license_link:
            lic["license_link"] = e.license_link
    meta = {
        "pretty_name": f"editcurate export: {cfg.run.name}",
        **lic,
        "task_categories": ["text-generation"],
        "size_categories": [size_category(n)],
        "tags": ["code", "code-review", "code-editing", "editcurate"],
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": s, "path": f"{s}.parquet/*.parquet"} for s in SPLITS],
            }
        ],
    }
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def license_lines(cfg: Config) -> list[str]:
    """The card's License section: the license, and for "other" its name and link, or, with
    no name set, why one is wanted and which keys set it."""
    e = cfg.export
    if e.license != OTHER:
        return [f"License: {code_cell(e.license)} (export.license)."]
    if e.license_name:
        link = f", {code_cell(e.license_link)}" if e.license_link else ""
        return [f"License: {code_cell(e.license_name)}{link} (export.license_name, license_link)."]
    return [
        f"License: {code_cell(OTHER)}, not named (license_name {code_cell(UNKNOWN_LICENSE)}).",
        "The items are code and review comments mined from repositories, each under its own",
        "repository's license: set `export.license_name` and `export.license_link` to the",
        "license this dataset is shared under.",
    ]


def fields(schema: pa.Schema) -> list[str]:
    """Markdown rows: every column of the exported files, its Arrow type and what it holds."""
    rows = ["| column | type | description |", "|---|---|---|"]
    for f in schema:
        doc = md_text(column_doc(f.name) or "(no description)")
        rows.append(f"| {code_cell(f.name)} | {code_cell(f.type)} | {doc} |")
    return rows


Row = tuple[str, int, int, str]  # in (with its unit), out, removed, main reasons (Markdown)


def _ingest(m: dict[str, Any]) -> Row:
    c = m["counts"]
    err, skip = c.get("errors_out", 0), c.get("skipped_out", 0)
    why = f"errors {err}, skipped {skip}"
    return f"{c.get('records_in', 0)} records", c.get("items_out", 0), err + skip, why


def _filter(m: dict[str, Any]) -> Row:
    c = m["counts"]
    top = sorted(
        (r for r in m.get("per_rule", []) if r.get("dropped")), key=lambda r: -r["dropped"]
    )
    why = ", ".join(f"{md_text(r['rule'])} {r['dropped']}" for r in top[:5]) or "-"
    return str(c["items_in"]), c["kept"], c["rejected"], why


DEDUP_REASONS = (
    ("same id", "removed_same_id"),
    ("same content", "removed_same_content"),
    ("near duplicate", "removed_near"),
    ("same id as an indexed item", "removed_same_id_indexed"),
    ("same content as an indexed item", "removed_same_content_indexed"),
    ("near an indexed item", "removed_near_indexed"),
)


def _dedup(m: dict[str, Any]) -> Row:
    c = m["counts"]
    why = ", ".join(
        f"{label} {c.get(k, 0)}" for label, k in DEDUP_REASONS if c.get(k) or "indexed" not in k
    )
    return str(c["items_in"]), c["kept"], c["removed"], why


def _decontaminate(m: dict[str, Any]) -> Row:
    c = m["counts"]
    marks = m.get("benchmarks") or {}
    if not marks:
        why = "no benchmark (decontaminate.against)"
    else:
        why = ", ".join(f"{code_cell(b)} {v.get('removed', 0)}" for b, v in sorted(marks.items()))
        why += (
            f" (same content {c.get('removed_same_content', 0)}, near {c.get('removed_near', 0)})"
        )
    return str(c["items_in"]), c["kept"], c["removed"], why


def _shapes(m: dict[str, Any]) -> Row:
    c = m["counts"]
    why = f"policy {md_text(m.get('policy', '?'))} at scope {md_text(m.get('scope', '?'))}"
    return str(c["items_in"]), c["kept"], c["removed"], why


def _counted(m: dict[str, Any]) -> Row:
    """A stage with no row of its own here: the counts every items stage records."""
    c = m["counts"]
    n, kept = c.get("items_in", 0), c.get("kept", 0)
    return str(n), kept, c.get("removed", n - kept), "-"


ROWS: dict[str, Callable[[dict[str, Any]], Row]] = {
    "ingest": _ingest,
    "filter": _filter,
    "dedup": _dedup,
    "decontaminate": _decontaminate,
    "shapes": _shapes,
}


def funnel(run_dir: Location, counts: dict[str, Any]) -> list[str]:
    """Markdown rows: what each stage that ran received, kept and removed, and its main
    reasons, in PIPELINE order from the stages' manifests; export's own row from its counts
    (its manifest is written after the card)."""
    rows = ["| stage | in | out | removed | main reasons |", "|---|---:|---:|---:|---|"]
    for name in NAMES:
        if name == "export":
            out = sum(counts[s] for s in SPLITS)
            split = ", ".join(f"{s} {counts[s]}" for s in SPLITS)
            rows.append(
                f"| export | {counts['items_in']} | {out} | {counts['items_in'] - out} | {split} |"
            )
            continue
        m = read_manifest(run_dir / name)
        if m is None or not m.get("counts"):
            continue
        n_in, out, gone, why = ROWS.get(name, _counted)(m)
        rows.append(f"| {name} | {n_in} | {out} | {gone} | {why} |")
    return rows


def changes(counts: dict[str, Any], extra: dict[str, Any]) -> list[str]:
    """The card's lines on held-out items that share a change with train: a warning with
    the figure where the split rule let changes span splits, else the figure."""
    sh = sharing_change(counts, extra)
    if sh.get("warning"):
        return ["", f"**Warning**: {md_text(sh['warning'])}"]
    return ["", f"Validation and test items sharing a change with train: {md_text(sh['note'])}."]


def card(
    counts: dict[str, Any], extra: dict[str, Any], cfg: Config, sr: StageRun, schema: pa.Schema
) -> str:
    """The card's Markdown; `schema` is the exported files' (for the Fields table)."""
    n = max(counts["items_in"], 1)
    fmt = extra["format"]
    ran = ", ".join(s for s in NAMES if s != "export")
    lines = [
        front_matter(cfg, counts["items_in"]),
        f"# editcurate export: {md_text(cfg.run.name)}",
        "",
        "Code-review edits (before -> after with the review comment), curated by editcurate",
        f"({ran}) and split leakage-free by whole group.",
        "",
        "## Splits",
        "",
        "| split | items | share | groups |",
        "|---|---:|---:|---:|",
        *(
            f"| {s} | {counts[s]} | {100 * counts[s] / n:.2f}% | {counts[f'groups_{s}']} |"
            for s in SPLITS
        ),
        "",
        f"Split rule: {extra['split_rule']}.",
        f"Groups spanning two splits: {counts['cross_split_groups']}.",
        *changes(counts, extra),
        "",
        f"Format: {fmt}"
        + (" (prompt/completion from pipeline/template.py `render`)." if fmt == "sft" else "."),
        "",
        "## Fields",
        "",
        *fields(schema),
        "",
        "## Curation funnel",
        "",
        *funnel(cfg.run_dir, counts),
        "",
        "## Sources",
        "",
        "| source | split | items |",
        "|---|---|---:|",
        *(f"| {code_cell(r['source'])} | {r['split']} | {r['len']} |" for r in extra["by_source"]),
        "",
        "## License",
        "",
        *license_lines(cfg),
        "",
        "## Provenance",
        "",
        f"- config fingerprint: `{sr.config_fingerprint}`",
        f"- export stage fingerprint: `{sr.fingerprint}`",
        *(f"- input `{k}`: `{v}`" for k, v in sorted(sr.inputs.items())),
        "",
        'Load with `datasets.load_dataset("parquet", data_files=...)` (the front matter lists',
        'the files), or `datasets.load_from_disk("hf")`.',
        "",
    ]
    return "\n".join(lines)


def _dataset(path: Location, cache: Path) -> Any:
    """A split as a datasets.Dataset memory-mapped from the Parquet file (an empty one,
    which `from_parquet` refuses, from its schema).

    Its fingerprint (state.json's `_fingerprint`) is the split files' content hash: datasets
    would derive one from the files' paths and times, or draw a random one, so two exports of
    the same data would differ in that one line."""
    import datasets
    from datasets.table import InMemoryTable

    from pipeline.parts import num_rows, part_files, read_table

    fingerprint = output_sha(path)[:16]
    if num_rows(path) == 0:
        return datasets.Dataset(InMemoryTable(read_table(path)), fingerprint=fingerprint)
    files = []
    for f in part_files(path):
        if storage.is_remote(f):  # a local copy, in the cache folder (removed after)
            local = cache / "parts" / path.name / f.name
            local.parent.mkdir(parents=True, exist_ok=True)
            f.fs.get_file(f.path, str(local))
            f = local
        files.append(str(f))
    ds = datasets.Dataset.from_parquet(files, cache_dir=str(cache), keep_in_memory=False)
    # the same memory-mapped table, under the content fingerprint
    return datasets.Dataset(ds.data, info=ds.info, split=ds.split, fingerprint=fingerprint)


def save_hf(files: dict[str, Location], dest: Path) -> None:
    """datasets.DatasetDict.save_to_disk from the split Parquet files into dest (the runner
    renames it into place): the dataset is memory-mapped from an Arrow cache beside dest,
    never built in memory."""
    import shutil

    import datasets

    cache = dest.with_name(dest.name + ".cache")
    remove(cache)  # datasets writes its Arrow cache here: never through a link left in place
    datasets.disable_progress_bars()  # the stage prints its own summary
    try:
        parts = {name: _dataset(path, cache) for name, path in files.items()}
        dd = datasets.DatasetDict(parts)
        # an empty split still gets its one (empty) shard: with none, load_from_disk fails
        empty = {k: 1 for k, d in dd.items() if not d.num_rows}
        dd.save_to_disk(str(dest), num_shards=empty)
        del dd, parts
    finally:
        datasets.enable_progress_bars()
        shutil.rmtree(cache, ignore_errors=True)

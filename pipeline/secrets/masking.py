"""Masking: each secret `finding` finds replaced by `[REDACTED:<rule>]`, in a text (`mask`), in
the head of a long text (`mask_head`), in a message (`shown`), in an Arrow batch's columns
(`mask_columns`; `mask_batch` with a budget per row)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import polars as pl
import pyarrow as pa

from pipeline.secrets.finding import Budget, OverBudget, find, flagged, sample_rules
from pipeline.secrets.places import CONTENT_FIELDS, sample_path

MARK = "[REDACTED:{}]"
HEAD_MARGIN = 16_384  # mask_head reads this far past its cut (longer than any token)


def _replaced(text: str, hits: list[tuple[int, int, str]], end: int) -> tuple[str, list[str]]:
    """text[:end] with each finding that starts before `end` replaced by its mark (whole,
    also where it runs on past `end`)."""
    parts, at, fired = [], 0, []
    for s, e, name in hits:
        if s >= end:
            break
        parts += [text[at:s], MARK.format(name)]
        fired.append(name)
        at = e
    parts.append(text[at:end])
    return "".join(parts), fired


def mask(
    text: str,
    only: list[int] | None = None,
    path: str | None = None,
    budget: Budget | None = None,
) -> tuple[str, list[str]]:
    """(text with every secret replaced by [REDACTED:<rule>], the rules that fired); path:
    the item's file (SAMPLE rules do not apply in test fixtures and documentation); budget:
    the work the scan may do (finding.OverBudget past it)."""
    hits = find(text, only, path, budget)
    return _replaced(text, hits, len(text)) if hits else (text, [])


def mask_head(text: str, limit: int) -> tuple[str, list[str]]:
    """mask(text[:limit]), the secrets found in text[:limit + HEAD_MARGIN]: one the cut goes
    through is found whole and masked, never shown in part (nor missed, cut too short)."""
    return _replaced(text, find(text[: limit + HEAD_MARGIN]), min(limit, len(text)))


def shown(text: str) -> str:
    """Text from the data as a message shows it: secrets masked, on one line, control
    characters escaped (`\\x1b`, never a terminal escape sequence: console.visible)."""
    from pipeline.console import visible  # here: ingest workers mask without the console

    return visible(mask(text)[0], one_line=True)


def mask_columns(
    batch: pa.RecordBatch, columns: tuple[str, ...]
) -> tuple[pa.RecordBatch, dict[str, int]]:
    """The batch with secrets masked in `columns` (string), and secrets masked per rule
    (mask_batch without a budget)."""
    out = mask_batch(batch, columns)
    return out.batch, out.fired


@dataclass
class Masked:
    batch: pa.RecordBatch
    fired: dict[str, int]  # rule -> secrets masked (in the rows not over budget)
    # rows whose scan passed the budget: their `columns` are blanked (""), never left
    # unmasked, and the caller takes them out (ingest: an error record each)
    over: list[int]


def mask_batch(
    batch: pa.RecordBatch, columns: tuple[str, ...], budget: int | None = None
) -> Masked:
    """The batch with secrets masked in `columns` (string), and secrets masked per rule.

    The prefilters run vectorised over the row's columns joined (one scan per rule, the
    regexes compiled once a batch); Python looks only at the rows they flag. A row whose
    `path` (when the batch has one) is a test fixture or documentation keeps the SAMPLE
    findings (JWTs, passwords in URLs) of its file's text (CONTENT_FIELDS): examples there.
    budget: the scan work each row may take, all its columns together (finding.Budget)."""
    fired: dict[str, int] = {}
    if batch.num_rows == 0:
        return Masked(batch, fired, [])
    cols = [batch.schema.get_field_index(c) for c in columns]
    frame = pl.DataFrame(
        [cast(pl.Series, pl.from_arrow(batch.column(i))).alias(str(i)) for i in cols]
    )
    joined = frame.select(
        pl.concat_str([pl.col(str(i)).fill_null("") for i in cols], separator="\n")
    ).to_series()
    which = flagged(joined)
    if not which:
        return Masked(batch, fired, [])
    rows = list(which)
    samples: dict[int, list[int]] = {}  # row -> its rules but SAMPLE ones: a test's or doc's
    if "path" in batch.schema.names:
        paths = batch.column(batch.schema.get_field_index("path"))
        for k in rows:
            if sample_path(paths[k].as_py()):
                samples[k] = [i for i in which[k] if i not in sample_rules()]
    budgets = {k: Budget(budget) for k in rows} if budget is not None else {}
    over: set[int] = set()
    names_of: dict[int, list[str]] = {}
    fixes: dict[int, dict[int, str]] = {}  # column -> row -> its masked text
    for i in cols:
        content = batch.schema.field(i).name in CONTENT_FIELDS
        fixed = fixes[i] = {}
        for k, v in zip(rows, frame[str(i)].gather(rows).to_list(), strict=True):
            if k in over or not v:
                continue
            only = samples.get(k, which[k]) if content else which[k]
            try:
                new, names = mask(v, only, budget=budgets.get(k))
            except OverBudget:
                over.add(k)
                continue
            names_of.setdefault(k, []).extend(names)
            if names:
                fixed[k] = new
    for k, names in names_of.items():
        for n in names if k not in over else ():
            fired[n] = fired.get(n, 0) + 1
    arrays = list(batch.columns)
    for i, fixed in fixes.items():
        fixed.update(dict.fromkeys(over, ""))  # never shown unmasked
        if fixed:
            col = frame[str(i)].clone().scatter(list(fixed), list(fixed.values()))
            arrays[i] = col.to_arrow().cast(batch.schema.field(i).type)
    batch = pa.RecordBatch.from_arrays(arrays, schema=batch.schema)
    return Masked(batch, fired, sorted(over))

"""Masking: each secret `finding` finds replaced by `[REDACTED:<rule>]`, in a text (`mask`), in
the head of a long text (`mask_head`), in a message (`shown`), in an Arrow batch's columns
(`mask_columns`)."""

from __future__ import annotations

from typing import cast

import polars as pl
import pyarrow as pa

from pipeline.secrets.finding import find, flagged, sample_rules
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
    text: str, only: list[int] | None = None, path: str | None = None
) -> tuple[str, list[str]]:
    """(text with every secret replaced by [REDACTED:<rule>], the rules that fired); path:
    the item's file (SAMPLE rules do not apply in test fixtures and documentation)."""
    hits = find(text, only, path)
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
    """The batch with secrets masked in `columns` (string), and secrets masked per rule.

    The prefilters run vectorised over the row's columns joined (one scan per rule, the
    regexes compiled once a batch); Python looks only at the rows they flag. A row whose
    `path` (when the batch has one) is a test fixture or documentation keeps the SAMPLE
    findings (JWTs, passwords in URLs) of its file's text (CONTENT_FIELDS): examples there."""
    fired: dict[str, int] = {}
    if batch.num_rows == 0:
        return batch, fired
    cols = [batch.schema.get_field_index(c) for c in columns]
    frame = pl.DataFrame(
        [cast(pl.Series, pl.from_arrow(batch.column(i))).alias(str(i)) for i in cols]
    )
    joined = frame.select(
        pl.concat_str([pl.col(str(i)).fill_null("") for i in cols], separator="\n")
    ).to_series()
    which = flagged(joined)
    if not which:
        return batch, fired
    rows = list(which)
    samples: dict[int, list[int]] = {}  # row -> its rules but SAMPLE ones: a test's or doc's
    if "path" in batch.schema.names:
        paths = batch.column(batch.schema.get_field_index("path"))
        for k in rows:
            if sample_path(paths[k].as_py()):
                samples[k] = [i for i in which[k] if i not in sample_rules()]
    arrays = list(batch.columns)
    for i in cols:
        col = frame[str(i)]
        content = batch.schema.field(i).name in CONTENT_FIELDS
        fixed = {}
        for k, v in zip(rows, col.gather(rows).to_list(), strict=True):
            only = samples.get(k, which[k]) if content else which[k]
            new, names = mask(v, only) if v else (v, [])
            for n in names:
                fired[n] = fired.get(n, 0) + 1
            if names:
                fixed[k] = new
        if fixed:
            col = col.clone().scatter(list(fixed), list(fixed.values()))
            arrays[i] = col.to_arrow().cast(batch.schema.field(i).type)
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema), fired

"""Moved code: a hunk that only deletes lines which another hunk of the same change adds again
(a function moved to another file, a block moved down its file). The deletion alone is half
of an edit: read with its commit subject ("Add parser option"), it teaches a model to delete
working code. The addition stays: what it adds is new where it lands, and in samples read
such hunks (requires moved to where they are used, exports gathered in an index) were edits
a reader keeps.

Found over the filter stage's whole input, before its batches (a `moved` rule's context), since
a change's hunks may fall in different batches:

1. A candidate deletes min_lines or more different substantive lines (stripped of
   indentation; a line with a letter or a digit: a lone bracket is no evidence) and adds no
   substantive line.
2. It is the deletion half of a move when min_share percent or more of those lines are among
   the lines (also stripped) that the change's other hunks add, in any file, the same file
   included.
3. Unless its comment matches an `except` pattern: a change that says it moves code describes
   the deletion too.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.filter.regex import with_flags

_KEY = ["repo", "change"]
# what find reads of the items
FIND_COLUMNS = (
    "repo",
    "change",
    "id",
    "path",
    "comment",
    "before",
    "after",
)
SUBSTANTIVE = r"[\p{L}\p{N}]"  # a line holding a letter or a digit


def _lines(col: str) -> pl.Expr:
    """The substantive lines of a side, stripped."""
    e = pl.element()
    stripped = pl.col(col).fill_null("").str.split("\n").list.eval(e.str.strip_chars())
    return stripped.list.eval(e.filter(e.str.contains(SUBSTANTIVE)))


def find_moves(items: pl.LazyFrame, params: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """(id, the path of the hunk that adds most of its lines again) of every moved deletion in
    `items` (repo, change, id, path, before, after, comment), under a moved rule's keys
    (min_lines, min_share, except_patterns as (label, regex) pairs, ignore_case), sorted by
    id."""
    base = items.select(*_KEY, "id", "path", "comment", "before", "after").filter(
        pl.col("change").fill_null("") != ""
    )
    removed = _lines("before").list.unique()
    lazy = base.filter(
        (removed.list.len() >= params["min_lines"]) & (_lines("after").list.len() == 0)
    )
    for _, rx in params.get("except_patterns", ()):
        rx = with_flags(rx, bool(params.get("ignore_case")))
        lazy = lazy.filter(~pl.col("comment").fill_null("").str.contains(rx))
    # an exact duplicate row shares its id (dedup's to remove): one verdict per id
    cand = lazy.select(*_KEY, "id", removed.alias("line")).collect().unique("id", keep="first")
    if cand.is_empty():
        return ()
    sources = (  # what the candidates' changes add: (repo, change, id_src, path_src, line)
        base.join(cand.lazy().select(*_KEY).unique(), on=_KEY, how="semi")
        .select(
            *_KEY,
            pl.col("id").alias("id_src"),
            pl.col("path").alias("path_src"),
            _lines("after").alias("line"),
        )
        .explode("line")
        .drop_nulls("line")
        .unique()
        .collect()
    )
    n = cand.select("id", pl.col("line").list.len().alias("n"))
    hits = (
        cand.explode("line")
        .join(sources, on=[*_KEY, "line"])
        .filter(pl.col("id") != pl.col("id_src"))
    )
    found = hits.group_by("id").agg(pl.col("line").n_unique().alias("found"))
    where = (
        hits.group_by("id", "path_src")
        .agg(pl.col("line").n_unique().alias("k"))
        .sort(["id", "k", "path_src"], descending=[False, True, False])
        .group_by("id", maintain_order=True)
        .first()
    )
    moved = (
        n.join(found, on="id")
        .filter(100 * pl.col("found") >= params["min_share"] * pl.col("n"))
        .join(where.select("id", "path_src"), on="id")
        .sort("id")
    )
    return tuple(moved.select("id", "path_src").rows())

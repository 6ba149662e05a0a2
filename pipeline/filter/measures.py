"""The measures the filter's costliest rules share, per row of a batch: by the compiled kernels
(kernels.py) once they are compiled, else by the polars regexes they replace, which give the
same answers (tests/test_filter_kernels.py checks each pair).

A run's first use of a fresh install compiles the kernels in a process of its own at the
lowest priority, and the filter does not wait for it (Stage.warm_waits): its batches are
measured by the regexes until the kernel cache has them, so the seconds numba takes are not
added to the first run. Where no warm-up of this process's run is compiling them (a Ray
worker, a stage run on its own), the first call compiles them here, as dedup's do.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from pipeline import jit
from pipeline.filter.regex import NONBLANK_LINE_RE, WORD_RE
from pipeline.schema import TOKEN_PATTERN

if TYPE_CHECKING:
    from types import ModuleType

_compiled = False  # once true, true for the rest of the process
KERNELS = "pipeline.filter.kernels"


def _k() -> ModuleType:
    """The kernels, imported on first use: numba is not loaded into a run before the filter
    runs (a stage key imports this module; numba loaded before ingest slowed it by a tenth)."""
    return importlib.import_module(KERNELS)


def compiled() -> bool:
    """Whether to run the kernels: they are in the kernel cache (or this process has them), or
    no warm-up of this process's run is compiling them."""
    global _compiled
    if not _compiled:
        _compiled = not jit.compiling_ahead(KERNELS) or _k().ready()
    return _compiled


def _kernels(kernel: bool | None) -> ModuleType | None:
    """The kernels where they are to run (`kernel`: force one way, for the tests), else None."""
    return _k() if (compiled() if kernel is None else kernel) else None


def _buffers(K: ModuleType, *cols: pl.Series) -> list[np.ndarray]:
    """The columns' bytes and offsets, one pair after another, as the kernels take them."""
    return [x for c in cols for x in K.buffers(c.to_arrow())]


def _same_once_removed(b: pl.Series, a: pl.Series, rx: str) -> np.ndarray:
    return (b.str.replace_all(rx, "") == a.str.replace_all(rx, "")).to_numpy()


def same_but_whitespace(b: pl.Series, a: pl.Series, kernel: bool | None = None) -> np.ndarray:
    """Rows equal once all whitespace (`\\s`) is removed. `kernel`: force one way (tests)."""
    if K := _kernels(kernel):
        return K.ws_equal(*_buffers(K, b, a))
    return _same_once_removed(b, a, r"\s+")


def same_word_bytes(b: pl.Series, a: pl.Series, kernel: bool | None = None) -> np.ndarray:
    """Rows whose ASCII word characters (`[A-Za-z0-9_]`) read the same, in order."""
    if K := _kernels(kernel):
        return K.word_bytes_equal(*_buffers(K, b, a))
    return _same_once_removed(b, a, r"[^A-Za-z0-9_]+")


def tokens(s: pl.Series, kernel: bool | None = None) -> np.ndarray:
    """TOKEN_PATTERN's matches per row (compiled for ASCII text, by the regex elsewhere)."""
    if not (K := _kernels(kernel)):
        return s.str.count_matches(TOKEN_PATTERN).cast(pl.Int64).to_numpy()
    count, odd = K.tokens(*_buffers(K, s))
    rows = np.flatnonzero(odd)
    if len(rows):
        count[rows] = s.gather(rows).str.count_matches(TOKEN_PATTERN).to_numpy()
    return count


def word_sets(
    b: pl.Series, a: pl.Series, min_lines: int, kernel: bool | None = None
) -> tuple[np.ndarray, ...]:
    """(lines_b, lines_a, words_b, words_a, shared): each side's non-blank lines
    (NONBLANK_LINE_RE), and where both have min_lines, their distinct words (WORD_RE) and
    those both share (else 0)."""
    if K := _kernels(kernel):
        return K.word_sets(*_buffers(K, b, a), min_lines)
    df = pl.DataFrame({"b": b, "a": a})
    lines = [pl.col(f).str.count_matches(NONBLANK_LINE_RE).cast(pl.Int64) for f in "ba"]
    enough = (lines[0] >= min_lines) & (lines[1] >= min_lines)

    def words(f: str) -> pl.Expr:
        kept = pl.when(enough).then(pl.col(f)).otherwise(pl.lit(""))
        return kept.str.extract_all(WORD_RE).list.unique()

    got = df.select(
        lines[0].alias("lb"),
        lines[1].alias("la"),
        words("b").list.len().cast(pl.Int64).alias("nb"),
        words("a").list.len().cast(pl.Int64).alias("na"),
        words("b").list.set_intersection(words("a")).list.len().cast(pl.Int64).alias("s"),
    )
    return tuple(got[c].to_numpy() for c in ("lb", "la", "nb", "na", "s"))

"""Report plots: matplotlib (Agg) PNGs, sized to read at 100% in a browser (800 x 360 px).

Every string drawn goes through `plain` first: matplotlib reads text with two unescaped `$` as
mathtext, so a repository named `o/$\\x$` would fail the whole report (an unknown symbol) and
one named `$x^2$` would be drawn as a formula. Escaped, each `$` is drawn as written. Log axes
keep their own mathtext tick labels (10^3): those come from matplotlib, not the data.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from pipeline.runs import atomic_path  # noqa: E402
from pipeline.storage import Location

SIZE = (8, 3.6)
DPI = 100


def plain(text: object) -> str:
    """`text` as matplotlib draws it literally: every `$` escaped, so no mathtext is parsed
    (matplotlib shows `\\$` as `$`; a backslash before it stays as written)."""
    return str(text).replace("$", r"\$")


def _save(fig, path: Location) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format="png")
    plt.close(fig)
    return path.name


def _whole(v: float, leading: str = "") -> str:
    """A log axis tick as a whole number ("" below 1, or unless it starts with `leading`)."""
    text = f"{v:.0f}"
    return text if v >= 1 and v == round(v) and (not leading or text[0] in leading) else ""


def _array(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Values as one float array: matplotlib bins an array 20x faster than a list (0.4 s a
    plot of a million values as a list)."""
    return np.asarray(values, dtype=np.float64)


def hist(
    values: Sequence[float] | np.ndarray,
    path: Location,
    title: str,
    xlabel: str,
    bins: int | Sequence[float] = 30,
    vline: float | None = None,
    log_y: bool = False,
    ylabel: str = "items",
    integer_x: bool = False,
) -> str:
    """A histogram of counts (`ylabel`: what is counted); `vline` marks a threshold or the
    median; integer_x: the values are whole numbers, so the x ticks are too."""
    fig, ax = plt.subplots(figsize=SIZE)
    ax.hist(_array(values), bins=bins, color="#4c72b0", edgecolor="white")
    if vline is not None:
        ax.axvline(vline, color="#c44e52", ls="--", lw=1.2)
    if log_y:  # counts on a log axis: whole numbers as written, never 4 x 10^0
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _whole(v)))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: _whole(v, "25")))
    else:  # a count is whole: no 0.5 tick
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    if integer_x:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(plain(title))
    ax.set_xlabel(plain(xlabel))
    ax.set_ylabel(plain(ylabel))
    return _save(fig, path)


def bars(
    labels: Sequence[str], counts: Sequence[float], path: Location, title: str, xlabel: str
) -> str:
    """Horizontal bars, largest on top."""
    h = max(2.0, 0.28 * len(labels) + 1.0)
    fig, ax = plt.subplots(figsize=(SIZE[0], h))
    # category tick labels: the data itself (repositories, languages, file types)
    ax.barh([plain(x) for x in labels][::-1], list(counts)[::-1], color="#55a868")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(plain(title))
    ax.set_xlabel(plain(xlabel))
    ax.tick_params(axis="y", labelsize=8)
    return _save(fig, path)


def jaccard(
    verified: Sequence[float] | np.ndarray,
    below: Sequence[float] | np.ndarray,
    threshold: float,
    path: Location,
) -> str:
    """Exact Jaccard of candidate pairs, split at the threshold."""
    fig, ax = plt.subplots(figsize=SIZE)
    bins = [i / 40 for i in range(41)]
    ax.hist(
        [_array(below), _array(verified)],
        bins=bins,
        stacked=True,
        color=["#dd8452", "#4c72b0"],
        label=[plain(f"below {threshold} (kept apart)"), plain(f">= {threshold} (duplicates)")],
    )
    ax.axvline(threshold, color="grey", ls="--", lw=1)
    ax.set_xlabel("exact shingle Jaccard")
    ax.set_ylabel("pairs")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("verified candidate pairs")
    ax.legend(fontsize=8)
    return _save(fig, path)


def curve(
    xs: Sequence[float],
    series: dict[str, Sequence[float]],
    path: Location,
    title: str,
    xlabel: str,
    vline: float | None = None,
) -> str:
    """Line plot of several series over one x."""
    fig, ax = plt.subplots(figsize=SIZE)
    for name, ys in series.items():
        ax.plot(list(xs), list(ys), marker="o", ms=3, label=plain(name))
    if vline is not None:
        ax.axvline(vline, color="grey", ls="--", lw=1)
    ax.set_title(plain(title))
    ax.set_xlabel(plain(xlabel))
    ax.legend(fontsize=8)
    return _save(fig, path)

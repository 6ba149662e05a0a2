"""`editcurate tune RUN_DIR`: what each dedup threshold would do, from the edges already found.

The dedup stage keeps every verified pair down to `edge_floor` (default 0.5) in edges.parquet,
so a sweep over thresholds needs no new signatures: at threshold t the duplicate graph is the
edges with exact_j >= t plus the exact groups (clusters.parquet `exact_of`), clustered into
ranked-keeper stars as the stage does (keeper rank from filter/kept.parquet). Edges come from
banding tuned for the stage's threshold, so the counts below it are lower bounds: the table
shows P(candidate | J = t) next to each row to say how complete each one is.
A shingle-size sweep re-scores the same pairs with other n-grams (exact Jaccard, not MinHash).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from rich.table import Table
from rich.text import Text

from pipeline.config import DedupConfig, validate
from pipeline.console import console
from pipeline.dedup import clusters as C
from pipeline.dedup.lsh import p_candidate
from pipeline.dedup.shingles import shingle_sets
from pipeline.parts import read_output, scan_output
from pipeline.runs import StageFailed, atomic_path, read_manifest
from pipeline.schema import with_change_j
from pipeline.storage import Location
from pipeline.textfile import check_regular


class TuneFailed(StageFailed):
    """tune cannot run: no finished dedup stage, or unreadable labels."""


def load_run(run_dir: Location) -> tuple[dict[str, Any], pl.DataFrame, pl.DataFrame]:
    d = run_dir / "dedup"
    m = read_manifest(d)
    if m is None:
        raise TuneFailed(f"tune: no finished dedup stage in {d}; run `editcurate dedup` first")
    return m, read_output(d / "edges.parquet"), read_output(d / "clusters.parquet")


def rep_weights(clusters: pl.DataFrame) -> pl.DataFrame:
    """(rep, weight): how many items each exact-group representative stands for (>= 2 only)."""
    return (
        clusters.group_by("exact_of")
        .agg(pl.len().alias("weight"))
        .rename({"exact_of": "rep"})
        .filter(pl.col("weight") > 1)
    )


def _graph(edges: pl.DataFrame) -> tuple[pl.Series, np.ndarray, np.ndarray]:
    nodes = pl.concat([edges["a"], edges["b"]]).unique().sort()
    index = pl.DataFrame({"node": nodes, "i": np.arange(len(nodes), dtype=np.int64)})
    a = edges.select(pl.col("a").alias("node")).join(index, on="node", how="left")["i"]
    b = edges.select(pl.col("b").alias("node")).join(index, on="node", how="left")["i"]
    return nodes, a.to_numpy(), b.to_numpy()


def clusters_at(edges: pl.DataFrame, t: float, rank: pl.DataFrame | None = None) -> pl.DataFrame:
    """(rep, comp) for every rep touched by an edge with exact_j >= t: its star's keeper
    when `rank` (rep, pos: best-ranked first) is given, else its connected component."""
    e = edges.filter(pl.col("exact_j") >= t)
    if e.is_empty():
        return pl.DataFrame(schema={"rep": pl.String, "comp": pl.String})
    nodes, a, b = _graph(e)
    if rank is None:
        label = C.components(len(nodes), a, b)
    else:
        pos = pl.DataFrame({"rep": nodes}).join(rank, on="rep", how="left", maintain_order="left")
        order = np.lexsort((np.arange(len(nodes)), pos["pos"].fill_null(1 << 62).to_numpy()))
        label, _ = C.stars(order.astype(np.int64), a, b, e["exact_j"].to_numpy())
    return pl.DataFrame({"rep": nodes, "comp": nodes.gather(label)})


def keeper_rank(run_dir: Location, ids: pl.Series, keeper: list[str]) -> pl.DataFrame | None:
    """(rep, pos): the dedup keeper rank of the given ids, from filter/kept.parquet."""
    src = run_dir / "filter" / "kept.parquet"
    if not src.exists():
        return None
    cols = list(dict.fromkeys(c for k in keeper for c in C.RANK_COLUMNS[k.lstrip("-")]))
    df = (
        scan_output(src)
        .select(list(dict.fromkeys([*C.TIE_BREAK, *cols])))
        .filter(pl.col("id").is_in(ids.implode()))
        .collect()
    )
    exprs, desc = C.rank_exprs(keeper)
    ranked = df.with_columns(exprs).sort(
        [f"_rank{k}" for k in range(len(desc))], descending=desc, nulls_last=True
    )
    ranked = ranked.unique("id", keep="first", maintain_order=True)
    return ranked.select(pl.col("id").alias("rep"), pl.int_range(pl.len()).alias("pos"))


def sweep(
    edges: pl.DataFrame,
    weights: pl.DataFrame,
    n_items: int,
    thresholds: list[float],
    bands: int = 32,
    rows: int = 8,
    rank: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """threshold -> duplicate pairs, clusters, items removed, share removed, P(candidate)."""
    out = []
    for t in thresholds:
        comp = clusters_at(edges, t, rank).join(weights, on="rep", how="left").fill_null(1)
        per = comp.group_by("comp").agg(pl.col("weight").sum())
        untouched = weights.join(comp.select("rep"), on="rep", how="anti")
        removed = int((per["weight"] - 1).sum() or 0) + int((untouched["weight"] - 1).sum() or 0)
        out.append(
            {
                "threshold": round(t, 4),
                "pairs": int((edges["exact_j"] >= t).sum()),
                "clusters": per.filter(pl.col("weight") > 1).height + untouched.height,
                "items_removed": removed,
                "share_removed": removed / n_items if n_items else 0.0,
                "p_candidate": p_candidate(t, bands, rows),
            }
        )
    return pl.DataFrame(out)


def same_cluster(
    edges: pl.DataFrame,
    clusters: pl.DataFrame,
    pairs: pl.DataFrame,
    t: float,
    rank: pl.DataFrame | None = None,
) -> pl.Series:
    """For each (id_a, id_b) in pairs: would dedup at threshold t put them in one cluster?"""
    exact = clusters.select("id", "exact_of").unique("id")
    comp = clusters_at(edges, t, rank)

    def cluster_of(col: str) -> pl.Series:
        df = pairs.select(pl.col(col).alias("id")).join(exact, on="id", how="left")
        df = df.with_columns(rep=pl.coalesce("exact_of", "id"))
        df = df.join(comp, on="rep", how="left", maintain_order="left")
        return df.select(pl.coalesce("comp", "rep"))["comp"]

    return cluster_of("id_a") == cluster_of("id_b")


def precision_recall(
    edges: pl.DataFrame,
    clusters: pl.DataFrame,
    labels: pl.DataFrame,
    thresholds: list[float],
    rank: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Precision, recall and F1 of "same cluster" against labelled pairs, per threshold."""
    truth = labels["is_duplicate"]
    rows = []
    for t in thresholds:
        pred = same_cluster(edges, clusters, labels, t, rank)
        tp = int((pred & truth).sum())
        fp = int((pred & ~truth).sum())
        fn = int((~pred & truth).sum())
        p = tp / (tp + fp) if tp + fp else 1.0
        r = tp / (tp + fn) if tp + fn else 1.0
        f1 = 2 * p * r / (p + r) if p + r else 0.0
        rows.append(
            {
                "threshold": round(t, 4),
                "tp": tp,
                "fp": fp,
                "fn": fn,
                "precision": p,
                "recall": r,
                "f1": f1,
            }
        )
    return pl.DataFrame(rows)


def best_threshold(pr: pl.DataFrame) -> float:
    """Highest F1; among ties the highest threshold (removes least)."""
    return float(pr.sort(["f1", "threshold"], descending=True)["threshold"][0])


def read_labels(path: Path) -> pl.DataFrame:
    try:
        check_regular(path)  # polars would block on a FIFO, read /dev/zero forever
        df = pl.read_csv(path, schema_overrides={"id_a": pl.String, "id_b": pl.String})
    except Exception as e:
        raise TuneFailed(f"tune: {path}: cannot read labels CSV ({e})") from None
    missing = {"id_a", "id_b", "is_duplicate"} - set(df.columns)
    if missing:
        raise TuneFailed(f"tune: {path}: needs columns id_a, id_b, is_duplicate; missing {missing}")
    truthy = pl.col("is_duplicate").cast(pl.String).str.to_lowercase().is_in(["1", "true", "yes"])
    return df.select("id_a", "id_b", truthy.alias("is_duplicate"))


def borderline(edges: pl.DataFrame, threshold: float, k: int = 5) -> pl.DataFrame:
    """The k pairs just below and the k pairs at or just above the threshold."""
    below = (
        edges.filter(pl.col("exact_j") < threshold)
        .sort(["exact_j", "a", "b"], descending=[True, False, False])
        .head(k)
    )
    above = edges.filter(pl.col("exact_j") >= threshold).sort(["exact_j", "a", "b"]).head(k)
    return pl.concat(
        [below.with_columns(side=pl.lit("below")), above.with_columns(side=pl.lit("above"))]
    ).sort("exact_j")


def rescore(edges: pl.DataFrame, items: pl.DataFrame, d: DedupConfig, ngram: int) -> pl.DataFrame:
    """The same pairs with exact Jaccard over `ngram`-shingles instead of the stage's size."""
    items = items.unique("id").sort("id")
    fields = list(d.fields)
    offs, vals = shingle_sets([items[f].to_arrow() for f in fields], fields, ngram, d.shingle)
    index = pl.DataFrame({"id": items["id"], "i": np.arange(items.height, dtype=np.int64)})
    ia = edges.join(index, left_on="a", right_on="id", how="left", maintain_order="left")["i"]
    ib = edges.join(index, left_on="b", right_on="id", how="left", maintain_order="left")["i"]
    j = C.exact_jaccard(offs, vals, ia.to_numpy(), ib.to_numpy(), False)
    return edges.with_columns(exact_j=pl.Series(j))


def edge_items(run_dir: Location, ids: pl.Series, columns: list[str]) -> pl.DataFrame:
    """Items by id, from the dedup stage's own outputs (every rep is kept or removed)."""
    d = run_dir / "dedup"
    cols = list(dict.fromkeys(["id", *columns]))
    scans = [scan_output(d / f).select(cols) for f in ("kept.parquet", "removed.parquet")]
    return pl.concat(scans).filter(pl.col("id").is_in(ids.implode())).unique("id").collect()


def plot(table: pl.DataFrame, threshold: float, path: Location, pr: pl.DataFrame | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    t = table["threshold"]
    for col in ("pairs", "clusters", "items_removed"):
        ax.plot(t, table[col], marker="o", ms=3, label=col.replace("_", " "))
    ax.set_xlabel("threshold (exact shingle Jaccard)")
    ax.set_ylabel("count")
    ax.axvline(threshold, color="grey", ls="--", lw=1)
    ax2 = ax.twinx()
    ax2.plot(t, table["share_removed"] * 100, color="black", ls=":", label="share removed %")
    if pr is not None:
        ax2.plot(pr["threshold"], pr["f1"] * 100, color="red", label="F1 % (labels)")
    ax2.set_ylabel("%")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper right", fontsize=8)
    ax.set_title(f"dedup threshold sweep (current {threshold})")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def grid(base: float, step: float) -> list[float]:
    n = int(round((1.0 - base) / step))
    return [round(base + k * step, 4) for k in range(n + 1)]


def tune(
    run_dir: Location,
    base: float | None = None,
    step: float = 0.05,
    labels: Path | None = None,
    ngrams: list[int] | None = None,
    k: int = 5,
) -> dict[str, Any]:
    """Sweep, plot, borderline pairs, and (with labels) precision/recall; writes RUN_DIR/tune/."""
    m, edges, clusters = load_run(run_dir)
    known = {k: v for k, v in m.get("dedup_config", {}).items() if k in DedupConfig.model_fields}
    d = validate(DedupConfig, known, f"{run_dir}/dedup/manifest.json", "dedup_config.")
    # a pair that makes another change is no duplicate at any threshold
    edges = with_change_j(edges).filter(pl.col("change_j") >= d.change_threshold)
    floor = min(d.edge_floor, d.threshold)
    base = floor if base is None else base
    if base < floor - 1e-9:
        raise TuneFailed(
            f"tune: edges were kept down to exact J {floor} (dedup.edge_floor); "
            f"re-run dedup with --set dedup.edge_floor={base} to sweep from {base}"
        )
    thresholds = grid(base, step)
    weights = rep_weights(clusters)
    rank = keeper_rank(run_dir, pl.concat([edges["a"], edges["b"]]).unique(), list(d.keeper))
    n_items = int(m["counts"]["items_in"])
    out = run_dir / "tune"
    out.mkdir(parents=True, exist_ok=True)
    tables = []
    scored = {d.ngram: edges}
    if ngrams:
        items = edge_items(run_dir, pl.concat([edges["a"], edges["b"]]).unique(), list(d.fields))
        for n in ngrams:
            if n != d.ngram:
                scored[n] = rescore(edges, items, d, n)
    for n, e in sorted(scored.items()):
        tables.append(
            sweep(e, weights, n_items, thresholds, d.bands, d.rows, rank).with_columns(
                ngram=pl.lit(n)
            )
        )
    table = pl.concat(tables).select("ngram", pl.exclude("ngram"))
    with atomic_path(out / "sweep.csv") as tmp:
        table.write_csv(tmp)
    pr = None
    if labels is not None:
        pr = precision_recall(edges, clusters, read_labels(labels), thresholds, rank)
        with atomic_path(out / "labels_pr.csv") as tmp:
            pr.write_csv(tmp)
    plot(table.filter(pl.col("ngram") == d.ngram), d.threshold, out / "sweep.png", pr)
    border = borderline(edges, d.threshold, k)
    items = edge_items(
        run_dir,
        pl.concat([border["a"], border["b"]]).unique(),
        ["path", "before", "after", "comment"],
    )
    with atomic_path(out / "borderline.csv") as tmp:
        border.write_csv(tmp)
    return {"config": d, "table": table, "pr": pr, "border": border, "items": items, "out": out}


def _clip(s: str, n: int = 300) -> str:
    s = s or ""
    return s if len(s) <= n else s[:n] + f"... [+{len(s) - n}]"


def _numbers(title: str, cols: dict[str, str], rows: Any) -> Table:
    """A table of right-aligned figures: cols maps a header to a row key and format spec."""
    t = Table(title=title, title_justify="left")
    for c in cols:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(*(format(r[k.split(":")[0]], k.partition(":")[2]) for k in cols.values()))
    return t


def print_tune(res: dict[str, Any]) -> None:
    d: DedupConfig = res["config"]
    rows = [
        {
            **r,
            "mark": f"{r['threshold']:.2f}"
            + (" *" if abs(r["threshold"] - d.threshold) < 1e-9 and r["ngram"] == d.ngram else ""),
        }
        for r in res["table"].iter_rows(named=True)
    ]
    t = _numbers(
        "threshold sweep (counts below the stage threshold are lower bounds: see P(cand))",
        {
            "ngram": "ngram:",
            "threshold": "mark:",
            "pairs": "pairs:",
            "clusters": "clusters:",
            "items removed": "items_removed:",
            "share": "share_removed:.2%",
            "P(cand)": "p_candidate:.3f",
        },
        rows,
    )
    console.print(t)
    items = {r["id"]: r for r in res["items"].iter_rows(named=True)}
    for r in res["border"].iter_rows(named=True):
        side = "just below" if r["side"] == "below" else "at/above"
        bt = Table(
            title=f"{side} {d.threshold}: exact J {r['exact_j']:.3f} (MinHash {r['est_j']:.3f})",
            title_justify="left",
            show_lines=True,
        )
        bt.add_column("")
        bt.add_column(r["a"], overflow="fold")
        bt.add_column(r["b"], overflow="fold")
        ia, ib = items.get(r["a"], {}), items.get(r["b"], {})
        for f in ("path", "before", "after", "comment"):
            bt.add_row(f, Text(_clip(ia.get(f, ""))), Text(_clip(ib.get(f, ""))))  # data
        console.print(bt)
    pr = res["pr"]
    if pr is not None:
        pt = _numbers(
            "labelled pairs",
            {
                "threshold": "threshold:.2f",
                "tp": "tp:",
                "fp": "fp:",
                "fn": "fn:",
                "precision": "precision:.3f",
                "recall": "recall:.3f",
                "F1": "f1:.3f",
            },
            pr.iter_rows(named=True),
        )
        console.print(pt)
        console.print(f"tune: best threshold by F1: {best_threshold(pr)}")
    console.print(Text(f"tune: wrote {res['out']} (sweep.csv, sweep.png, borderline.csv)"))

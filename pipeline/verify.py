"""`editcurate verify RUN_DIR`: conservation over a whole run, re-computed from the Parquet.

For every finished stage: each output still matches the rows and sha256 its manifest recorded,
and every item that entered the stage left it in exactly one output. Ingest has no ids on its
input, so there the unit is the input record: each one is in items.parquet (one or more items)
or in errors.parquet (once), never both, never neither.

For ingest the number of records is checked twice: against what the reader says it read, and
against `input_records`, the input's own count taken by a separate counter (see
pipeline/ingest/count.py for what that counter shares with the reader and what it does not).
The second is what catches a reader that silently drops records: it would report its own
smaller count, consistent with its outputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from pipeline.config import Config
from pipeline.errors import EnvError
from pipeline.nfc import nfc_columns
from pipeline.parts import Parts, read_output, scan_output
from pipeline.runs import MANIFEST, output_sha, read_manifest, stage_folders
from pipeline.schema import CHANGE_COLUMNS, known
from pipeline.storage import Location, under


def stage_dirs(run_dir: Location) -> list[Location]:
    """Finished stage folders in PIPELINE order, then any other (smoke, a custom stage)."""
    return stage_folders(run_dir)


def verify_run(run_dir: Location, cfg: Config | None = None) -> tuple[list[str], list[str]]:
    """(problems, checks passed): empty problems means the run conserves every item. `cfg`:
    the run's config, when the caller has it: the whole-output checks then run on its
    executor (on Ray, the leakage check by key range: the driver holds none of the rows)."""
    problems: list[str] = []
    passed: list[str] = []
    if not run_dir.is_dir():
        return [f"{run_dir}: no such run folder"], passed
    dirs = stage_dirs(run_dir)
    if not dirs:
        return [f"{run_dir}: no finished stage (no */{MANIFEST})"], passed
    for d in dirs:
        m = read_manifest(d)
        if m is None:
            problems.append(f"{d.name}/{MANIFEST}: unreadable, or not a stage manifest")
            continue
        before = len(problems)
        try:
            check_stage(d, m, problems, cfg=cfg)
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            # a manifest edited or damaged by hand: a finding, not a crash
            problems.append(f"{d.name}/{MANIFEST}: malformed ({type(e).__name__}: {e})")
        if len(problems) == before:
            passed.append(f"{d.name}: {_describe(m)}")
    return problems, passed


def check_stage(
    d: Location,
    m: dict[str, Any],
    problems: list[str],
    content: bool = True,
    cfg: Config | None = None,
) -> None:
    """`content`: the outputs' bytes hashed again against the manifest's sha256 (the runner,
    checking what a stage has just written and recorded, leaves it out). `cfg`: where the
    whole-output checks run (the run's executor; in this process without one)."""
    _check_outputs(d, m, problems, content)
    cons = m.get("conservation") or {}
    if cons.get("kind") == "records":
        _check_records(d, cons, problems)
    elif cons.get("kind") == "ids":
        _check_ids(d, cons, problems)
    if m.get("leakage"):
        _check_leakage(d, m["leakage"], problems, m.get("counts") or {}, cfg)


def _describe(m: dict[str, Any]) -> str:
    c = m.get("counts", {})
    if not isinstance(c, dict):
        return ""
    return ", ".join(
        f"{k} {v}" for k, v in c.items() if isinstance(v, int) and not isinstance(v, bool)
    )


def _check_outputs(d: Location, m: dict[str, Any], problems: list[str], content: bool) -> None:
    for name, out in m.get("outputs", {}).items():
        p = d / name
        if not p.exists():
            problems.append(f"{d.name}/{name}: missing (the manifest lists it)")
            continue
        if content and out.get("sha256") and output_sha(p) != out["sha256"]:
            problems.append(f"{d.name}/{name}: changed after the stage wrote it (sha256 differs)")
        if out.get("rows") is not None:
            try:
                rows = scan_output(p).select(pl.len()).collect().item()
            except Exception as e:  # unreadable Parquet is a finding, not a crash
                problems.append(f"{d.name}/{name}: unreadable Parquet ({e})")
                continue
            if rows != out["rows"]:
                problems.append(
                    f"{d.name}/{name}: {rows} rows, the manifest recorded {out['rows']}"
                )


def hashed(path: Location, column: str, key: pl.Expr | None = None) -> dict[str, np.ndarray]:
    """Per source: a 128-bit hash of `key` (default: the column) for each row, as an (n, 2)
    uint64 array, streamed a batch at a time. Sets of record keys or ids are compared by
    these, never by the strings: 16 bytes a row, whatever the keys' length (at 10M rows the
    strings and their hash table took gigabytes), and 128 bits leave no chance collision."""
    key = pl.col(column) if key is None else key
    out: dict[str, list[np.ndarray]] = {}
    for b in Parts(path).iter_batches(
        1 << 20, list(dict.fromkeys(["source", column])), exact=False
    ):
        h = pl.DataFrame(pl.from_arrow(b)).select(
            "source", key.hash(seed=1).alias("h0"), key.hash(seed=2).alias("h1")
        )
        for (src,), part in h.partition_by("source", as_dict=True).items():
            out.setdefault(str(src), []).append(part.select("h0", "h1").to_numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def unique_rows(a: np.ndarray) -> np.ndarray:
    """The distinct rows of an (n, 2) uint64 array, sorted."""
    if not len(a):
        return a
    a = a[np.lexsort((a[:, 1], a[:, 0]))]
    new = np.ones(len(a), dtype=bool)
    new[1:] = (a[1:] != a[:-1]).any(axis=1)
    return a[new]


def _check_records(d: Location, cons: dict[str, Any], problems: list[str]) -> None:
    none = np.empty((0, 2), np.uint64)
    try:
        # a record that gave several items has refs "ref#1", "ref#2": one record key
        record = pl.col("source_ref").str.split("#").list.first()
        keys = {
            k: unique_rows(v) for k, v in hashed(d / "items.parquet", "source_ref", record).items()
        }
        errors = hashed(d / "errors.parquet", "source_ref")
    except Exception as e:
        problems.append(f"{d.name}: cannot read items/errors ({e})")
        return
    for name, s in cons.get("sources", {}).items():
        k, errs = keys.get(name, none), errors.get(name, none)
        uniq = unique_rows(errs)
        dup_err = len(errs) - len(uniq)
        both = len(k) + len(uniq) - len(unique_rows(np.concatenate([k, uniq]))) if len(uniq) else 0
        seen = len(k) + len(errs)
        if dup_err:
            problems.append(f"{d.name}: source {name!r}: {dup_err} records in errors twice")
        if both:
            problems.append(
                f"{d.name}: source {name!r}: {both} records both in items and in errors"
            )
        if seen != s["records"]:
            problems.append(
                f"{d.name}: source {name!r}: {s['records']} records read, {seen} accounted for "
                f"({len(k)} gave items, {len(errs)} in errors): "
                f"{s['records'] - seen:+d} records lost"
                if seen < s["records"]
                else f"{d.name}: source {name!r}: {s['records']} records read, {seen} in the "
                f"outputs ({seen - s['records']} more than read)"
            )
        n_in = s.get("input_records")
        if n_in is not None and seen != n_in:
            problems.append(
                f"{d.name}: source {name!r}: the input holds {n_in} records "
                f"({s.get('input_unit', 'counted apart from the reader')}), {seen} accounted "
                f"for ({len(k)} gave items, {len(errs)} in errors): {seen - n_in:+d}"
            )
    unknown = (set(keys) | set(errors)) - set(cons.get("sources", {}))
    if unknown:
        problems.append(f"{d.name}: outputs name sources the manifest does not: {sorted(unknown)}")


def _id_digest(paths: list[Location]) -> tuple[int, int, int]:
    """(rows, two sums of id hashes mod 2**64): equal for equal id multisets, in any order.

    Streams the id column a batch at a time, so checking 10M items costs no more memory than
    checking 10k; two hash seeds make a chance match of unequal multisets negligible.
    """
    n, s1, s2 = 0, np.uint64(0), np.uint64(0)
    with np.errstate(over="ignore"):  # the sums wrap mod 2**64 by design
        for path in paths:
            for b in Parts(path).iter_batches(1 << 20, ["id"], exact=False):
                ids = pl.Series(b.column(0))
                n += len(ids)
                s1 += ids.hash(seed=1).to_numpy().sum(dtype=np.uint64)
                s2 += ids.hash(seed=2).to_numpy().sum(dtype=np.uint64)
    return n, int(s1), int(s2)


def _check_ids(d: Location, cons: dict[str, Any], problems: list[str]) -> None:
    """Multiset check: each id leaves as many times as it entered (exact duplicates share ids).

    A streamed digest decides; only when it differs are the ids read whole, to name them."""
    try:
        if _id_digest([under(d, cons["input"])]) == _id_digest(
            [under(d, o) for o in cons["outputs"]]
        ):
            return
        src = read_output(under(d, cons["input"]), ["id"])
        outs = [read_output(under(d, o), ["id"]) for o in cons["outputs"]]
    except Exception as e:
        problems.append(f"{d.name}: cannot read input/outputs for conservation ({e})")
        return
    n_in = src.group_by("id").len("n_in")
    n_out = pl.concat(outs).group_by("id").len("n_out") if outs else pl.DataFrame()
    j = n_in.join(n_out, on="id", how="full", coalesce=True).fill_null(0)
    bad = j.filter(pl.col("n_in") != pl.col("n_out"))
    lost = bad.filter(pl.col("n_out") < pl.col("n_in"))
    extra = bad.filter(pl.col("n_out") > pl.col("n_in"))
    ex = bad["id"].head(3).to_list()
    problems.append(
        f"{d.name}: {src.height} items in, {sum(o.height for o in outs)} out "
        f"({', '.join(cons['outputs'])}): {lost.height} ids lost or short, "
        f"{extra.height} ids extra or doubled; e.g. {ex}"
    )


# ------------------------------------------------------------------------ export: leakage

SHARING = "held_out_sharing_change_with_train"  # the export manifest's count


def ids_in_several_splits(splits: pl.DataFrame) -> int:
    """How many ids have rows in two or more splits (the `id` grouping: cross_split_groups
    assumes an id is in one split)."""
    twice = splits.filter(pl.col("id").is_duplicated())  # usually none: a small frame
    return int(twice.group_by("id").agg(pl.col("split").n_unique().alias("n"))["n"].gt(1).sum())


def cross_split_groups(splits: pl.DataFrame, keys: pl.DataFrame) -> int:
    """How many groups have items in two or more splits.

    splits: id, split (one row per exported item); keys: id, key (an item's group).
    Checking every grouping on its own suffices: unions of groups each inside one split
    are inside one split too, and an id in two splits is ids_in_several_splits' to find.
    """
    # a key held by one id cannot span splits: leave the (usually many) singletons out early
    j = splits.join(keys.unique().filter(pl.len().over("key") > 1), on="id", how="inner")
    per = j.group_by("key").agg(pl.col("split").n_unique().alias("n"))
    return int(per.filter(pl.col("n") > 1).height)


def column_keys(items: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    """id, key: the values of `columns` in NFC, joined (a change is its repo and change); an
    item with an empty one has no key, so items of unknown change are not one change."""
    key = pl.concat_str(columns, separator="\x00").alias("key")
    return nfc_columns(items.filter(known(columns)), columns).select("id", key)


def held_out_sharing_change(splits: pl.DataFrame) -> pl.DataFrame:
    """source, held_out, sharing_change: per source, the validation and test items, and how
    many of them share a change (repo and change, both non-empty) with a train item, so the
    hunks of one commit, with its comment and often its text, sit on both sides of the split.

    splits: source, split, repo, change (one row per exported item). The one definition:
    export writes its total to the manifest (`held_out_sharing_change_with_train`), the
    report and the dataset card read it, and verify re-counts it from the split files."""
    key = pl.concat_str(CHANGE_COLUMNS, separator="\x00")
    splits = nfc_columns(splits, CHANGE_COLUMNS)  # a change's NFD twin is the same change
    train = (
        splits.filter((pl.col("split") == "train") & known(CHANGE_COLUMNS))
        .select(key.alias("key"))
        .unique()
        .with_columns(in_train=pl.lit(True))
    )
    held = splits.filter(pl.col("split") != "train").select(
        pl.col("source").cast(pl.String),
        pl.when(known(CHANGE_COLUMNS)).then(key).alias("key"),
    )
    return (
        held.join(train, on="key", how="left")
        .group_by("source")
        .agg(
            pl.len().alias("held_out"),
            pl.col("in_train").fill_null(False).sum().cast(pl.Int64).alias("sharing_change"),
        )
        .sort("source")
    )


def leakage_keys(d: Location, grouping: dict[str, Any], splits: pl.DataFrame) -> pl.DataFrame:
    """id, key of one grouping the export manifest names: a column (or columns) of the splits
    themselves, or a key column of another stage's Parquet (optionally one `scope`)."""
    if "column" in grouping:  # in NFC, as export grouped them (pipeline/nfc.py)
        return nfc_columns(splits, [grouping["column"]]).select(
            "id", pl.col(grouping["column"]).alias("key")
        )
    if "columns" in grouping:
        return column_keys(splits, grouping["columns"])
    t = scan_output(under(d, grouping["input"]))  # only the columns used: 10M rows stay small
    if "scope" in grouping:
        t = t.filter(pl.col("scope") == grouping["scope"])
    return t.select("id", pl.col(grouping["key"]).alias("key")).collect()


def read_splits(d: Location, files: dict[str, str], extra: list[str]) -> pl.DataFrame:
    """id, split (+ extra columns) of every exported item."""
    parts = [
        read_output(d / f, ["id", *extra]).with_columns(
            split=pl.lit(name, dtype=pl.Enum(list(files)))  # a code per row, not the name
        )
        for name, f in files.items()
    ]
    return pl.concat(parts)


def leakage_in_memory(d: Location, leak: dict[str, Any], sharing: bool) -> tuple[list[int], int]:
    """leakage.leakage_counts' figures from the split files read whole into memory:
    in one process less memory than member rows."""
    groupings = leak.get("groupings", [])
    named = {g["column"] for g in groupings if "column" in g}
    if sharing:
        named |= {"source", *CHANGE_COLUMNS}
    cols = sorted(named.union(*(g["columns"] for g in groupings if "columns" in g)) - {"id"})
    splits = read_splits(d, leak["splits"], cols)
    n = int(held_out_sharing_change(splits)["sharing_change"].sum()) if sharing else 0
    cross = [
        ids_in_several_splits(splits)
        if g.get("column") == "id"
        else cross_split_groups(splits, leakage_keys(d, g, splits))
        for g in groupings
    ]
    return cross, n


def _leakage(
    d: Location, leak: dict[str, Any], sharing: bool, cfg: Config | None
) -> tuple[list[int], int]:
    """leakage_counts on the run's executor; in this process where it is not Ray, or where
    Ray cannot start here (not installed, its cluster gone: verifying a copied run folder)."""
    if cfg is not None and cfg.run.executor == "ray":
        from pipeline.leakage import leakage_counts

        try:
            return leakage_counts(cfg, d, leak, sharing)
        except (EnvError, ConnectionError):
            pass
    return leakage_in_memory(d, leak, sharing)


def _check_leakage(
    d: Location,
    leak: dict[str, Any],
    problems: list[str],
    counts: dict[str, Any],
    cfg: Config | None,
) -> None:
    """No dedup cluster, shape group (or repo, by_repo) has items in two splits; and the
    held-out items sharing a change with train are as many as the manifest says: counted
    from the split files, on Ray by key range (leakage.py: the driver holds none of
    the rows)."""
    sharing = counts.get(SHARING)
    try:
        cross, n = _leakage(d, leak, sharing is not None, cfg)
    except Exception as e:
        problems.append(f"{d.name}: cannot read splits/groups for the leakage check ({e})")
        return
    if sharing is not None and n != sharing:
        problems.append(
            f"{d.name}: {n} held-out items share a change with train, "
            f"the manifest recorded {sharing}"
        )
    for g, k in zip(leak.get("groupings", []), cross, strict=True):
        if k:
            problems.append(f"{d.name}: {k} {g['name']} groups span two or more splits")

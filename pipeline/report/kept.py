"""The kept sample: a seeded random sample of the exported items, so a reviewer judges what
the corpus keeps, not only what the stages dropped.

The sample is the `n` exported items (all three splits) with the smallest
sha256(f"kept sample\\0{seed}\\0{id}"), the seed being the export's: the same run gives the
same sample whatever the order of its Parquet parts, and the salt keeps it apart from the
split deal's own seeded order (which lays its first groups in train).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import polars as pl

from pipeline.parts import num_rows, scan_output
from pipeline.report.common import ITEM_COLS, export_files, id_ranges, member
from pipeline.runs import read_manifest
from pipeline.shapes.sha import sha256_128
from pipeline.stage import SPLITS
from pipeline.storage import Location

KEPT_SAMPLE = 20  # items shown
SALT = "kept sample"


def sample_key(seed: int, item_id: str) -> bytes:
    """The item's place in the seeded sample order (smallest first)."""
    return hashlib.sha256(f"{SALT}\0{seed}\0{item_id}".encode()).digest()


def pick(ids: pl.Series | list[str], seed: int, n: int) -> list[str]:
    """The `n` distinct ids first in the seeded order (ties cannot happen: sha256). The
    digests' first 128 bits are made column-wise and sorted; only the ids up to the n-th's
    128 bits are ordered by their whole digest (the whole order refines the first bits')."""
    ids = pl.Series(ids, dtype=pl.String).unique()
    if n <= 0 or ids.is_empty():
        return []
    hi, lo = sha256_128(pl.select(pl.lit(f"{SALT}\0{seed}\0") + pl.lit(ids)).to_series())
    order = np.lexsort((lo, hi))
    last = order[min(n, len(order)) - 1]
    near = order[(hi[order] < hi[last]) | ((hi[order] == hi[last]) & (lo[order] <= lo[last]))]
    return sorted(ids.gather(near).to_list(), key=lambda i: sample_key(seed, i))[:n]


def kept_sample(run_dir: Location, n: int = KEPT_SAMPLE) -> dict[str, Any]:
    """{present, seed, seed_note, size, exported, per_split, items: [member + split, source,
    change, language, flags]} of the export's items, in the seeded order."""
    m = read_manifest(run_dir / "export")
    if not m:
        return {"present": False, "note": "export stage not run"}
    seed = m.get("seed")
    seed_note = "the export's seed" if seed is not None else "the export did not record its seed"
    seed = int(seed or 0)
    files = export_files(run_dir)
    # a range of ids at a time: the sample of each range's ids and the sample so far, and its
    # distinct ids (an id in two splits is one item); never every exported id at once
    chosen: list[str] = []
    exported = 0
    scans = [scan_output(f).select("id") for f in files.values()]
    for cut in id_ranges(sum(num_rows(f) for f in files.values())):
        ids = pl.concat([s.filter(cut) for s in scans]).collect()["id"] if scans else None
        if ids is None or ids.is_empty():
            continue
        exported += ids.n_unique()
        chosen = pick(pl.concat([pl.Series("id", chosen, pl.String), ids]), seed, n)
    rank = {i: k for k, i in enumerate(chosen)}
    rows: list[dict[str, Any]] = []
    for s, f in files.items():
        if not chosen:
            continue
        lf = scan_output(f)
        have = set(lf.collect_schema().names())
        cols = [c for c in [*ITEM_COLS, "source", "change", "language", "flags"] if c in have]
        got = lf.filter(pl.col("id").is_in(chosen)).select(cols).collect().unique("id")
        for r in got.iter_rows(named=True):
            rows.append(
                {
                    **member(r),
                    "split": s,
                    "source": r.get("source") or "",
                    "change": r.get("change") or "",
                    "language": r.get("language") or "",
                    "flags": list(r.get("flags") or []),
                }
            )
    rows.sort(key=lambda r: rank[r["id"]])
    per_split = {s: sum(r["split"] == s for r in rows) for s in SPLITS}
    return {
        "present": True,
        "seed": seed,
        "seed_note": seed_note,
        "size": n,
        "exported": exported,
        "per_split": per_split,
        "items": rows,
    }

"""The three contenders of bench/dedup_speed.py, each run alone in a child process there
(`python bench/dedup_speed.py --child NAME --corpus PATH --out PREFIX`).

Every child, all of it in its CPU time: imports, reads the corpus's shingled fields with polars,
shingles them with the stage's kernel (the same sets for all), runs its own MinHash + LSH, and
verifies its candidate pairs with the stage's exact-Jaccard kernel (the same for all). It writes
the verified pairs (row a < row b, J >= threshold) to PREFIX.npz and the candidate count, CPU
seconds per phase and peak RSS to PREFIX.json.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

CONTENDERS = ("editcurate", "datasketch", "rensa")


def _shingles(text, d):
    """CSR shingle sets of every row by the stage's kernel (what datasketch and rensa get)."""
    from pipeline.dedup.shingles import shingle_sets

    fields = list(d.fields)
    return shingle_sets([text[f].to_arrow() for f in fields], fields, d.ngram, d.shingle)


def _editcurate(text, d, phase):
    """The stage's pair finding (find.py): shingles + signatures, banding with big buckets
    scanned on signatures. Not the exact-duplicate pass, clusters or outputs."""
    import numba

    from pipeline.dedup.index import shingle_and_sign
    from pipeline.dedup.lsh import candidates, scan_floor

    offsets, values, sig = shingle_and_sign(text, np.arange(text.height), d)
    phase("shingles+minhash")
    eligible = np.flatnonzero(np.diff(offsets) > 0)
    cand = candidates(
        sig,
        eligible,
        d.bands,
        d.rows,
        d.bucket_cap,
        threads=numba.get_num_threads(),
        scan_floor=scan_floor(d.threshold),
        max_bucket=d.max_bucket,
    )
    phase("lsh")
    extra = {"oversized": len(cand.big_size), "skipped": int((~cand.big_scanned).sum())}
    return offsets, values, cand.a, cand.b, extra


def _datasketch(text, d, phase):
    """MinHash.bulk over the shingle hashes as ints (hashfunc=int: the stage's signatures,
    no sha1), MinHashLSH(params=(bands, rows)) filled in an insertion_session, every item
    queried."""
    from datasketch import MinHash, MinHashLSH

    offsets, values = _shingles(text, d)
    phase("shingles")
    eligible = np.flatnonzero(np.diff(offsets) > 0).tolist()
    vals, offs = values.tolist(), offsets.tolist()
    sets = [vals[offs[i] : offs[i + 1]] for i in eligible]
    phase("tokens")
    ms = MinHash.bulk(sets, num_perm=d.num_perm, seed=d.seed, hashfunc=int)
    phase("minhash")
    lsh = MinHashLSH(num_perm=d.num_perm, params=(d.bands, d.rows))
    with lsh.insertion_session() as session:
        for i, m in zip(eligible, ms, strict=True):
            session.insert(i, m, check_duplication=False)
    a, b = [], []
    for i, m in zip(eligible, ms, strict=True):
        for q in lsh.query(m):
            if q > i:
                a.append(i)
                b.append(q)
    phase("lsh")
    return offsets, values, np.array(a, np.int64), np.array(b, np.int64), {}


def _rensa(text, d, phase):
    """RMinHash.from_token_sets over the shingle hashes as 4-byte tokens (its API takes str or
    bytes tokens), RMinHashLSH(num_perm, num_bands) insert_many + query_all."""
    from rensa import RMinHash, RMinHashLSH

    offsets, values = _shingles(text, d)
    phase("shingles")
    eligible = np.flatnonzero(np.diff(offsets) > 0)
    toks = values.view("S4").tolist()  # bytes per hash (trailing NULs dropped: still 1:1)
    offs = offsets.tolist()
    sets = [toks[offs[i] : offs[i + 1]] for i in eligible.tolist()]
    phase("tokens")
    ms = RMinHash.from_token_sets(sets, d.num_perm, d.seed)
    phase("minhash")
    lsh = RMinHashLSH(d.threshold, d.num_perm, d.bands)
    lsh.insert_many(ms)  # keys 0..len(ms)-1: positions in `eligible`
    a, b = [], []
    for k, hits in enumerate(lsh.query_all(ms)):
        for q in hits:
            if q > k:
                a.append(k)
                b.append(q)
    phase("lsh")
    return offsets, values, eligible[np.array(a, np.int64)], eligible[np.array(b, np.int64)], {}


def peak_rss_mib() -> float:
    """This process's peak RSS since exec (VmHWM; rusage's ru_maxrss also counts the parent's
    memory at fork)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(name: str, corpus: str, out: str, threshold: float) -> None:
    """Contender `name` on the corpus (see the module docstring)."""
    last = [0.0]  # process CPU time counts from the start: interpreter and imports included
    phases: dict[str, float] = {}

    def phase(label: str) -> None:
        now = time.process_time()
        phases[label] = round(now - last[0], 3)
        last[0] = now

    import numba
    import polars as pl

    from pipeline.config import DedupConfig
    from pipeline.dedup.clusters import exact_jaccard

    d = DedupConfig(threshold=threshold)
    text = pl.read_parquet(corpus, columns=list(d.fields))
    phase("start+read")
    run: Callable = {"editcurate": _editcurate, "datasketch": _datasketch, "rensa": _rensa}[name]
    offsets, values, a, b, extra = run(text, d, phase)
    j = exact_jaccard(offsets, values, a, b, False)
    keep = j >= threshold
    phase("verify")
    np.savez(out + ".npz", a=a[keep], b=b[keep])
    stats = {
        "candidates": int(len(a)),
        "phases": phases,
        "threads": int(numba.get_num_threads()),
        "rss": peak_rss_mib(),
        **extra,
    }
    Path(out + ".json").write_text(json.dumps(stats))

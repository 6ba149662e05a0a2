"""Past dedup.driver_edges on Ray, candidate pairs and edges never come to the driver, and
the stage's files are the local ones, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline import Pipeline

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "editcurate.toml"


def _never(*_a, **_k):
    raise AssertionError("candidate pairs came to the driver")


def family_corpus(tmp_path: Path) -> Path:
    """Loners and families of near twins (each one's last number changed): with bucket_cap
    2 a family's buckets are over the cap, scanned on the driver."""
    from tests.test_dedup_incremental import corpus, write

    rows = corpus(40)
    for k, size in ((0, 6), (1, 4), (2, 3), (3, 2)):
        after = rows[k]["after"][: rows[k]["after"].rindex(",")]
        rows += [
            {**rows[k], "after": f"{after}, {7000 + t})", "change": f"c{k}-{t}"}
            for t in range(size)
        ]
    return write(tmp_path / "families.jsonl", rows)


def _runs(tmp_path: Path, monkeypatch, config: dict, **extra) -> dict[str, Path]:
    """dedup local and on Ray, with no pair and no shingle set allowed on the driver on Ray
    (the workers' sets go to the working files by tasks on its node: ray_sets.py)."""
    from pipeline.dedup import find, ray_pairs, store

    calls: list[int] = []
    real = ray_pairs.stars_components

    def spy(order, edges, m, *rest, **kw):
        calls.append(m)
        return real(order, edges, m, *rest, **kw)

    runs = {}
    for executor in ("local", "ray"):
        if executor == "ray":  # the driver's ways would fail the run
            monkeypatch.setattr(find, "verify", _never)
            monkeypatch.setattr(ray_pairs, "pair_arrays", _never)
            monkeypatch.setattr(ray_pairs, "stars_components", spy)
            monkeypatch.setattr(store.Store, "add", _never)
        overrides = {"run.root": str(tmp_path), "run.name": executor, "run.executor": executor}
        p = Pipeline.from_config(config, overrides={**overrides, **extra})
        runs[executor] = p.run(until="dedup").path / "dedup"
    assert len(calls) == 1 and calls[0] > 0  # the ray run's graph went to Ray
    return runs


def _same_files(runs: dict[str, Path]) -> dict:
    files = sorted(f.relative_to(runs["local"]) for f in runs["local"].rglob("*.parquet"))
    assert any(f.parts[0] == "edges.parquet" for f in files)
    for rel in files:
        if (runs["local"] / rel).is_file():
            assert (runs["local"] / rel).read_bytes() == (runs["ray"] / rel).read_bytes(), rel
    counts = [json.loads((r / "manifest.json").read_text())["counts"] for r in runs.values()]
    assert counts[0] == counts[1]
    return counts[0]


def test_pairs_stay_on_ray_and_the_files_are_the_local_ones(tmp_path, ray_local, monkeypatch):
    src = family_corpus(tmp_path)
    config = {"ingest": {"sources": [{"kind": "table", "path": str(src)}]}}
    extra = {"dedup.driver_edges": 0, "dedup.bucket_cap": 2}
    c = _same_files(_runs(tmp_path, monkeypatch, config, **extra))
    assert c["oversized_buckets"] > 0 and c["oversized_pairs_compared"] > 0
    assert c["band_pairs"] > c["candidate_pairs"] >= c["edges"] >= c["near_edges"] > 0
    assert c["removed_near"] == 6 + 4 + 3 + 2  # the twins go; each family's original stays


def test_an_incremental_run_on_ray_is_the_local_one(tmp_path, ray_local, monkeypatch):
    base = Pipeline.from_config(
        SAMPLE, overrides={"run.root": str(tmp_path), "run.name": "base", "dedup.index": True}
    ).run(until="dedup")
    extra = {"dedup.driver_edges": 0, "dedup.against": [str(base.path)]}
    c = _same_files(_runs(tmp_path, monkeypatch, SAMPLE, **extra))
    assert c["kept"] == 0 and c["index_keepers"] > 0  # every item is in the earlier run


def test_below_driver_edges_the_pairs_come_to_the_driver_and_nothing_changes(
    tmp_path, ray_local, monkeypatch
):
    """The pairs come to the driver; their sets do not (ray_sets.hold)."""
    from pipeline.dedup import pairs, store

    out = {}
    for name, executor, e in (("local", "local", 0), ("ray", "ray", 10**9)):
        if executor == "ray":
            monkeypatch.setattr(store.Store, "add", _never)
            monkeypatch.setattr(pairs, "jaccards", _never)  # verified by the workers only
        over = {"run.root": str(tmp_path), "run.name": name, "run.executor": executor}
        p = Pipeline.from_config(SAMPLE, overrides={**over, "dedup.driver_edges": e})
        out[name] = p.run(until="dedup").path / "dedup"
    _same_files(out)

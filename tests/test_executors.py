"""Executors: the same Stage objects on Ray Data give byte-identical outputs to local ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pipeline import Pipeline

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample" / "editcurate.toml"


def test_the_ray_executor_writes_the_same_bytes_as_the_local_one(tmp_path, ray_local):
    runs = {}
    for executor in ("local", "ray"):
        p = Pipeline.from_config(
            SAMPLE,
            overrides={
                "run.root": str(tmp_path),
                "run.name": executor,
                "run.executor": executor,
                "filter.batch_size": 37,  # many batches, none aligned with Ray's blocks
                "run.part_rows": 50,  # many parts: Ray reads them as blocks, in order
            },
        )
        runs[executor] = p.run().path
    files = sorted(
        p.relative_to(runs["local"]) for p in runs["local"].rglob("*.parquet") if p.is_file()
    )
    assert len(files) >= 24 and any(f.name == "part-00001.parquet" for f in files)
    for rel in files:
        assert (runs["local"] / rel).read_bytes() == (runs["ray"] / rel).read_bytes(), rel
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_ray_missing_is_one_clear_line(monkeypatch, tmp_path):
    import builtins

    from pipeline.errors import EnvError
    from pipeline.executors.ray import ensure_ray

    real = builtins.__import__

    def no_ray(name, *a, **k):
        if name == "ray":
            raise ImportError("no ray")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    cfg = Pipeline.from_config(SAMPLE).config
    with pytest.raises(EnvError, match=r"pip install 'editcurate\[ray\]'"):
        ensure_ray(cfg.run)


def test_a_corpus_without_candidate_pairs_runs_on_ray_as_locally(tmp_path, ray_local):
    """No pair to verify, no task: the executor is not asked for an empty dataset."""
    paths = [SAMPLE.parent / "edits.jsonl", SAMPLE.parent / "refinement.jsonl"]
    runs = {}
    for executor in ("local", "ray"):
        p = Pipeline.from_paths(
            *paths, out=tmp_path / executor, overrides={"run.executor": executor}
        )
        runs[executor] = p.run(until="dedup").path
    removed = runs["local"] / "dedup" / "manifest.json"
    assert '"candidate_pairs": 0' in removed.read_text()
    for rel in ("dedup/kept.parquet/part-00000.parquet", "dedup/edges.parquet/part-00000.parquet"):
        assert (runs["local"] / rel).read_bytes() == (runs["ray"] / rel).read_bytes(), rel

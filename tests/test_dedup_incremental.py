"""Incremental dedup: `[dedup] against` matches new items against earlier runs' dedup index."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from pipeline import Pipeline
from pipeline.config import ConfigError
from pipeline.runs import read_manifest
from pipeline.verify import verify_run

NAMES = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta", "rho", "tau"]
CALLS = ["load", "parse", "merge", "split", "render", "fetch", "check", "store", "close"]


def code(rng: random.Random, lines: int = 6) -> str:
    return "\n".join(
        f"{rng.choice(NAMES)}_{rng.randrange(1000)} = {rng.choice(CALLS)}"
        f"({rng.choice(NAMES)}, {rng.randrange(100)})"
        for _ in range(lines)
    )


def item(k: int, rng: random.Random) -> dict:
    before = code(rng)
    after = before.replace("= ", "= self.", 1) + "\n" + code(rng, 2)
    return {
        "before": before,
        "after": after,
        "comment": f"please use the bound helper here ({k})",
        "repo": "o/r",
        "path": f"m{k}.py",
        "change": f"c{k}",
    }


def near_twin(it: dict, tag: str) -> dict:
    """The same edit with its last token changed: exact shingle Jaccard about 0.9."""
    after = it["after"]
    return {**it, "after": after[: after.rindex(",")] + ", 4242)", "comment": f"twin {tag}"}


def corpus(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    return [item(k, rng) for k in range(n)]


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run(tmp: Path, name: str, rows: list[dict], against=(), until="shapes", index=True, **sections):
    """A run whose dedup writes its index (a later run names it in `against`) unless told."""
    src = write(tmp / f"{name}.jsonl", rows)
    data = {
        "run": {"name": name, "root": str(tmp / "runs")},
        "ingest": {"sources": [{"kind": "table", "path": str(src)}]},
        "dedup": {"against": [str(tmp / "runs" / a) for a in against], "index": index},
        **sections,
    }
    Pipeline.from_config(data).run(until=until)
    return tmp / "runs" / name


def frame(run_dir: Path, rel: str) -> pl.DataFrame:
    return pl.read_parquet(run_dir / rel)


def test_an_incremental_run_against_its_own_previous_run_removes_every_item(tmp_path):
    rows = corpus(30)
    rows += [rows[0], {**rows[1], "comment": "same edit, other words"}, near_twin(rows[2], "a")]
    first = run(tmp_path, "v1", rows)
    kept1 = frame(first, "dedup/kept.parquet")
    assert kept1.height == 30  # the exact copy, the same content and the near twin removed
    index = pl.read_parquet(first / "dedup" / "index")
    assert sorted(index["id"]) == sorted(kept1["id"])
    assert "signature" not in index.schema  # made again from the text where a match needs it
    assert index.schema["band_keys"] == pl.Array(pl.UInt64, 32)

    again = run(tmp_path, "v2", rows, against=["v1"])
    kept = frame(again, "dedup/kept.parquet")
    removed = frame(again, "dedup/removed.parquet")
    assert kept.height == 0 and removed.height == len(rows)
    assert set(removed["keeper_id"]) <= set(kept1["id"])  # the earlier run's kept ids
    kinds = dict(removed.group_by("kind").len().iter_rows())
    assert kinds == {"same_id_indexed": 31, "same_content_indexed": 1, "near_indexed": 1}
    near = removed.filter(pl.col("kind") == "near_indexed")
    assert near["keeper_id"][0] == kept1.filter(pl.col("path") == "m2.py")["id"][0]
    assert 0.8 <= near["j"][0] < 1.0
    assert pl.read_parquet(again / "dedup" / "index").height == 0  # nothing new to index
    m = read_manifest(again / "dedup")
    assert m["counts"]["removed_same_id_indexed"] == 31 and m["counts"]["index_items"] == 30
    assert verify_run(again)[0] == []


def test_an_incremental_run_keeps_exactly_the_genuinely_new_items(tmp_path):
    old = corpus(40, seed=1)
    run(tmp_path, "v1", old)
    fresh = corpus(3, seed=99)
    new = [
        *old[:10],  # already released
        {**old[10], "comment": "the same edit again, other comment"},  # same content
        near_twin(old[11], "b"),
        near_twin(old[12], "c"),
        *fresh,
        fresh[0],  # and an exact copy of a new item: removed by the new items' own dedup
    ]
    second = run(tmp_path, "v2", new, against=["v1"])
    kept = frame(second, "dedup/kept.parquet")
    assert sorted(kept["path"]) == sorted(f["path"] for f in fresh)
    assert sorted(kept["before"]) == sorted(f["before"] for f in fresh)
    removed = frame(second, "dedup/removed.parquet")
    kinds = dict(removed.group_by("kind").len().iter_rows())
    assert kinds == {
        "same_id_indexed": 10,
        "same_content_indexed": 1,
        "near_indexed": 2,
        "same_id": 1,
    }
    # the next run's index holds only this run's new items; a third run lists both
    assert sorted(pl.read_parquet(second / "dedup" / "index")["id"]) == sorted(kept["id"])
    third = run(tmp_path, "v3", [*old, *fresh], against=["v1", "v2"])
    assert frame(third, "dedup/kept.parquet").height == 0
    for r in ("v1", "v2", "v3"):
        assert verify_run(tmp_path / "runs" / r)[0] == []


def test_indexed_items_rank_before_every_new_item(tmp_path):
    """New items near an indexed item go to it, even one that would keep the other in a run
    of its own; new items near only each other cluster as usual."""
    base = corpus(5, seed=3)
    first = run(tmp_path, "v1", base)
    short = {**near_twin(base[0], "x"), "comment": "use self"}
    long = {**near_twin(base[0], "y"), "comment": "a long comment that ranks first as keeper"}
    pair = corpus(1, seed=4)[0]
    rows = [short, long, pair, near_twin(pair, "z")]
    alone = run(tmp_path, "alone", rows)
    assert "x" not in frame(alone, "dedup/kept.parquet")["comment"].to_list()[0]
    second = run(tmp_path, "v2", rows, against=["v1"])
    removed = frame(second, "dedup/removed.parquet").sort("kind", "comment")
    assert removed["kind"].to_list() == ["near", "near_indexed", "near_indexed"]
    base_id = frame(first, "dedup/kept.parquet").filter(pl.col("path") == "m0.py")["id"][0]
    assert removed["keeper_id"].to_list()[1:] == [base_id, base_id]
    assert frame(second, "dedup/kept.parquet")["path"].to_list() == [pair["path"]]


def test_against_a_run_without_an_index_is_a_config_error(tmp_path, cli):
    (tmp_path / "runs" / "old" / "dedup").mkdir(parents=True)
    src = write(tmp_path / "e.jsonl", corpus(3))
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[run]\nname = "new"\nroot = "runs"\n[[ingest.sources]]\nkind = "table"\n'
        f'path = "{src.name}"\n[dedup]\nagainst = ["runs/old"]\n'
    )
    res = cli("run", "--config", cfg, ok=False)
    assert res.exit_code == 2
    assert "dedup.against: runs/old: no dedup index in" in res.output
    res = cli("run", "--config", cfg, "--set", 'dedup.against=["runs/new"]', ok=False)
    assert res.exit_code == 2 and "this run's own folder" in res.output
    over = ["--set", "dedup.against=[]", "--set", "run.name=old", "--set", "dedup.index=true"]
    cli("run", "--config", cfg, *over)
    res = cli("run", "--config", cfg, "--set", "dedup.ngram=4", ok=False)
    assert res.exit_code == 2 and "made with dedup.ngram = 5, this run has 4" in res.output
    with pytest.raises(ConfigError, match="listed twice"):
        Pipeline.from_config({"dedup": {"against": ["a", "a"]}})


def test_a_changed_earlier_run_reruns_dedup_and_nothing_of_it_is_recomputed(tmp_path):
    run(tmp_path, "v1", corpus(10))
    second = run(tmp_path, "v2", corpus(12), against=["v1"])
    assert frame(second, "dedup/kept.parquet").height == 2
    m = read_manifest(second / "dedup")
    assert set(m["inputs"]) == {"filter/kept.parquet", f"against:{tmp_path}/runs/v1"}
    before = (second / "dedup" / "manifest.json").stat().st_mtime_ns
    idx = tmp_path / "runs" / "v1" / "dedup" / "index"
    seen = {p: p.stat().st_mtime_ns for p in idx.iterdir()}
    run(tmp_path, "v2", corpus(12), against=["v1"])  # unchanged: skipped
    assert (second / "dedup" / "manifest.json").stat().st_mtime_ns == before
    assert {p: p.stat().st_mtime_ns for p in idx.iterdir()} == seen  # v1 only read
    run(tmp_path, "v1", corpus(11))  # the earlier run changes: its index too
    run(tmp_path, "v2", corpus(12), against=["v1"])
    assert frame(second, "dedup/kept.parquet").height == 1
    assert pq.read_metadata(next(idx.iterdir())).num_rows == 11


# ------------------------------------------------------------------------ dedup.index (issue 30)


def outputs_of(run_dir: Path) -> list[str]:
    return sorted((read_manifest(run_dir / "dedup") or {})["outputs"])


def test_a_run_writes_its_index_only_when_asked_for(tmp_path):
    for where in ("plain", "asked"):  # the same names (the source column is the file's name)
        (tmp_path / where).mkdir()
    plain = run(tmp_path / "plain", "v1", corpus(8), until="dedup", index=False)
    assert not (plain / "dedup" / "index").exists() and "index" not in outputs_of(plain)
    assert verify_run(plain)[0] == []
    asked = run(tmp_path / "asked", "v1", corpus(8), until="dedup")  # dedup.index = true
    assert "index" in outputs_of(asked)
    assert pl.read_parquet(asked / "dedup" / "index").height == 8
    # every other output is the same, byte for byte: the index changes nothing else
    for name in outputs_of(plain):
        a, b = pq.read_table(plain / "dedup" / name), pq.read_table(asked / "dedup" / name)
        assert a.equals(b), name


def test_an_incremental_run_writes_its_own_index_for_the_next_one(tmp_path):
    run(tmp_path, "v1", corpus(8), until="dedup")
    second = run(tmp_path, "v2", corpus(10), against=["v1"], until="dedup", index=False)
    assert "index" in outputs_of(second)
    assert pl.read_parquet(second / "dedup" / "index").height == 2  # its two new items
    third = run(tmp_path, "v3", corpus(11), against=["v1", "v2"], until="dedup", index=False)
    assert frame(third, "dedup/kept.parquet").height == 1


def test_against_a_run_whose_dedup_wrote_no_index_is_one_line_exit_2(tmp_path, cli):
    old = run(tmp_path, "old", corpus(3), until="dedup", index=False)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[run]\nname = "new"\nroot = "runs"\n[[ingest.sources]]\nkind = "table"\n'
        'path = "old.jsonl"\n[dedup]\nagainst = ["runs/old"]\n'
    )
    res = cli("run", "--config", cfg, ok=False)
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == [
        f"error: dedup.against: runs/old: no dedup index in {old / 'dedup'} (dedup writes one "
        "only with dedup.index = true); re-run that run's dedup with it: editcurate dedup "
        f"{old} --set dedup.index=true"
    ]
    cli("dedup", str(old), "--set", "dedup.index=true")  # as the line says: then it runs
    cli("run", "--config", cfg, "--until", "dedup")
    assert frame(tmp_path / "runs" / "new", "dedup/kept.parquet").height == 0


def test_toggling_dedup_index_reruns_dedup_and_drops_an_index_no_longer_asked_for(tmp_path):
    first = run(tmp_path, "v1", corpus(6), until="dedup", index=False)
    m0 = read_manifest(first / "dedup")
    run(tmp_path, "v1", corpus(6), until="dedup", index=False)  # unchanged: skipped
    assert read_manifest(first / "dedup")["started_at"] == m0["started_at"]
    assert read_manifest(first / "dedup")["wall_s"] == m0["wall_s"]
    run(tmp_path, "v1", corpus(6), until="dedup")  # asked for: dedup runs again
    m1 = read_manifest(first / "dedup")
    assert m1["fingerprint"] != m0["fingerprint"] and "index" in m1["outputs"]
    assert (first / "dedup" / "index").is_dir()
    run(tmp_path, "v1", corpus(6), until="dedup", index=False)  # and back: no index left
    m2 = read_manifest(first / "dedup")
    assert m2["fingerprint"] == m0["fingerprint"] and "index" not in m2["outputs"]
    assert not (first / "dedup" / "index").exists()
    assert verify_run(first)[0] == []

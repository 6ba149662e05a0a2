"""Ingest on the real corpora ($EDITCURATE_SHARED_DATA), through the shipped config."""

import json

import polars as pl

from tests.conftest import SHARED_CONFIG as CONFIG
from tests.conftest import shared, shared_corpora_sets

EXPECTED = {  # records per file, from the corpora folder's README.md
    "pre-commit-hooks": 3868,
    "litgpt": 19905,
    "fd": 11151,
    "axios": 22478,
    "zod": 41867,
    "gorilla-mux": 1458,
    "javapoet": 5165,
    "nofuneval-latency": 47,
    "nofuneval-resource_util": 51,
}


def test_shared_corpora_ingest_with_the_right_counts(tmp_path, cli):
    shared("pre-commit-hooks.jsonl.gz")
    root = f"run.root={json.dumps(str(tmp_path))}"
    cli("ingest", "--config", CONFIG, "--set", root, *shared_corpora_sets())
    out = tmp_path / "shared" / "ingest"
    items = pl.read_parquet(out / "items.parquet")
    m = json.loads((out / "manifest.json").read_text())
    for name, n in EXPECTED.items():
        s = m["conservation"]["sources"][name]
        assert s["records"] == n and s["items"] == n and s["errors"] == 0, (name, s)
    assert items.height == sum(EXPECTED.values())
    nfe = items.filter(pl.col("source") == "nofuneval-latency")
    row = nfe.filter(pl.col("change").str.starts_with("5065990")).row(0, named=True)
    assert row["comment"] == "BUGFIX: Recycle views to scroll faster"
    assert row["repo"] == "onyxbits/listmyaps" and row["language"] == "java"
    # lines of its diff (-4 +7 in two hunks), not of the whole file (36 -> 39 lines) nor of
    # the region from the first change to the last (10 -> 13)
    assert (row["lines_removed"], row["lines_added"]) == (4, 7)
    # 17 upstream messages are cut short (no closing quotes): none keeps a stray quote
    nfe_all = items.filter(pl.col("source").str.starts_with("nofuneval"))
    assert nfe_all.filter(pl.col("comment").str.contains(r"^['\"\\]")).height == 0
    cut = nfe_all.filter(pl.col("comment").str.starts_with("Optimise analog again"))
    assert cut.height == 1 and cut["comment"][0].endswith("analog to center")
    pch = items.filter(pl.col("source") == "pre-commit-hooks")
    bumps = pch.filter(pl.col("path") == ".pre-commit-config.yaml")
    assert bumps.height == 419
    assert pch["author_is_bot"].sum() > 0 and pch["created_at"].null_count() == 0
    # blank-line edits survive as real edits: before == after == "" with a line count
    blank = pch.filter((pl.col("before") == "") & (pl.col("after") == ""))
    assert blank.height > 0 and (blank["lines_removed"] + blank["lines_added"]).min() > 0
    assert cli("verify", tmp_path / "shared").exit_code == 0


def test_a_mined_corpus_with_no_config_keeps_its_commit_and_time(tmp_path, cli):
    """`commit` and `timestamp` are read for change and created_at without a field map."""
    path = shared("pre-commit-hooks.jsonl.gz")
    cli("run", path, "--out", tmp_path / "r", "--until", "ingest")
    items = pl.read_parquet(tmp_path / "r" / "ingest" / "items.parquet")
    assert items.height == EXPECTED["pre-commit-hooks"]
    assert items.filter(pl.col("change") == "").height == 0
    assert items["change"].n_unique() > 700 and items["created_at"].null_count() == 0

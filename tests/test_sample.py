"""The shipped sample corpus, through the README's config, from ingest on."""

import json
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "data" / "sample" / "editcurate.toml"


def test_sample_run_ingests_every_source_and_keeps_the_founding_pair(tmp_path, cli):
    cli("run", "--config", CONFIG, "--set", f"run.root={json.dumps(str(tmp_path))}")
    run = tmp_path / "sample"
    items = pl.read_parquet(run / "ingest" / "items.parquet")
    errors = pl.read_parquet(run / "ingest" / "errors.parquet")
    assert set(items["source"]) == {"github_comments", "refinement", "edits"}
    assert 180 <= items.height <= 260
    assert errors.filter(pl.col("severity") == "error").height == 0
    assert set(errors["reason"]) == {"no_suggestion", "reply"}
    founding = items.filter(pl.col("path") == ".pre-commit-config.yaml").sort("before")
    pair = founding.filter(pl.col("before").is_in(["    rev: v4.5.0", "    rev: 6.1.0"]))
    assert pair["after"].to_list() == ["    rev: 7.0.0", "    rev: v5.0.0"]
    assert pair["comment"].to_list() == [
        "and 7.0.0 of this",
        "fyi, there's a v5.0.0 of this out now",
    ]
    assert pair["change"].n_unique() == 1 and pair["repo"].n_unique() == 1
    assert items["author_is_bot"].sum() >= 5
    assert items["language"].n_unique() >= 6
    assert cli("verify", run).exit_code == 0

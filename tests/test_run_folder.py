"""A run folder keeps its effective config, so a run made from input paths (no config file)
is continued stage by stage from the folder alone, from any working directory."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import tomllib

from pipeline.api import Pipeline
from pipeline.errors import UsageError
from pipeline.runs import CONFIG_FILE, read_manifest

SAMPLE = Path(__file__).parent.parent / "data" / "sample"


def test_a_stage_command_on_a_config_less_run_folder(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cli("run", SAMPLE / "edits.jsonl", "--out", "runs/edits", "--until", "dedup")
    run = tmp_path / "runs" / "edits"
    stored = tomllib.loads((run / CONFIG_FILE).read_text())
    assert stored["run"]["base_dir"] == str(tmp_path)  # it loads from anywhere
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for stage in ("decontaminate", "shapes"):
        cli(stage, run)
    res = cli("export", run, "--set", "export.format=sft")
    assert "export: wrote export/" in res.output
    assert read_manifest(run / "export") is not None
    train = pl.read_parquet(run / "export" / "train.parquet")
    assert {"prompt", "completion"} <= set(train.columns) and train.height > 0  # --set took
    # the same folder through the API, and its config as a config file
    p = Pipeline.open(run)
    assert p.config.run_dir == run and p.config.export.format == "sft"
    assert Pipeline.from_config(run / CONFIG_FILE).config == p.config
    res = cli("verify", run)
    assert "verify passed" in res.output


def test_a_stage_needs_a_run_folder_or_a_config(tmp_path, cli):
    res = cli("export", ok=False)
    assert res.exit_code == 2 and "a run folder (editcurate export runs/edits)" in res.output
    res = cli("export", tmp_path, ok=False)
    assert res.exit_code == 2 and f"no {CONFIG_FILE}" in res.output
    with pytest.raises(UsageError, match=CONFIG_FILE):
        Pipeline.open(tmp_path)


def test_the_missing_upstream_names_the_command_to_type(tmp_path, cli):
    cli("run", SAMPLE / "edits.jsonl", "--out", tmp_path / "r", "--until", "ingest")
    res = cli("dedup", tmp_path / "r", ok=False)
    assert res.exit_code == 2 and "run `editcurate filter " in res.output


def test_a_secret_in_the_config_is_masked_in_the_run_folder(tmp_path):
    token = "ghp_pfJBd0Kh8oOOL8dKLzdocJ2isAjIhKtJ0Rlg"
    src = tmp_path / f"export_{token}.jsonl"
    src.write_bytes((SAMPLE / "edits.jsonl").read_bytes())
    Pipeline.from_paths(src, out=tmp_path / "r").run(until="ingest")
    text = (tmp_path / "r" / CONFIG_FILE).read_text()
    assert token not in text and "[REDACTED:github_token]" in text
    with pytest.raises(UsageError, match="masked"):
        Pipeline.open(tmp_path / "r")


def test_path_mode_reads_a_part_folder(tmp_path, cli):
    """The project's own outputs are folders of Parquet parts; they go back in as input."""
    cli("run", SAMPLE / "edits.jsonl", "--out", tmp_path / "first", "--until", "filter")
    kept = tmp_path / "first" / "filter" / "kept.parquet"
    assert kept.is_dir()
    cli("run", kept, "--out", tmp_path / "again", "--until", "ingest")
    again = pl.read_parquet(tmp_path / "again" / "ingest" / "items.parquet")
    assert again.height == pl.read_parquet(kept).height > 0


def test_a_source_with_its_own_column_names_gets_the_set_line_that_maps_them(tmp_path, cli):
    src = tmp_path / "x.csv"
    src.write_text(
        "repo,pr,file,code_before,code_after,review_comment\n"
        + "".join(f"a/b,{k},f.py,x = {k},y = {k},rename x\n" for k in range(5))
    )
    res = cli("run", src, "--out", tmp_path / "r", ok=False)
    line = res.output.strip().splitlines()[-1]
    assert res.exit_code == 2 and "no record has the required fields before, after" in line
    assert "code_before, code_after, review_comment" in line  # the fields it did have
    fix = "--set ingest.sources.0.fields.before=code_before"
    assert fix in line and "--set ingest.sources.0.fields.after=code_after" in line
    # the line works as given
    sets = ["--set", "ingest.sources.0.fields.before=code_before"]
    sets += ["--set", "ingest.sources.0.fields.after=code_after"]
    cli("run", src, "--out", tmp_path / "r", *sets, "--until", "ingest")
    assert pl.read_parquet(tmp_path / "r" / "ingest" / "items.parquet").height == 5


def test_a_semicolon_csv_gets_the_delimiter_and_the_field_lines(tmp_path, cli):
    src = tmp_path / "x.csv"
    src.write_text(
        "repo;pr;code_before;code_after;review_comment\n"
        + "".join(f"a/b;{k};x = {k};y = {k};rename x\n" for k in range(4))
    )
    res = cli("run", src, "--out", tmp_path / "r", ok=False)
    line = " ".join(res.output.split()).rsplit("error: ", 1)[-1]
    assert res.exit_code == 2 and "fields seen: repo, pr, code_before, code_after" in line
    fixes = [
        '--set ingest.sources.0.csv_delimiter=";"',
        "--set ingest.sources.0.fields.before=code_before",
        "--set ingest.sources.0.fields.after=code_after",
    ]
    assert all(f in line for f in fixes), line
    sets = [x for f in fixes for x in f.split(" ", 1)]
    cli("run", src, "--out", tmp_path / "r", *sets, "--until", "ingest")  # works as given
    assert pl.read_parquet(tmp_path / "r" / "ingest" / "items.parquet").height == 4


def test_a_github_rest_dump_read_as_a_table_is_told_to_read_it_as_github(tmp_path, cli):
    import json

    comment = {
        "path": "app.py",
        "diff_hunk": "@@ -1,2 +1,2 @@\n def f():\n-    return x",
        "body": "```suggestion\n    return x + 1\n```",
        "user": {"login": "alice"},
        "line": 2,
        "commit_id": "abc1234",
        "pull_request_url": "https://api.github.com/repos/o/r/pulls/7",
    }
    src = tmp_path / "comments.json"
    src.write_text(json.dumps(comment) + "\n")
    res = cli("run", src, "--out", tmp_path / "r", ok=False)
    line = " ".join(res.output.split()).rsplit("error: ", 1)[-1]
    assert res.exit_code == 2 and "they are GitHub review comments" in line
    assert line.endswith('--set ingest.sources.0.kind="github"'), line


def test_an_empty_file_is_named_empty_not_a_failed_record(tmp_path, cli):
    src = tmp_path / "x.jsonl"
    src.write_text("")
    res = cli("run", src, "--out", tmp_path / "r", ok=False)
    line = " ".join(res.output.split()).rsplit("error: ", 1)[-1]
    assert res.exit_code == 1 and "source 'x.jsonl': empty_source 1" in line, line


def test_json_lists_the_stages_in_pipeline_order(tmp_path, cli):
    import json

    from pipeline.stage import NAMES

    res = cli("run", SAMPLE / "edits.jsonl", "--out", tmp_path / "r", "--json")
    summary = json.loads(res.stdout[res.stdout.index("{") :])
    assert list(summary["stages"]) == list(NAMES)


def test_a_file_the_config_names_is_checked_before_the_first_stage(tmp_path):
    from pipeline.errors import EnvError

    missing = str(tmp_path / "no-such-benchmark.jsonl")
    p = Pipeline.from_paths(
        SAMPLE / "edits.jsonl", out=tmp_path / "r", overrides={"decontaminate.against": [missing]}
    )
    with pytest.raises(EnvError, match="decontaminate.against"):  # exit 3
        p.run()
    assert not (tmp_path / "r" / "ingest").exists()  # nothing ran

import json

import polars as pl
import pyarrow.parquet as pq

from pipeline.parts import part_name
from tests.conftest import toml_config

GOOD = [
    {"before": f"x = {i}", "after": f"x = {i + 1}", "comment": "bump", "repo": "a/b"}
    for i in range(5)
]


def setup_run(tmp_path, extra_lines=b""):
    data = b"".join(json.dumps(r).encode() + b"\n" for r in GOOD) + extra_lines
    (tmp_path / "d.jsonl").write_bytes(data)
    return toml_config(tmp_path, '[[ingest.sources]]\nkind = "table"\npath = "d.jsonl"\n')


def test_ingest_writes_items_errors_and_manifest(tmp_path, cli):
    cfg = setup_run(tmp_path, b"{broken\n" + json.dumps(GOOD[0]).encode() + b"\n")
    res = cli("ingest", "--config", cfg)
    out = tmp_path / "runs" / "t" / "ingest"
    items = pl.read_parquet(out / "items.parquet")
    errors = pl.read_parquet(out / "errors.parquet")
    assert items.height == 6 and errors.height == 1
    assert errors["reason"][0].startswith("malformed JSON") and errors["source_ref"][0] == "line 6"
    m = json.loads((out / "manifest.json").read_text())
    assert m["counts"]["records_in"] == 7 and m["counts"]["exact_duplicates"] == 1
    assert m["inputs"]["d.jsonl"].startswith("sha256:")
    assert "1 errors" in res.output and "1 exact-duplicate" in res.output


def test_outputs_are_byte_identical_across_runs(tmp_path, cli):
    cfg = setup_run(tmp_path)
    cli("ingest", "--config", cfg)
    out = tmp_path / "runs" / "t" / "ingest" / "items.parquet" / part_name(0)
    first = out.read_bytes()
    cli("ingest", "--config", cfg, "--force")
    assert out.read_bytes() == first
    meta = pq.read_schema(out).metadata
    assert b"editcurate.fingerprint" in meta


def test_unchanged_stage_is_skipped_and_changed_input_reruns(tmp_path, cli):
    cfg = setup_run(tmp_path)
    cli("ingest", "--config", cfg)
    assert "unchanged inputs" in cli("ingest", "--config", cfg).output
    assert "unchanged inputs" not in cli("ingest", "--config", cfg, "--force").output
    (tmp_path / "d.jsonl").write_text(json.dumps(GOOD[0]) + "\n")
    res = cli("ingest", "--config", cfg)
    assert "unchanged inputs" not in res.output and "1 records -> 1 items" in res.output
    res = cli("ingest", "--config", cfg, "--set", "ingest.batch_size=2")
    assert "unchanged inputs" not in res.output


def test_verify_passes_on_a_run_and_fails_when_outputs_are_tampered_with(tmp_path, cli):
    cfg = setup_run(tmp_path, b"{broken\n")
    cli("run", "--config", cfg)
    run = tmp_path / "runs" / "t"
    assert "verify passed" in cli("verify", run).output
    items = pl.read_parquet(run / "ingest" / "items.parquet")
    items.head(items.height - 1).write_parquet(run / "ingest" / "items.parquet" / part_name(0))
    res = cli("verify", run, ok=False)
    assert res.exit_code == 1
    assert "changed after the stage wrote it" in res.output
    assert "5 records read, 5 accounted for" not in res.output
    assert "records lost" in res.output


def test_verify_catches_a_record_dropped_even_with_a_consistent_manifest(tmp_path, cli):
    cfg = setup_run(tmp_path)
    cli("ingest", "--config", cfg)
    run = tmp_path / "runs" / "t"
    m = json.loads((run / "ingest" / "manifest.json").read_text())
    m["conservation"]["sources"]["d.jsonl"]["records"] += 1  # pretend one more was read
    (run / "ingest" / "manifest.json").write_text(json.dumps(m))
    res = cli("verify", run, ok=False)
    assert res.exit_code == 1 and "6 records read, 5 accounted for" in res.output


def test_unreadable_source_fails_with_one_line_naming_it(tmp_path, cli):
    cfg = toml_config(tmp_path, '[[ingest.sources]]\nkind = "table"\npath = "nope.jsonl"\n')
    res = cli("ingest", "--config", cfg, ok=False)
    assert res.exit_code == 3 and "nope.jsonl: no such file" in res.output
    (tmp_path / "plain").mkdir()
    cfg = toml_config(tmp_path, '[[ingest.sources]]\nkind = "git"\npath = "plain"\n')
    res = cli("ingest", "--config", cfg, ok=False)
    assert res.exit_code == 3 and "not a git repository" in res.output


def test_bad_config_is_a_clear_error(tmp_path, cli):
    cfg = toml_config(tmp_path, '[[ingest.sources]]\nkind = "tabel"\npath = "d.jsonl"\n')
    res = cli("ingest", "--config", cfg, ok=False)
    assert res.exit_code == 2 and "ingest.sources.0.kind: 'tabel' is not one of" in res.output


def test_verify_of_a_missing_run_fails(tmp_path, cli):
    res = cli("verify", tmp_path / "none", ok=False)
    assert res.exit_code == 1 and "no such run folder" in res.output

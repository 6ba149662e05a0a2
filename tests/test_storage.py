"""Inputs on object storage: an S3 server (moto's, on this machine: no internet) holds the
inputs, and a run reads them by URL as it reads local files, with the same outputs."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import storage
from pipeline.api import Pipeline
from pipeline.parts import open_parquet
from pipeline.storage import Location
from tests.conftest import ROOT

pytest.importorskip("s3fs", reason="s3:// needs the [s3] extra (in [dev])")

SAMPLE = ROOT / "data" / "sample" / "edits.jsonl"
# the sample CSV's columns (data/sample/editcurate.toml)
CSV_FIELDS = {
    "change": "pr",
    "path": "file",
    "before": "code_before",
    "after": "code_after",
    "comment": "review_comment",
    "author": "reviewer",
    "created_at": "created",
}


def _tables(run: Location) -> dict[str, pa.Table]:
    """Every Parquet output of a run (a local folder, or a prefix in the bucket) by its path
    in the run folder, schema metadata (which holds the inputs' fingerprints) left out."""
    out = {}
    base = str(run).rstrip("/") + "/"
    for f in sorted(run.rglob("*.parquet"), key=str):
        if f.is_file():
            t = open_parquet(f).read().replace_schema_metadata(None)
            out[str(f).removeprefix(base)] = t
    return out


def _same(a: Location, b: Location) -> None:
    ta, tb = _tables(a), _tables(b)
    assert ta.keys() == tb.keys() and ta
    for k in ta:
        assert ta[k].equals(tb[k]), k


def test_a_run_from_an_s3_url_equals_the_local_run(bucket, tmp_path):
    name, fs = bucket
    fs.put(str(SAMPLE), f"{name}/in/edits.jsonl")
    remote = Pipeline.from_paths(f"s3://{name}/in/edits.jsonl", out=tmp_path / "remote")
    local = Pipeline.from_paths(SAMPLE, out=tmp_path / "local")
    r = remote.run(until="export")
    local.run(until="export")
    _same(tmp_path / "local", tmp_path / "remote")
    m = json.loads((tmp_path / "remote" / "ingest" / "manifest.json").read_text())
    assert m["inputs"]["edits.jsonl"].startswith("object:")
    # unchanged object: skipped; the object replaced (one more record): read again
    assert all(s.skipped for s in remote.run(until="ingest").results)
    fs.pipe(f"{name}/in/edits.jsonl", SAMPLE.read_bytes() + b'{"before": "a", "after": "b"}\n')
    again = remote.run(until="ingest").results[0]
    assert not again.skipped
    assert (
        again.manifest["counts"]["records_in"] == r.results[0].manifest["counts"]["records_in"] + 1
    )


def _pieces_config(root: str, options: dict | None = None) -> dict:
    """Sources read in pieces (shard_bytes small): JSON lines cut at line starts, a folder of
    Parquet files cut by row groups, and a gzipped CSV read whole."""
    run: dict = {"name": "t", "root": "runs"}
    if options is not None:
        run["storage_options"] = options
    return {
        "run": run,
        "ingest": {
            "root": root,
            "shard_bytes": 2048,
            "batch_size": 7,
            "sources": [
                {"kind": "table", "path": "edits.jsonl"},
                {"kind": "table", "path": "parts"},
                {"kind": "table", "path": "edits.csv.gz", "fields": CSV_FIELDS},
            ],
        },
    }


def _pieces_inputs(folder: Path) -> Path:
    folder.mkdir()
    shutil.copy(SAMPLE, folder / "edits.jsonl")
    (folder / "parts").mkdir()
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    t = pa.Table.from_pylist(rows)
    for k in range(3):
        pq.write_table(t.slice(k * 10, 10), folder / "parts" / f"p{k}.parquet", row_group_size=3)
    csv = (ROOT / "data" / "sample" / "edits.csv").read_bytes()
    (folder / "edits.csv.gz").write_bytes(gzip.compress(csv, mtime=0))
    return folder


def _staged(bucket, tmp_path: Path) -> tuple[Path, str, dict]:
    """The pieces inputs as local files and in the bucket: (their folder, their URL, the
    storage options that read them without the AWS variables)."""
    name, fs = bucket
    folder = _pieces_inputs(tmp_path / "in")
    fs.put(str(folder), f"{name}/in", recursive=True)
    options = {"endpoint_url": fs.endpoint_url, "key": "testing", "secret": "testing"}
    return folder, f"s3://{name}/in", options


def _ingest(data: dict, base: Path, executor: str = "local", until: str = "ingest") -> Path:
    """The config run up to `until` in a run folder under `base` (made here)."""
    base.mkdir()
    data["run"]["executor"] = executor
    p = Pipeline.from_config(data)
    p.config = p.config.with_base_dir(base)
    p.run(until=until)
    return base / "runs" / "t"


def test_pieces_of_objects_read_as_local_pieces(bucket, tmp_path):
    """ingest.root a URL, read with run.storage_options: the same items and errors as the
    local files, each piece read from its own byte range or row groups of the object."""
    folder, url, _ = _staged(bucket, tmp_path)
    local = _ingest(_pieces_config(str(folder)), tmp_path / "l")
    remote = _ingest(_pieces_config(url), tmp_path / "r")
    _same(local, remote)
    m = json.loads((remote / "ingest" / "manifest.json").read_text())
    assert sorted(m["inputs"]) == ["edits.csv.gz", "edits.jsonl", "parts"]


def test_ray_workers_read_their_own_pieces_of_objects(bucket, tmp_path, ray_local):
    """On Ray the workers open the objects themselves, with the run's storage options (the
    workers were started before the AWS variables were set, so only the options reach them)."""
    folder, url, options = _staged(bucket, tmp_path)
    local = _ingest(_pieces_config(str(folder)), tmp_path / "l")
    remote = _ingest(_pieces_config(url, options), tmp_path / "r", "ray")
    _same(local, remote)


def test_a_missing_object_or_a_local_only_kind_is_one_line(bucket, tmp_path, cli):
    name, fs = bucket
    res = cli("run", f"s3://{name}/in/nope.jsonl", "--out", tmp_path / "r", ok=False)
    assert res.exit_code == 3
    assert f"s3://{name}/in/nope.jsonl: no such file or folder" in res.output
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[[ingest.sources]]\nkind = "git"\npath = "s3://{name}/repo"\n')
    res = cli("ingest", "--config", cfg, ok=False)
    assert res.exit_code == 3 and "this kind reads a local path only" in res.output
    cfg.write_text('[[ingest.sources]]\nkind = "table"\npath = "nosuchscheme://b/x.jsonl"\n')
    res = cli("ingest", "--config", cfg, ok=False)
    assert res.exit_code == 3 and "nosuchscheme://b/x.jsonl" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_no_credentials_is_one_line_naming_the_object(bucket, tmp_path, monkeypatch, cli):
    name, _ = bucket
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    url = f"s3://{name}/in/edits.jsonl"
    args = (
        "run",
        url,
        "--out",
        tmp_path / "r",
        "--set",
        "run.storage_options.skip_instance_cache=true",
    )
    res = cli(*args, ok=False)
    assert res.exit_code == 3, res.output
    assert f"{url}: cannot be read: NoCredentialsError" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_a_read_that_fails_midway_stops_the_source_and_records_nothing(
    bucket, tmp_path, monkeypatch, cli
):
    """A store's read failure (a reset connection) is not the data's fault: the stage fails
    in one line (exit 3) and writes no manifest, so the next run reads the object again,
    where a damaged local file's bytes would be an error record."""
    import s3fs

    name, fs = bucket
    big = b"".join([SAMPLE.read_bytes()] * 200)  # several blocks of a read
    fs.pipe(f"{name}/in/edits.jsonl", big)
    fetch = s3fs.core.S3File._fetch_range
    calls = [0]

    def flaky(self, start, end):
        calls[0] += 1
        if calls[0] > 2:
            raise ConnectionResetError("connection reset by peer")
        return fetch(self, start, end)

    monkeypatch.setattr(s3fs.core.S3File, "_fetch_range", flaky)
    url = f"s3://{name}/in/edits.jsonl"
    res = cli(
        "run", url, "--out", tmp_path / "r", "--set", "ingest.shard_bytes=100000000", ok=False
    )
    assert res.exit_code == 3, res.output
    assert f"{url}: reading failed at byte" in res.output and "connection reset" in res.output
    assert not (tmp_path / "r" / "ingest" / "manifest.json").exists()


def test_a_scheme_whose_package_is_missing_names_it(tmp_path, cli, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "gcsfs", None)  # importing it fails, installed or not
    res = cli("run", "gs://b/x.jsonl", "--out", tmp_path / "r", ok=False)
    assert res.exit_code == 3
    assert "gs://b/x.jsonl: reading gs:// needs gcsfs (pip install gcsfs)" in res.output


# ------------------------------------------------------------------ the run folder in a bucket


def _local_files(*folders: Path) -> list[str]:
    """Files under the folders, Ray's own session folder (its logs and sockets) left out."""
    return sorted(
        str(f)
        for d in folders
        for f in d.rglob("*")
        if f.is_file() and "ray" not in f.relative_to(d).parts[:1]
    )


def test_a_run_folder_in_s3_holds_the_local_runs_outputs_and_nothing_is_written_locally(
    bucket, tmp_path, cli, monkeypatch
):
    """`editcurate run` from an object to a run folder in the bucket: every stage, verify and
    the report; the outputs equal the local run's; `verify`, `why` and `report` read the
    folder by its URL; a second run skips every stage; and no file is left on local disk
    (the working directory and the temp folder, where scratch files go, are empty)."""
    import tempfile

    name, fs = bucket
    fs.put(str(SAMPLE), f"{name}/in/edits.jsonl")
    cli("run", SAMPLE, "--out", tmp_path / "local")
    here, scratch = tmp_path / "cwd", tmp_path / "tmp"
    here.mkdir()
    scratch.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    url = f"s3://{name}/runs/sample"
    res = cli("run", f"s3://{name}/in/edits.jsonl", "--out", url)
    assert "conservation verified" in res.output
    run = storage.location(url)
    _same(tmp_path / "local", run)
    for f in ("report/report.html", "report/report.md", "export/hf/dataset_dict.json"):
        assert fs.exists(f"{name}/runs/sample/{f}"), f
    assert not fs.exists(f"{name}/runs/sample/.lock")  # the lease, released
    assert "verify passed" in cli("verify", url).output
    some = open_parquet(next(iter(storage.location(f"{url}/export/train.parquet").glob("*"))))
    item = some.read(columns=["id"])["id"][0].as_py()
    assert "split" in cli("why", url, item).output
    assert "report: wrote" in cli("report", url).output
    again = cli("run", f"s3://{name}/in/edits.jsonl", "--out", url).output
    assert again.count("skipped (--force to re-run)") == 6
    assert _local_files(here, scratch) == []


def test_a_killed_attempt_in_s3_is_never_read_and_is_replaced(bucket, tmp_path, cli):
    """No rename on object stores: the manifest is the commit. A stage whose manifest is
    gone (killed while writing) with a stray part of its own left behind is redone, and the
    stray part does not survive into its outputs."""
    name, fs = bucket
    fs.put(str(SAMPLE), f"{name}/in/edits.jsonl")
    url = f"s3://{name}/runs/sample"
    cli("run", f"s3://{name}/in/edits.jsonl", "--out", url, "--until", "dedup")
    before = _tables(storage.location(url))
    stage = f"{name}/runs/sample/dedup"
    fs.rm(f"{stage}/manifest.json")
    fs.pipe(f"{stage}/kept.parquet/part-00007.parquet", b"half a part")
    res = cli("run", f"s3://{name}/in/edits.jsonl", "--out", url, "--until", "dedup")
    assert "dedup: wrote dedup/" in res.output
    assert not fs.exists(f"{stage}/kept.parquet/part-00007.parquet")
    assert _tables(storage.location(url)) == before


def test_a_second_run_on_a_run_folder_in_s3_is_refused_and_an_expired_lease_taken(
    bucket, tmp_path, cli
):
    """The lock is a lease object created only if absent (If-None-Match): while one run
    holds it, another is refused in one line naming the holder (exit 3); a lease whose
    holder died (past its expiry) is taken over."""
    from pipeline.lease import holder
    from pipeline.runs import run_lock

    name, fs = bucket
    fs.put(str(SAMPLE), f"{name}/in/edits.jsonl")
    url = f"s3://{name}/runs/sample"
    args = ("run", f"s3://{name}/in/edits.jsonl", "--out", url, "--until", "ingest")
    with run_lock(storage.location(url)):
        assert holder(storage.location(url) / ".lock") is not None
        res = cli(*args, ok=False)
    assert res.exit_code == 3
    assert "in use by another editcurate process" in res.output
    assert len(res.output.strip().splitlines()) == 1
    fs.pipe(f"{name}/runs/sample/.lock", json.dumps({"owner": "gone:1", "expires": 0}).encode())
    cli(*args)
    assert not fs.exists(f"{name}/runs/sample/.lock")


def test_the_run_folders_storage_options_reach_polars_under_its_names(bucket, monkeypatch):
    """run.storage_options are fsspec's names (endpoint_url, key, secret); polars reads the
    outputs by URL with its own (aws_endpoint_url ...): a run folder read with options only,
    the AWS variables unset, reads the same rows through both."""
    from pipeline.parts import read_output, read_table

    name, fs = bucket
    t = pa.table({"id": ["a", "b", "c"]})
    with fs.open(f"{name}/r/x.parquet/part-00000.parquet", "wb") as f:
        pq.write_table(t, f)
    opts = {"endpoint_url": fs.endpoint_url, "key": "testing", "secret": "testing"}
    url, translated = storage.polars_source(storage.location(f"s3://{name}/r/x.parquet", opts))
    assert url == f"s3://{name}/r/x.parquet"
    assert translated == {
        "aws_endpoint_url": fs.endpoint_url,
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
    }
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k)
    out = storage.location(f"s3://{name}/r/x.parquet", {**opts, "skip_instance_cache": True})
    assert read_output(out)["id"].to_list() == ["a", "b", "c"]
    assert read_table(out).equals(t)


def test_of_two_runs_taking_one_expired_lease_one_wins(bucket, monkeypatch):
    """A lease past its expiry is replaced only over the version read (If-Match): a second
    taker that read the same expired lease finds it replaced, and is refused naming the
    winner instead of taking it too."""
    from pipeline import lease
    from pipeline.lease import RunBusy, holder

    name, fs = bucket
    p = storage.location(f"s3://{name}/runs/x/.lock")
    fs.pipe(f"{name}/runs/x/.lock", json.dumps({"owner": "gone:1", "expires": 0}).encode())
    stale = lease._read(p)  # what both takers read before either wrote
    lease._take(p, "first:1")
    assert holder(p)["owner"] == "first:1"
    real, reads = lease._read, []

    def late_read(q):  # the second taker's first read happened before the first's write
        reads.append(q)
        return stale if len(reads) == 1 else real(q)

    monkeypatch.setattr(lease, "_read", late_read)
    with pytest.raises(RunBusy, match="first:1"):
        lease._take(p, "second:2")
    assert holder(p)["owner"] == "first:1"


def test_a_run_whose_lease_was_taken_over_commits_nothing_more(bucket, monkeypatch):
    """A holder that stalled past its expiry and was replaced learns it at its next renewal
    (the conditional write fails): nothing it commits after that, and the block ends with
    RunBusy, leaving the new holder's lease in place."""
    import time

    from pipeline import lease
    from pipeline.lease import RunBusy, holder, still_held
    from pipeline.runs import run_lock

    monkeypatch.setattr(lease, "RENEW_S", 0.05)
    name, fs = bucket
    run = storage.location(f"s3://{name}/runs/x")
    new = json.dumps({"owner": "other:2", "expires": time.time() + 600}).encode()
    with pytest.raises(RunBusy, match="other:2"), run_lock(run):
        still_held(run)  # held: no error
        fs.pipe(f"{name}/runs/x/.lock", new)
        for _ in range(100):
            time.sleep(0.05)
            try:
                still_held(run)
            except RunBusy:
                raise
    assert holder(run / ".lock")["owner"] == "other:2"


def test_a_stage_killed_while_rewriting_in_s3_leaves_its_readers_stale(
    bucket, tmp_path, cli, monkeypatch
):
    """In a bucket an output is rewritten in place, so the stages that read it lose their
    manifests before the first byte is written: a stage that fails midway leaves no reader
    claiming to be current, and `why` reads no output of the unfinished stage."""
    from pipeline.runner import StageIO
    from pipeline.runs import read_manifest, stale_stages

    name, fs = bucket
    fs.put(str(SAMPLE), f"{name}/in/edits.jsonl")
    url = f"s3://{name}/runs/sample"
    args = ("run", f"s3://{name}/in/edits.jsonl", "--out", url)
    cli(*args, "--until", "decontaminate")
    run = storage.location(url)
    item = open_parquet(next(iter((run / "dedup" / "kept.parquet").glob("*")))).read(["id"])
    item_id = item["id"][0].as_py()
    assert re.search(r"\n +dedup +kept", cli("why", url, item_id).output)

    def killed(self, name):
        raise RuntimeError("killed")

    monkeypatch.setattr(StageIO, "scratch", killed)
    res = cli(*args, "--until", "dedup", "--force", ok=False)
    assert res.exit_code != 0
    assert read_manifest(run / "dedup") is None
    assert read_manifest(run / "decontaminate") is None
    assert "decontaminate" in stale_stages(run)
    assert not re.search(r"\n +dedup +kept", cli("why", url, item_id).output)


def test_a_part_that_fails_while_written_leaves_no_object(bucket):
    """A writer that fails midway uploads nothing a reader could take for a part."""
    from pipeline.parts import PartWriter

    name, fs = bucket
    p = storage.location(f"s3://{name}/r/x.parquet/part-00000.parquet")
    t = pa.table({"id": ["a", "b"]})
    with pytest.raises(RuntimeError), PartWriter(p, t.schema) as w:
        w.write_table(t)
        raise RuntimeError("killed")
    assert not fs.exists(f"{name}/r/x.parquet/part-00000.parquet")


def test_the_bucket_itself_as_the_run_folder_is_one_line(bucket, cli):
    name, fs = bucket
    fs.put(str(SAMPLE), f"{name}/in/edits.jsonl")
    res = cli("run", f"s3://{name}/in/edits.jsonl", "--out", f"s3://{name}", ok=False)
    assert res.exit_code == 2
    assert "not the bucket" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_smoke_train_on_a_run_folder_in_s3_says_to_copy_it_locally(bucket, cli):
    """transformers and peft save to local folders: smoke-train names the URL and what to
    do, in one line, rather than "no such folder"."""
    from pipeline.stage import SMOKE

    name, fs = bucket
    m: dict = {"outputs": {}}
    for rel in SMOKE.reads:  # a finished export, as far as smoke-train looks before starting
        m["outputs"][rel.partition("/")[2]] = {"sha256": ""}
        fs.pipe(f"{name}/runs/x/{rel}", b"PAR1")
    fs.pipe(f"{name}/runs/x/export/manifest.json", json.dumps(m).encode())
    res = cli("smoke-train", f"s3://{name}/runs/x", "--model", "config:tiny", ok=False)
    assert res.exit_code == 2
    assert f"s3://{name}/runs/x is in object storage" in res.output
    assert len(res.output.strip().splitlines()) == 1

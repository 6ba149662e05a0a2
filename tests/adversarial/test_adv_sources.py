"""Sources that are not files to read, and verify's own count of the input's records."""

from __future__ import annotations

import gzip
import json
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import pipeline.ingest.count as count_mod
from pipeline.cli import app
from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext
from pipeline.ingest.mapping import UnmappedField
from pipeline.ingest.sources import table
from tests.adversarial.conftest import EXIT_DATA, EXIT_IO, EXIT_OK, GOOD, ingest_subprocess, jsonl
from tests.conftest import one_by_one


def test_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    res = ingest_subprocess(tmp_path, fifo)
    assert res.returncode == EXIT_IO, res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert str(fifo) in line and "FIFO" in line and "Traceback" not in res.stderr


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_is_refused_without_hanging(tmp_path):
    res = ingest_subprocess(tmp_path, __import__("pathlib").Path("/dev/zero"))
    assert res.returncode == EXIT_IO, res.stderr
    (line,) = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert "/dev/zero" in line and "character device" in line


def test_a_symlink_to_dev_zero_is_refused(ingest, tmp_path):
    (tmp_path / "z.jsonl").symlink_to("/dev/zero")
    r = ingest("z.jsonl", None)
    assert r.code == EXIT_IO and "character device" in r.error_line()


def test_a_folder_given_as_a_file(ingest, tmp_path):
    (tmp_path / "d.jsonl").mkdir()
    (tmp_path / "d.jsonl" / "x.jsonl").write_bytes(jsonl(GOOD))
    r = ingest("d.jsonl", None)
    assert r.code == EXIT_IO
    assert str(tmp_path / "d.jsonl") in r.error_line() and "is a folder" in r.error_line()


def test_a_symlink_to_a_missing_file(ingest, tmp_path):
    (tmp_path / "d.jsonl").symlink_to(tmp_path / "gone.jsonl")
    r = ingest("d.jsonl", None)
    assert r.code == EXIT_IO
    line = r.error_line()
    assert str(tmp_path / "d.jsonl") in line and "broken symlink" in line


def test_a_missing_file(ingest):
    r = ingest("nope.jsonl", None)
    assert r.code == EXIT_IO and "nope.jsonl: no such file" in r.error_line()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_a_file_without_read_permission(ingest, tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_bytes(jsonl(GOOD))
    p.chmod(0)
    try:
        r = ingest("d.jsonl", None)
    finally:
        p.chmod(0o600)
    assert r.code == EXIT_IO and str(p) in r.error_line() and "permission" in r.error_line()


def test_a_socket_is_refused(ingest, tmp_path):
    import socket

    path = tmp_path / "s.jsonl"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
    except OSError:
        pytest.skip("cannot bind a unix socket here")
    try:
        r = ingest("s.jsonl", None)
    finally:
        s.close()
    assert r.code == EXIT_IO and "socket" in r.error_line()


def test_a_corrupt_parquet_file_is_one_error(ingest, tmp_path):
    r = ingest("d.parquet", b"PAR1" + os.urandom(2000) + b"PAR1")
    assert r.code == EXIT_DATA and "records failed" in r.error_line()
    (err,) = r.errors.iter_rows(named=True)
    assert err["source_ref"] == "file" and "unreadable Parquet" in err["reason"]
    r.verify_passes()


def test_parquet_rows_are_counted_from_the_footer(ingest, tmp_path):
    p = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist([*GOOD, {"before": None, "after": "x"}]), p)
    r = ingest("d.parquet", None)
    assert r.code == EXIT_OK and r.items.height == 3 and r.errors.height == 1
    assert r.source["input_unit"].startswith("Parquet rows")
    r.verify_passes()


def test_verify_fails_when_a_reader_drops_a_record_silently(ingest, monkeypatch):
    real = table._read_json

    def lossy(*a, **k):
        for n, rec in enumerate(one_by_one(real(*a, **k))):
            if n != 1:  # drop the second record: no item, no error
                yield rec

    monkeypatch.setattr(table, "_read_json", lossy)
    r = ingest("d.jsonl", jsonl(GOOD))
    # the runner checks conservation as the stage ends: the data failed (exit 1), one line
    assert r.code == 1 and r.items.height == 2
    assert "the input holds 3 records" in r.res.output
    assert "error: ingest: " in r.res.output and "2 accounted for" in r.res.output
    res = CliRunner().invoke(app, ["verify", str(r.run)])
    assert res.exit_code == 1
    assert "the input holds 3 records (non-blank lines), 2 accounted for" in res.output


def test_verify_fails_when_the_manifest_count_is_edited(ingest):
    r = ingest("d.jsonl", jsonl(GOOD))
    m = json.loads((r.run / "ingest" / "manifest.json").read_text())
    m["conservation"]["sources"]["d.jsonl"]["input_records"] = 4
    (r.run / "ingest" / "manifest.json").write_text(json.dumps(m))
    res = CliRunner().invoke(app, ["verify", str(r.run)])
    assert res.exit_code == 1 and "the input holds 4 records" in res.output


# --- the counter agrees with the readers on anything, broken or not ------------------------

CSV_ALPHABET = ["a", "b", ",", '"', "\n", "\r", " ", "\0", "\xff", '""', "\r\n", "\t"]
JSON_ALPHABET = ["{", "}", "[", "]", '"', "\\", ",", " ", "\n", "1", "a", ":", '"x"', "\xff"]
LAYOUTS = [
    ("f.csv", CSV_ALPHABET, b""),
    ("f.tsv", CSV_ALPHABET, b""),
    ("f.json", JSON_ALPHABET, b"["),
    ("g.json", JSON_ALPHABET, b"{\n"),
    ("h.jsonl", JSON_ALPHABET, b""),
]


@pytest.mark.parametrize("seed", range(4))
def test_the_independent_count_matches_the_reader_on_random_damage(tmp_path, monkeypatch, seed):
    rnd = random.Random(seed)
    for _ in range(250):
        monkeypatch.setattr(count_mod, "CHUNK", rnd.choice([1, 2, 3, 7, 1 << 20]))
        for name, alphabet, prefix in LAYOUTS:
            data = prefix + "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 50))).encode(
                "latin-1"
            )
            if rnd.random() < 0.25:
                z = gzip.compress(data)
                data = z[: rnd.randint(2, len(z))] if rnd.random() < 0.5 else z
            p = tmp_path / name
            p.write_bytes(data)
            limit = rnd.choice([8, 16, 64])
            spec = SourceConfig(kind="table", path=str(p), fields={"before": "a", "after": "b"})
            recs: list = []
            try:  # random bytes rarely hold the mapped fields: a config error after the last
                for rec in one_by_one(table.read(spec, p, IngestContext(max_record_bytes=limit))):
                    recs.append(rec)
            except UnmappedField:
                pass
            n, unit = table.count(spec, p, limit)
            assert n == len(recs), (name, data, limit, unit, [(r.ref) for r in recs])

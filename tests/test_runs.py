import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import Config
from pipeline.parts import PartSink
from pipeline.runner import StageIO
from pipeline.runs import StageRun, parquet_sink, read_manifest, write_parquet, write_text

SCHEMA = pa.schema([("id", pa.string())])


def stage(tmp_path, fp="f1", inputs=None) -> StageRun:
    return StageRun(tmp_path, "ingest", fp, "cfg", inputs or {"a": "sha256:1"})


def test_a_failed_write_leaves_neither_output_nor_temp_file(tmp_path):
    out = tmp_path / "x.parquet"
    with pytest.raises(RuntimeError):
        with parquet_sink(out, SCHEMA, {"stage": "t"}) as w:
            w.write_table(pa.table({"id": ["a"]}, schema=SCHEMA))
            raise RuntimeError("killed")
    assert list(tmp_path.iterdir()) == []


def test_parquet_is_byte_identical_and_carries_the_fingerprint(tmp_path):
    t = pa.table({"id": ["a", "b"]}, schema=SCHEMA)
    write_parquet(t, tmp_path / "1.parquet", {"fingerprint": "abc"})
    write_parquet(t, tmp_path / "2.parquet", {"fingerprint": "abc"})
    assert (tmp_path / "1.parquet").read_bytes() == (tmp_path / "2.parquet").read_bytes()
    meta = pq.read_schema(tmp_path / "1.parquet").metadata
    assert meta[b"editcurate.fingerprint"] == b"abc"


def test_fresh_only_when_fingerprint_inputs_and_outputs_match(tmp_path):
    s = stage(tmp_path)
    assert not s.is_fresh()
    s.begin()
    write_parquet(pa.table({"id": ["a"]}, schema=SCHEMA), s.dir / "items.parquet", s.meta)
    s.record_output("items.parquet", "items")
    s.finish({"items_out": 1})
    assert stage(tmp_path).is_fresh()
    assert not stage(tmp_path, fp="f2").is_fresh()
    assert not stage(tmp_path, inputs={"a": "sha256:2"}).is_fresh()
    (s.dir / "items.parquet").write_bytes(b"truncated")
    assert not stage(tmp_path).is_fresh()


def test_begin_drops_the_old_manifest_so_a_killed_rerun_is_not_taken_for_done(tmp_path):
    s = stage(tmp_path)
    s.begin()
    s.finish({})
    assert read_manifest(s.dir) is not None
    (s.dir / ".items.parquet.123.tmp").write_bytes(b"half")
    stage(tmp_path).begin()
    assert read_manifest(s.dir) is None
    assert not list(s.dir.glob(".*.tmp"))


def test_a_symlink_at_a_temp_path_is_replaced_never_written_through(tmp_path):
    """A writer's temp paths (`.NAME.PID.tmp`, the hf build folder) are cleared first: a link
    left there, to a file or a folder, is removed, and its target keeps its content."""
    import os

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    folder = tmp_path / "victim_dir"
    folder.mkdir()
    out = tmp_path / "run"
    out.mkdir()
    pid = os.getpid()
    (out / f".r.md.{pid}.tmp").symlink_to(victim)
    (out / f".x.parquet.{pid}.tmp").symlink_to(victim)
    (out / f".p.parquet.{pid}.tmp").symlink_to(folder)
    write_text(out / "r.md", "text")
    write_parquet(pa.table({"id": ["a"]}, schema=SCHEMA), out / "x.parquet", {})
    sink = PartSink(out / "p.parquet", SCHEMA)
    sink.write_table(pa.table({"id": ["a"]}, schema=SCHEMA))
    sink.close()
    assert (out / "r.md").read_text() == "text" and not (out / "r.md").is_symlink()
    assert pq.read_table(out / "x.parquet").num_rows == 1
    assert pq.read_table(out / "p.parquet").num_rows == 1
    io = StageIO(Config(), None, StageRun(tmp_path, "run", "f", "c", {}))  # type: ignore[arg-type]
    (out / f".hf.{pid}.tmp").symlink_to(folder)
    io.write_tree("hf", lambda dest: (dest.mkdir(), (dest / "f").write_text("built")))
    assert (out / "hf" / "f").read_text() == "built"
    assert victim.read_text() == "precious" and list(folder.iterdir()) == []


def test_a_same_size_byte_flip_in_an_output_makes_the_stage_not_fresh(tmp_path):
    """Freshness is by content: the recorded sha256, not only the size, must match."""
    s = stage(tmp_path)
    s.begin()
    write_parquet(pa.table({"id": ["a"] * 50}, schema=SCHEMA), s.dir / "items.parquet", s.meta)
    s.record_output("items.parquet", "items")
    s.finish({"items_out": 50})
    assert stage(tmp_path).is_fresh()
    p = s.dir / "items.parquet"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))
    assert p.stat().st_size == len(data)
    assert not stage(tmp_path).is_fresh()

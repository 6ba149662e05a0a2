"""The run folder under attack: run names and symlinks, overrides with markup, a folder another
process holds, a killed run, outputs tampered with before verify, hostile ids for why, report
on a partial run. Each case asserts the exit code, the one error line, and that nothing is
written where it should not be."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.parts import part_files, part_name, read_schema
from tests.adversarial.corpus import (
    GOOD,
    SPLITS,
    copy_run,
    corpus,
    fail_lines,
    finished,
    parquet_digests,
    run,
)
from tests.adversarial.hostile import HTML, RICH, cli, one_error_line, verify_passes

__all__ = ["finished"]  # a fixture
pytestmark = pytest.mark.usefixtures("quick_plots")  # conftest: plots are not what is tested


# ------------------------------------------------------------------ overrides and run names


@pytest.mark.parametrize(
    "override, code, shown",
    [
        ("run.name=[bold]x[/]", 2, "[bold]x[/]"),
        ("filter.rules=[red]nope[/red]", 2, "[red]nope[/red]"),
        ("dedup.threshold=[bold]", 2, "dedup.threshold"),
        ("ingest.sources.0.path=[link=file:///etc/passwd]x[/link]", 3, "[link=file:/etc/passwd]"),
        ("export.format=<script>alert(1)</script>", 2, "<script>alert(1)</script>"),
        ("[bold]nokey[/]=1", 2, "[bold]nokey[/]"),
    ],
)
def test_set_values_with_markup_print_as_written(tmp_path, override, code, shown):
    res, _ = run(tmp_path, GOOD, "", None, override)
    assert res.exit_code == code, res.output
    assert shown in one_error_line(res)


@pytest.mark.parametrize("name", ["a\\b", ".", "x\x00y", "a\nb/c", "./..", "..\\x"])
def test_more_run_names_that_are_not_plain_folder_names(tmp_path, name):
    res, _ = run(tmp_path, GOOD, "", None, f"run.name={json.dumps(name)}")
    assert res.exit_code == 2 and "run.name" in one_error_line(res)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "editcurate.toml"]


@pytest.mark.parametrize("name", ["\u202e..", "..\u200b", "-rf", "x:y*?"])
def test_odd_but_plain_run_names_stay_inside_the_root(tmp_path, name):
    cfg = corpus(tmp_path, GOOD[:2])
    res = cli("ingest", "--config", cfg, "--set", f"run.name={json.dumps(name)}")
    assert res.exit_code == 0, res.output
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [name]
    verify_passes(tmp_path / "runs" / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "editcurate.toml", "runs"]


@pytest.mark.parametrize("override", ["run.name=[bold]x", 'run.root="r[1]"'])
def test_a_run_folder_path_with_brackets_is_refused(tmp_path, override):
    """polars would read every output path under it as a glob (and find nothing)."""
    res, _ = run(tmp_path, GOOD, "", None, override)
    assert res.exit_code == 2 and "'[' or ']'" in one_error_line(res)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "editcurate.toml"]


def test_a_run_name_too_long_for_the_file_system(tmp_path):
    res, _ = run(tmp_path, GOOD, "", None, f"run.name={'n' * 300}")
    assert res.exit_code in (2, 3), res.output
    assert "File name too long" in one_error_line(res) or "run.name" in one_error_line(res)


def test_a_run_folder_that_is_a_file(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "t").write_text("not a folder")
    res, _ = run(tmp_path, GOOD)
    assert res.exit_code in (2, 3), res.output
    assert "runs/t" in one_error_line(res)
    assert (tmp_path / "runs" / "t").read_text() == "not a folder"


def test_a_stage_folder_symlinked_out_of_the_root_is_refused(tmp_path):
    res, run_dir = run(tmp_path, GOOD)
    assert res.exit_code == 0
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.rmtree(run_dir / "dedup")
    (run_dir / "dedup").symlink_to(outside)
    res = cli("run", "--config", tmp_path / "editcurate.toml", "--force")
    assert res.exit_code == 2 and "outside the run root" in one_error_line(res)
    assert list(outside.iterdir()) == []


def test_a_run_root_given_as_a_relative_escape_stays_where_it_says(tmp_path):
    """run.root is the user's choice (it may be anywhere); the name stays inside it."""
    (tmp_path / "cfg").mkdir()
    res, _ = run(tmp_path / "cfg", GOOD, "", None, 'run.root="../roots"')
    assert res.exit_code == 0, res.output
    assert (tmp_path / "roots" / "t" / "export").is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg", "roots"]


# ------------------------------------------------------------------ a busy run folder


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    """A finished run, and a second process holding its folder's lock."""
    tmp = tmp_path_factory.mktemp("held")
    res, run_dir = run(tmp, GOOD)
    assert res.exit_code == 0, res.output
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from pipeline.runs import run_lock\n"
            "with run_lock(Path(sys.argv[1])):\n"
            "    print('held', flush=True); time.sleep(120)\n",
            str(run_dir),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield tmp, run_dir, holder.pid
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize(
    "command", ["run", "ingest", "filter", "dedup", "shapes", "export", "report", "tune"]
)
def test_a_second_command_on_a_held_run_folder_exits_3_naming_the_holder(held, command):
    tmp, run_dir, pid = held
    before = parquet_digests(run_dir)
    if command in ("report", "tune"):
        res = cli(command, run_dir)
    else:
        res = cli(command, "--config", tmp / "editcurate.toml", "--force")
    assert res.exit_code == 3, res.output
    assert f"pid {pid}" in one_error_line(res)
    assert parquet_digests(run_dir) == before


def test_readers_do_not_wait_for_a_held_run_folder(held):
    _, run_dir, _ = held
    verify_passes(run_dir)
    ids = pl.read_parquet(run_dir / "ingest" / "items.parquet")["id"].to_list()
    assert cli("why", run_dir, ids[0]).exit_code == 0


# ------------------------------------------------------------------ a killed run resumes


@pytest.mark.parametrize(
    "stage, damage",
    [
        ("ingest", "no_manifest"),
        ("ingest", "no_manifest_and_tmp"),
        ("ingest", "output_truncated"),
        ("dedup", "no_manifest"),
        ("dedup", "tmp_file"),
        ("dedup", "output_gone"),
        ("export", "no_manifest_and_tmp"),
        ("export", "output_truncated"),
        ("export", "output_gone"),
    ],
)
def test_a_killed_run_resumes_byte_identical(finished, tmp_path, stage, damage):
    w = copy_run(finished, tmp_path)
    run_dir = w / "runs" / "t"
    d = run_dir / stage
    folder = next(p for p in sorted(d.glob("*.parquet")))  # an output: a folder of parts
    out = part_files(folder)[0]
    if "no_manifest" in damage:
        (d / "manifest.json").unlink()
    if "tmp" in damage:  # a writer killed midway leaves its temp folder with a partial part
        tmp = d / f".{folder.name}.99999.tmp"
        tmp.mkdir()
        (tmp / out.name).write_bytes(out.read_bytes()[:100])
    if damage == "output_gone":
        shutil.rmtree(folder)
    if damage == "output_truncated":
        out.write_bytes(out.read_bytes()[:-10])
    res = cli("run", "--config", w / "editcurate.toml")
    assert res.exit_code == 0, res.output
    assert parquet_digests(run_dir) == finished[1]
    if damage != "tmp_file":  # a stage redone leaves no temp file (a fresh one is skipped)
        assert not list(run_dir.rglob("*.tmp"))
    verify_passes(run_dir)


# ------------------------------------------------------------------ verify on tampered outputs


def _rewrite(p: Path, t: pa.Table) -> None:
    """Output folder p now holds t, in one part."""
    meta = read_schema(p).metadata
    for f in part_files(p):
        f.unlink()
    pq.write_table(t.replace_schema_metadata(meta), p / part_name(0), compression="zstd")


def _droprow(p: Path) -> None:
    t = pq.read_table(p)
    _rewrite(p, t.slice(1))


def _move_one(run_dir: Path) -> None:
    """One item of a two-item shape group moved to another split: the group spans two."""
    d = run_dir / "export"
    tables = {s: pq.read_table(d / f"{s}.parquet") for s in SPLITS}
    src = next(s for s, t in tables.items() if "v = 1" in t.column("before").to_pylist())
    dst = next(s for s in SPLITS if s != src)
    t = tables[src]
    k = t.column("before").to_pylist().index("v = 1")
    _rewrite(d / f"{dst}.parquet", pa.concat_tables([tables[dst], t.slice(k, 1)]))
    _rewrite(d / f"{src}.parquet", pa.concat_tables([t.slice(0, k), t.slice(k + 1)]))


def _add_errors(run_dir: Path, refs: list[tuple[str, str]]) -> None:
    """Error rows (source, source_ref) appended to ingest's errors."""
    p = run_dir / "ingest" / "errors.parquet"
    t = pq.read_table(p)
    rows = [
        {"source": s, "source_ref": r, "severity": "error", "reason": "x", "raw": ""}
        for s, r in refs
    ]
    _rewrite(p, pa.concat_tables([t, pa.Table.from_pylist(rows, schema=t.schema)]))


def _first_item(run_dir: Path) -> tuple[str, str]:
    row = pl.read_parquet(run_dir / "ingest" / "items.parquet").row(0, named=True)
    return row["source"], row["source_ref"].split("#")[0]


TAMPER = {
    "record_in_items_and_errors": (
        lambda r: _add_errors(r, [_first_item(r)]),
        "records both in items and in errors",
    ),
    "record_in_errors_twice": (
        lambda r: _add_errors(r, [(_first_item(r)[0], "line 999999")] * 2),
        "records in errors twice",
    ),
    "unknown_source": (
        lambda r: _add_errors(r, [("ghost", "line 1")]),
        "outputs name sources the manifest does not: ['ghost']",
    ),
    "row_removed_from_kept": (lambda r: _droprow(r / "filter" / "kept.parquet"), "rows"),
    "row_removed_from_items": (lambda r: _droprow(r / "ingest" / "items.parquet"), "records"),
    "manifest_is_a_list": (
        lambda r: (r / "dedup" / "manifest.json").write_text("[1, 2, 3]"),
        "dedup/manifest.json",
    ),
    "manifest_wrong_types": (
        lambda r: (r / "shapes" / "manifest.json").write_text(
            json.dumps({"outputs": {"kept.parquet": "x"}, "counts": [], "conservation": 5})
        ),
        "shapes/manifest.json",
    ),
    "manifest_binary": (
        lambda r: (r / "filter" / "manifest.json").write_bytes(b"\xff\xfe\x00{"),
        "filter/manifest.json",
    ),
    "parquet_garbage": (
        lambda r: (r / "dedup" / "kept.parquet" / part_name(0)).write_bytes(
            b"PAR1" + b"\0" * 64 + b"PAR1"
        ),
        "dedup/kept.parquet",
    ),
    "output_missing": (lambda r: shutil.rmtree(r / "shapes" / "kept.parquet"), "missing"),
    "part_missing": (lambda r: (r / "dedup" / "kept.parquet" / part_name(0)).unlink(), "dedup"),
    "leak_across_splits": (_move_one, "span two or more splits"),
    "markup_in_a_manifest": (
        lambda r: (r / "export" / "manifest.json").write_text(
            json.dumps({"outputs": {"[bold]x[/].parquet": {"rows": 1}}})
        ),
        "[bold]x[/].parquet",
    ),
}


@pytest.mark.parametrize("tamper", list(TAMPER))
def test_verify_on_a_tampered_run_exits_1_one_line_per_problem(finished, tmp_path, tamper):
    w = copy_run(finished, tmp_path)
    run_dir = w / "runs" / "t"
    damage, expect = TAMPER[tamper]
    damage(run_dir)
    res = cli("verify", run_dir)
    assert res.exit_code == 1, res.output
    lines = fail_lines(res)
    assert lines and any(expect in ln for ln in lines), res.output
    # and a run over it redoes what was damaged: the same bytes as before
    res = cli("run", "--config", w / "editcurate.toml")
    assert res.exit_code == 0, res.output
    assert parquet_digests(run_dir) == finished[1]
    verify_passes(run_dir)


@pytest.mark.parametrize("where", ["missing", "empty", "a_file"])
def test_verify_on_no_run_folder_exits_1(tmp_path, where):
    p = tmp_path / "r"
    if where == "empty":
        p.mkdir()
    if where == "a_file":
        p.write_text("x")
    res = cli("verify", p)
    assert res.exit_code == 1 and len(fail_lines(res)) == 1


# ------------------------------------------------------------------ why with hostile ids


@pytest.mark.parametrize(
    "query",
    [RICH, "a" * 10_000, "", "\x00", "abc", "0123456789abcdef\n[bold]x[/]", "../../etc/passwd"],
    ids=["markup", "10k", "empty", "nul", "short", "newline", "path"],
)
def test_why_with_a_hostile_id_says_unknown_and_exits_1(finished, query):
    src, _ = finished
    res = cli("why", src / "runs" / "t", query)
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    if query.strip() and "\x00" not in query:
        assert query.split("\n")[0][:200] in res.output  # printed as written, not as markup


def test_why_json_with_hostile_ids_is_valid_json(finished):
    src, _ = finished
    res = cli("why", src / "runs" / "t", RICH, HTML, "--json")
    assert res.exit_code == 1
    out = json.loads(res.output)
    assert [(o["query"], o["status"]) for o in out] == [(RICH, "unknown"), (HTML, "unknown")]


def test_why_on_a_folder_that_is_not_a_run(tmp_path):
    res = cli("why", tmp_path / "nope", "abcdef0123")
    assert res.exit_code == 2 and "no such run folder" in one_error_line(res)
    (tmp_path / "empty").mkdir()
    res = cli("why", tmp_path / "empty", "abcdef0123")
    assert res.exit_code == 1 and "unknown id" in res.output and "Traceback" not in res.output


# ------------------------------------------------------------------ report on a partial run


@pytest.mark.parametrize("keep", [(), ("ingest",), ("ingest", "filter"), ("ingest", "dedup")])
def test_report_on_a_run_with_missing_stages(finished, tmp_path, keep):
    w = copy_run(finished, tmp_path)
    run_dir = w / "runs" / "t"
    shutil.rmtree(run_dir / "report")
    for d in run_dir.iterdir():
        if d.is_dir() and d.name not in keep:
            shutil.rmtree(d)
    res = cli("report", run_dir)
    assert res.exit_code == 2, res.output
    missing = next(s for s in ("ingest", "filter", "dedup") if s not in keep)
    assert f"no {missing} output" in one_error_line(res)
    assert not (run_dir / "report").exists()


@pytest.mark.parametrize(
    "manifest", ['{"counts": "x", "outputs": []}', "[1, 2]", '{"outputs": {"a": 1}, "counts": 7}']
)
def test_report_on_a_run_whose_manifest_is_damaged(finished, tmp_path, manifest):
    """A manifest that is not one marks its stage unfinished: report says so, run redoes it."""
    w = copy_run(finished, tmp_path)
    run_dir = w / "runs" / "t"
    (run_dir / "dedup" / "manifest.json").write_text(manifest)
    res = cli("report", run_dir)
    assert res.exit_code == 2 and "no dedup output" in one_error_line(res)
    res = cli("run", "--config", w / "editcurate.toml")
    assert res.exit_code == 0 and parquet_digests(run_dir) == finished[1]


def test_report_on_no_run_folder(tmp_path):
    res = cli("report", tmp_path / "nope")
    assert res.exit_code == 2 and "no such run folder" in one_error_line(res)

"""`editcurate why`: every decision a run made about an item, read back from the run folder."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.why import explain, resolve
from pipeline.why.lookup import one_line
from tests.conftest import make_item_table, toml_config

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "data" / "sample" / "editcurate.toml"
STAGES = ("ingest", "filter", "dedup", "decontaminate", "shapes", "export")


def _invoke(*args: object, code: int = 0, env: dict[str, str] | None = None):
    res = CliRunner().invoke(app, [str(a) for a in args], env=env)
    assert res.exit_code == code, f"exit {res.exit_code}: {res.output}\n{res.exception!r}"
    return res


def _run_stages(config: Path, root: Path, *sets: str) -> None:
    over = ["--set", f"run.root={json.dumps(str(root))}"]
    for s in sets:
        over += ["--set", s]
    for stage in STAGES:
        _invoke(stage, "--config", config, *over)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The sample corpus through every stage, shapes capping (so one item is capped)."""
    root = tmp_path_factory.mktemp("runs")
    _run_stages(CONFIG, root, "shapes.policy=cap")
    return root / "sample"


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> Path:
    """Three records: an exact duplicate pair whose path and comment look like Rich markup."""
    tmp = tmp_path_factory.mktemp("mini")
    same = {
        "repo": "o/r",
        "change": "7",
        "path": "src/[bold]x[/bold].py",
        "before": "x = 1\n",
        "after": "x = 2\n",
        "comment": "[red]use two[/red] :smile: here",
    }
    other = {**same, "change": "8", "path": "b.py", "before": "def f():\n", "after": "def g():\n"}
    other["comment"] = "rename f to g"
    (tmp / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (same, same, other)))
    cfg = toml_config(tmp, '[[ingest.sources]]\nname = "t"\nkind = "table"\npath = "items.jsonl"\n')
    _run_stages(cfg, tmp / "runs")
    return tmp / "runs" / "t"


def _one(run: Path, out: str, frame: str, where: pl.Expr) -> dict:
    return pl.read_parquet(run / out / f"{frame}.parquet").filter(where).row(0, named=True)


def _stage_line(out: str, stage: str) -> str:
    return next(x for x in out.splitlines() if x.startswith(f"    {stage} "))


def test_kept_item_shows_every_stage_and_its_split(run):
    split, row = next(
        (s, pl.read_parquet(run / "export" / f"{s}.parquet").row(0, named=True))
        for s in ("test", "validation", "train")
        if pl.read_parquet(run / "export" / f"{s}.parquet").height
    )
    out = _invoke("why", run, row["id"]).stdout
    assert out.startswith(f"id {row['id']}\n")
    assert f"  path   {row['path']}" in out and f"change {row['change']}" in out
    assert f"{row['source']} {row['source_ref']}" in out
    for st in ("filter", "dedup", "shapes"):
        assert _stage_line(out, st).split()[1] == "kept"
    assert _stage_line(out, "export").startswith(
        f"    export  {split}: export group {row['export_group']}, "
    )
    assert f"-> {split} split" in out


def test_filter_rejected_item_says_rule_reason_and_where_it_stopped(run):
    rej = pl.read_parquet(run / "filter" / "rejected.parquet")
    row = rej.filter(pl.col("reason").str.contains(r"\[bot\]")).row(0, named=True)
    out = _invoke("why", run, row["id"]).stdout
    # the reason holds "[bot]", which Rich would take for markup: it must come out literally
    assert f"rejected by rule {row['rule']}: {row['reason']}" in out
    for st in ("dedup", "shapes", "export"):
        assert _stage_line(out, st) == f"    {st:<7} not reached (stopped at filter)"
    assert "dedup cluster" not in out and "shape groups" not in out


def test_dedup_removed_item_names_its_keeper_and_exact_j(run):
    rem = pl.read_parquet(run / "dedup" / "removed.parquet").sort("id").row(0, named=True)
    out = _invoke("why", run, rem["id"]).stdout
    want = f"removed: {rem['kind']} duplicate of {rem['keeper_id']} (exact J {rem['j']:.4f})"
    assert _stage_line(out, "dedup") == f"    dedup   {want}"
    assert f"keeper {rem['keeper_id']}" in out  # the cluster header
    data = json.loads(_invoke("why", "--json", run, rem["id"]).stdout)
    d = data[0]["rows"][0]["stages"]["dedup"]
    assert (d["keeper_id"], d["j"], d["kind"]) == (rem["keeper_id"], rem["j"], rem["kind"])
    after = data[0]["rows"][0]["stages"]["shapes"]
    assert after == {"status": "not reached", "stopped_at": "dedup"}
    assert data[0]["dedup"]["cluster"]["keeper_id"] == rem["keeper_id"]


def test_shape_group_over_the_cap_shows_members_and_who_was_capped(run):
    capped = pl.read_parquet(run / "shapes" / "removed.parquet").row(0, named=True)
    shapes = pl.read_parquet(run / "shapes" / "shapes.parquet")
    group = shapes.filter(
        (pl.col("scope") == capped["scope"]) & (pl.col("group_id") == capped["group_id"])
    )
    size = group["group_size"][0]
    assert size > 1

    out = _invoke("why", run, capped["id"]).stdout
    assert (
        f"shapes  removed: {capped['reason']} at scope {capped['scope']}, "
        f"group {capped['group_id']}, keeper {capped['keeper_id']}"
    ) in out
    assert _stage_line(out, "export").strip() == "export  not reached (stopped at shapes)"
    line = next(x for x in out.splitlines() if x.startswith(f"    {capped['scope']} "))
    assert f"group {capped['group_id']}," in line and f"size {size};" in line
    assert "over the cap" in line
    assert "members " + ", ".join(sorted(group["id"])) in out

    kept = _invoke("why", run, capped["keeper_id"]).stdout
    assert _stage_line(kept, "shapes").split()[1] == "kept"
    assert "over the cap" in kept
    res = explain(run, [capped["keeper_id"]])[0]
    g = next(x for x in res["shapes"]["groups"] if x["policy_scope"])
    assert (g["group_size"], g["over_cap"], g["removed_in_group"]) == (size, True, size - g["cap"])


def test_unknown_id_says_so_and_exits_1(run):
    known = pl.read_parquet(run / "ingest" / "items.parquet")["id"][0]
    res = _invoke("why", run, "0123456789abcdef01234567", known, code=1)
    assert "0123456789abcdef01234567  unknown id" in res.stdout
    assert f"id {known}" in res.stdout  # the known one is still explained
    res = _invoke("why", run, "abc", code=1)
    assert "unknown id" in res.stdout and "at least 8 characters" in res.stdout


def test_prefix_prints_the_full_id(run):
    full = pl.read_parquet(run / "ingest" / "items.parquet")["id"][3]
    out = _invoke("why", run, full[:8].upper()).stdout
    assert out.startswith(f"id {full}  (from prefix {full[:8].upper()})")


def test_ambiguous_prefix_lists_the_ids_it_matches(tmp_path):
    run = tmp_path / "r"
    (run / "ingest").mkdir(parents=True)
    ids = ["abcdef01" + "0" * 16, "abcdef01" + "1" * 16]
    t = make_item_table([{"id": i, "before": "a", "after": "b"} for i in ids], flags=False)
    pl.from_arrow(t).write_parquet(run / "ingest" / "items.parquet")
    (run / "ingest" / "manifest.json").write_text(json.dumps({"outputs": {"items.parquet": {}}}))
    res = _invoke("why", run, "abcdef01", code=1)
    assert "abcdef01  ambiguous prefix: matches 2 ids" in res.stdout
    assert all(i in res.stdout for i in ids)
    # a run that stopped after ingest: later stages said "not run", nothing crashes
    out = _invoke("why", run, ids[0]).stdout
    assert _stage_line(out, "filter").strip() == "filter  stage not run"
    assert "-> ingested; filter not run" in out
    assert [r["status"] for r in resolve(run, [ids[1][:12], "ffffffff"])] == ["found", "unknown"]


def test_full_ids_and_markup_survive_a_narrow_terminal(mini):
    ids = pl.read_parquet(mini / "ingest" / "items.parquet")
    dup = ids.filter(pl.col("path").str.contains("bold"))["id"][0]
    res = _invoke("why", mini, dup, env={"COLUMNS": "40"})
    lines = res.stdout.splitlines()
    assert f"id {dup}" in lines
    assert "  path   src/[bold]x[/bold].py  (python)" in lines
    assert "  comment │ [red]use two[/red] :smile: here" in lines
    assert f"    dedup   removed: same_id duplicate of {dup} (exact J 1.0000)" in lines
    assert max(len(x) for x in lines) > 40  # nothing was wrapped at the terminal width


def test_one_id_of_two_rows_follows_each_row(mini):
    dup = pl.read_parquet(mini / "dedup" / "removed.parquet").row(0, named=True)
    res = explain(mini, [dup["id"]])[0]
    assert len(res["rows"]) == 2
    by_ref = {r["source_ref"]: r for r in res["rows"]}
    assert by_ref[dup["source_ref"]]["stages"]["dedup"]["kind"] == "same_id"
    (other,) = set(by_ref) - {dup["source_ref"]}
    assert by_ref[other]["stages"]["dedup"] == {"status": "kept"}
    assert by_ref[other]["stages"]["export"]["status"] in ("train", "validation", "test")
    out = _invoke("why", mini, dup["id"]).stdout
    assert out.count("1 of 2 rows from t line ") == 2


def test_json_is_a_list_one_entry_per_query(run):
    rej = pl.read_parquet(run / "filter" / "rejected.parquet").row(0, named=True)
    res = _invoke("why", "--json", run, rej["id"], "ffffffffffff", code=1)
    data = json.loads(res.stdout)
    assert [d["status"] for d in data] == ["found", "unknown"]
    f = data[0]["rows"][0]["stages"]["filter"]
    assert (f["status"], f["rule"], f["reason"]) == ("rejected", rej["rule"], rej["reason"])


def test_missing_run_folder_is_a_usage_error(tmp_path):
    _invoke("why", tmp_path / "nope", "0123456789", code=2)


def test_a_pair_kept_apart_by_its_change_says_so(run):
    """The sample's `!= None` -> `is not None` and the same plus `self._conn = None`: J 0.81,
    but another change, so no cluster; why shows both figures."""
    e = pl.read_parquet(run / "dedup" / "edges.parquet")
    apart = e.filter((pl.col("exact_j") >= 0.8) & (pl.col("change_j") < 0.5))
    assert apart.height == 1
    out = _invoke("why", run, apart["a"][0]).output
    assert "dedup cluster: none" in out
    line = next(x for x in out.splitlines() if apart["b"][0] in x)
    cj = f"change J {apart['change_j'][0]:.4f}"
    assert "exact J 0.8148" in line and cj in line and "(another change)" in line


@pytest.fixture(scope="module")
def near(tmp_path_factory) -> Path:
    """Two hunks making one change to a 30-line file whose texts differ in one other line:
    a near duplicate (one kept, one removed), plus an unrelated item."""
    tmp = tmp_path_factory.mktemp("near")
    base = [f"    value_{k} = compute(alpha_{k}, beta_{k}, gamma={k})" for k in range(30)]
    other = list(base)
    other[0] = "    elsewhere = unrelated_call(0, 28)"
    rows = []
    for k, b in enumerate((base, other)):
        after = [*b[:-1], b[-1] + "  # fixed"]
        rows.append(
            {
                "repo": "o/r",
                "change": str(k + 1),
                "path": f"src/m{k}.py",
                "before": "\n".join(b) + "\n",
                "after": "\n".join(after) + "\n",
                "comment": f"fix the last value, copy {k}",
            }
        )
    rows.append({"repo": "o/r", "change": "9", "path": "b.py", "before": "x\n", "after": "y\n"})
    (tmp / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = toml_config(tmp, '[[ingest.sources]]\nname = "t"\nkind = "table"\npath = "items.jsonl"\n')
    _run_stages(cfg, tmp / "runs")
    return tmp / "runs" / "t"


def test_a_dedup_removed_item_shows_its_keepers_text_beside_its_own(near):
    rem = pl.read_parquet(near / "dedup" / "removed.parquet")
    assert rem.height == 1 and rem["kind"][0] == "near"
    row = rem.row(0, named=True)
    keeper = _one(near, "dedup", "kept", pl.col("id") == row["keeper_id"])
    out = _invoke("why", near, row["id"]).stdout
    lines = out.splitlines()
    at = lines.index(_stage_line(out, "dedup"))
    assert lines[at + 1] == f"            keeper  {row['keeper_id']}  o/r  {keeper['path']}"
    pairs = {  # each text: the item's line, then the keeper's right under it
        "comment": (row["comment"], keeper["comment"]),
        "before": (row["before"], keeper["before"]),
        "after": (row["after"], keeper["after"]),
    }
    k = at + 2
    for c, (mine, theirs) in pairs.items():
        assert lines[k].startswith(f"            {c:<7} item   │ {one_line(mine)}")
        assert lines[k + 1].startswith(f"                    keeper │ {one_line(theirs)}")
        k += 2
    assert one_line(row["before"]) != one_line(keeper["before"])  # they differ: shown apart
    d = json.loads(_invoke("why", "--json", near, row["id"]).stdout)[0]
    k_json = d["rows"][0]["stages"]["dedup"]["keeper"]
    assert k_json["id"] == row["keeper_id"] and k_json["path"] == keeper["path"]
    assert (k_json["before"], k_json["after"]) == (
        one_line(keeper["before"]),
        one_line(keeper["after"]),
    )
    assert d["item"]["before"] == one_line(row["before"])
    # the keeper itself shows no keeper lines
    assert "item   │" not in _invoke("why", near, row["keeper_id"]).stdout


def test_an_exact_duplicate_of_its_own_id_shows_no_keeper_text(mini):
    dup = pl.read_parquet(mini / "dedup" / "removed.parquet").row(0, named=True)
    assert dup["keeper_id"] == dup["id"]
    res = explain(mini, [dup["id"]])[0]
    assert all("keeper" not in r["stages"]["dedup"] for r in res["rows"])
    assert "item   │" not in _invoke("why", mini, dup["id"]).stdout

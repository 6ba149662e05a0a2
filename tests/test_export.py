"""The export stage: whole groups per split, seeded sizes, HF dataset, sft template, leakage."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import datasets
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import ConfigError, ExportConfig, load_config
from pipeline.export import assign_splits, groupings
from pipeline.export.split import WHOLE_CHANGES, sharing_by_source
from pipeline.parts import num_rows, part_name
from pipeline.runs import write_parquet
from pipeline.schema import ITEM_SCHEMA
from pipeline.stage import SPLITS
from pipeline.template import render
from pipeline.verify import cross_split_groups, verify_run

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"
PCC = ".pre-commit-config.yaml"


def frames(
    cluster: list[int],
    shape: list[int],
    repo: list[int],
    dates: list[int] | None = None,
    change: list[int] | None = None,
):
    """items / clusters / shapes frames for n items with the given group labels (change:
    each item its own change unless given)."""
    n = len(cluster)
    ids = [f"id{k:04d}" for k in range(n)]
    items = pl.DataFrame(
        {
            "id": ids,
            "source": ["s"] * n,
            "repo": [f"r{x}" for x in repo],
            "change": [f"c{x}" for x in (change if change is not None else range(n))],
            "created_at": [None if d is None else d for d in (dates or [None] * n)],
        },
        schema={
            "id": pl.String,
            "source": pl.String,
            "repo": pl.String,
            "change": pl.String,
            "created_at": pl.Int64,
        },
    ).with_columns((pl.col("created_at") * 86_400_000_000).cast(pl.Datetime("us", "UTC")))
    clusters = pl.DataFrame({"id": ids, "cluster_id": cluster})
    shapes = pl.DataFrame({"id": ids * 2, "scope": ["repo"] * n + ["change"] * n})
    shapes = shapes.with_columns(group_id=pl.Series([*shape, *range(n)]))
    return items, clusters, shapes


def leaks(items, clusters, shapes, e: ExportConfig, assigned: pl.DataFrame) -> dict[str, int]:
    splits = items.select("id").join(assigned.select("id", "split"), on="id")
    return {n: cross_split_groups(splits, k) for n, k in groupings(items, clusters, shapes, e)}


labels = st.integers(0, 12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(labels, labels, st.integers(0, 3), labels), min_size=1, max_size=60),
    st.integers(0, 5),
    st.sampled_from(["ratio", "repo", "change"]),
)
def test_groups_never_span_splits(rows, seed: int, split_by: str) -> None:
    cluster, shape, repo, change = (list(x) for x in zip(*rows, strict=True))
    items, clusters, shapes = frames(cluster, shape, repo, change=change)
    e = ExportConfig(split_by=split_by, seed=seed, ratios=[0.4, 0.3, 0.3])
    a = assign_splits(items, clusters, shapes, e)
    assert sorted(a["id"].to_list()) == sorted(items["id"].to_list())  # each id once
    assert set(a["split"].unique()) <= set(SPLITS)
    assert set(leaks(items, clusters, shapes, e, a).values()) == {0}
    # the groups are the connected components: chains across groupings stay together
    per = a.group_by("export_group").agg(pl.col("split").n_unique())
    assert per["split"].max() == 1
    if split_by in WHOLE_CHANGES:  # repo keeps changes whole too
        assert sharing(items, a) == 0


def sharing(items: pl.DataFrame, assigned: pl.DataFrame) -> int:
    """Held-out items sharing a change with train, counted here item by item."""
    split = dict(zip(assigned["id"], assigned["split"], strict=True))
    train = {
        (r["repo"], r["change"])
        for r in items.iter_rows(named=True)
        if split[r["id"]] == "train" and r["repo"] and r["change"]
    }
    return sum(
        split[r["id"]] != "train" and (r["repo"], r["change"]) in train
        for r in items.iter_rows(named=True)
    )


def test_the_default_split_keeps_whole_changes_and_ratio_does_not() -> None:
    """split_by = "change" is the default: on 300 items in 50 changes of 6 hunks, no change
    spans two splits; with ratio, held-out hunks share their change with train, and the
    export's count (verify.held_out_sharing_change) says how many."""
    assert ExportConfig().split_by == "change" and load_config(None).export.split_by == "change"
    n = 300
    change = [k // 6 for k in range(n)]
    items, clusters, shapes = frames(list(range(n)), list(range(n)), [0] * n, change=change)
    e = ExportConfig(ratios=[0.4, 0.3, 0.3])
    a = assign_splits(items, clusters, shapes, e)
    per = items.join(a, on="id").group_by("change").agg(pl.col("split").n_unique())
    assert per["split"].max() == 1 and set(a["split"]) == set(SPLITS)
    counted = sharing_by_source(items, a)
    assert counted["sharing_change"].sum() == sharing(items, a) == 0
    assert counted["held_out"].sum() == a.filter(pl.col("split") != "train").height
    ratio = assign_splits(items, clusters, shapes, ExportConfig(split_by="ratio", ratios=e.ratios))
    by_source = sharing_by_source(items, ratio)
    assert by_source["sharing_change"].sum() == sharing(items, ratio) > 0
    assert by_source["source"].to_list() == ["s"]
    # time deals groups to train and validation as ratio does: a change may span them
    e = ExportConfig(split_by="time", after="2030-01-01", ratios=[0.5, 0.5, 0.0])
    timed = assign_splits(items, clusters, shapes, e)
    assert sharing_by_source(items, timed)["sharing_change"].sum() == sharing(items, timed) > 0
    # an item of unknown change (or repo) shares nothing
    blank = items.with_columns(change=pl.lit(""))
    assert sharing_by_source(blank, ratio)["sharing_change"].sum() == 0


def test_chain_of_cluster_and_shape_is_one_group() -> None:
    # a~b by cluster, b~c by shape group, d alone
    items, clusters, shapes = frames([0, 0, 1, 2], [5, 6, 6, 7], [0, 0, 0, 0])
    a = assign_splits(items, clusters, shapes, ExportConfig())
    g = a["export_group"].to_list()
    assert g[0] == g[1] == g[2] != g[3]


def test_deterministic_for_a_seed_and_the_seed_matters() -> None:
    n = 400
    items, clusters, shapes = frames(list(range(n)), [k // 3 for k in range(n)], [0] * n)
    e = ExportConfig(seed=7)
    one = assign_splits(items, clusters, shapes, e)
    rev = assign_splits(items.reverse(), clusters.reverse(), shapes.reverse(), e)
    assert one.equals(rev)  # input order does not matter
    other = assign_splits(items, clusters, shapes, ExportConfig(seed=8))
    assert not one["split"].equals(other["split"])


def test_sizes_follow_the_ratios_and_large_groups_are_held_out_too() -> None:
    n = 3000
    # 1000 singletons, 500 pairs, 250 groups of 4 (all shape groups)
    shape = list(range(1000)) + [1000 + k // 2 for k in range(1000)]
    shape += [2000 + k // 4 for k in range(1000)]
    items, clusters, shapes = frames(list(range(n)), shape, [0] * n)
    a = assign_splits(items, clusters, shapes, ExportConfig(split_by="ratio"))
    share = a.group_by("split").len().with_columns(pl.col("len") / n)
    got = dict(zip(share["split"], share["len"], strict=True))
    for s, r in zip(SPLITS, (0.9, 0.05, 0.05), strict=True):
        assert abs(got[s] - r) < 0.01, (s, got)
    sizes = a.with_columns(size=pl.len().over("export_group"))
    assert sizes.filter((pl.col("split") != "train") & (pl.col("size") == 4)).height > 0


def test_time_split_sends_whole_late_groups_to_test() -> None:
    # days since 1970: 20000 = 2024-10-04; cutoff 2024-10-01 = day 19997
    items, clusters, shapes = frames(
        [0, 1, 2, 3, 4, 5], [0, 0, 1, 2, 3, 4], [0] * 6, [19000, 20000, 19000, None, 19001, 19002]
    )
    e = ExportConfig(split_by="time", after="2024-10-01", ratios=[0.5, 0.5, 0.0])
    a = assign_splits(items, clusters, shapes, e)
    split = dict(zip(a["id"], a["split"], strict=True))
    assert split["id0000"] == split["id0001"] == "test"  # id0000 is early, its twin is late
    assert {split[f"id000{k}"] for k in range(2, 6)} <= {"train", "validation"}


@pytest.mark.parametrize(
    "override, msg",
    [
        ("export.split_by=random", "export.split_by: 'random' is not one of"),
        ("export.ratios=[0.9, 0.2, 0.0]", "export.ratios: three shares"),
        ("export.scope=file", "export.scope: 'file' is not one of"),
        ("export.format=chat", "export.format: 'chat' is not one of"),
        ("export.split_by=time", "export.after: '': time splits need an ISO date"),
    ],
)
def test_bad_export_config_fails_at_load(override: str, msg: str) -> None:
    load_config(None)  # the defaults are valid
    with pytest.raises(ConfigError, match=re.escape(msg)):
        load_config(None, [override])


def test_template() -> None:
    p, c = render("a.py", "use a set", "x = 1\n...\ny = 2", "l = [1]", "s = {1}")
    assert "File: a.py" in p and "use a set" in p and "Context:\nx = 1\n...\ny = 2\n" in p
    assert p.endswith("Code before:\nl = [1]\nCode after:\n") and c == "s = {1}\n"
    assert "Context:" not in render("a.py", "c", "", "b", "a")[0]


# ------------------------------------------------------------------------ end to end (sample)


def _cli(*args: str) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, f"exit {res.exit_code}: {res.output}\n{res.exception!r}"
    return res.output


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory) -> Path:
    """The sample corpus run through shapes once, in a temp folder."""
    d = tmp_path_factory.mktemp("sample")
    for f in ("edits.csv", "github_comments.json", "refinement.jsonl"):
        shutil.copy(SAMPLE / f, d / f)
    toml = (SAMPLE / "editcurate.toml").read_text()
    (d / "editcurate.toml").write_text(toml.replace('root = "../runs"', 'root = "runs"'))
    for stage in ("ingest", "filter", "dedup", "decontaminate", "shapes"):
        _cli(stage, "--config", d / "editcurate.toml")
    return d


def test_export_needs_shapes(tmp_path) -> None:
    (tmp_path / "c.toml").write_text('[run]\nname = "t"\nroot = "runs"\n')
    res = CliRunner().invoke(app, ["export", "--config", str(tmp_path / "c.toml")])
    assert res.exit_code == 2 and "run `editcurate shapes " in res.output


def test_founding_pair_lands_in_one_split(sample_run: Path) -> None:
    run = sample_run / "runs" / "sample"
    items = pl.read_parquet(run / "shapes" / "kept.parquet")
    clusters = pl.read_parquet(run / "dedup" / "clusters.parquet")
    shapes = pl.read_parquet(run / "shapes" / "shapes.parquet")
    pair = items.filter(
        (pl.col("path") == PCC) & pl.col("before").is_in(["    rev: v4.5.0", "    rev: 6.1.0"])
    )["id"].to_list()
    assert len(pair) == 2
    seen = set()
    for seed in range(20):
        e = ExportConfig(seed=seed, ratios=[0.34, 0.33, 0.33])
        a = assign_splits(items, clusters, shapes, e).filter(pl.col("id").is_in(pair))
        assert a["split"].n_unique() == 1, seed
        seen.add(a["split"][0])
    assert len(seen) > 1  # not trivially always train


def test_export_end_to_end(sample_run: Path) -> None:
    cfg = sample_run / "editcurate.toml"
    out = _cli("export", "--config", cfg, "--format", "sft", "--force")
    assert "cross-split groups 0" in out
    exp = sample_run / "runs" / "sample" / "export"
    dd = datasets.load_from_disk(str(exp / "hf"))
    assert list(dd) == list(SPLITS)
    files = {s: str(exp / f"{s}.parquet" / "*.parquet") for s in SPLITS}  # folders of parts
    lp = datasets.load_dataset("parquet", data_files=files, cache_dir=str(sample_run / "cache"))
    n = num_rows(sample_run / "runs" / "sample" / "shapes" / "kept.parquet")
    assert sum(dd[s].num_rows for s in SPLITS) == n
    for ds in (dd, lp):
        for s in SPLITS:
            cols = ds[s].column_names
            assert set(ITEM_SCHEMA.names) | {"export_group", "prompt", "completion"} <= set(cols)
            assert ds[s].num_rows == dd[s].num_rows
    row = dd["train"][0]
    want = render(row["path"], row["comment"], row["context"], row["before"], row["after"])
    assert (row["prompt"], row["completion"]) == want
    card = (exp / "README.md").read_text()
    assert f"| train | {dd['train'].num_rows} |" in card and "config fingerprint" in card
    assert "github_comments" in card
    problems, passed = verify_run(sample_run / "runs" / "sample")
    assert problems == [] and any(p.startswith("export:") for p in passed)


def test_verify_fails_when_a_group_spans_splits(sample_run: Path, tmp_path) -> None:
    _cli("export", "--config", sample_run / "editcurate.toml", "--force")  # plain format
    run = tmp_path / "run"
    shutil.copytree(sample_run / "runs" / "sample", run)
    assert verify_run(run)[0] == []
    # move one founding item from its split to another: its twin stays behind
    exp = run / "export"
    tables = {s: pl.read_parquet(exp / f"{s}.parquet") for s in SPLITS}
    src = next(s for s in SPLITS if tables[s].filter(pl.col("path") == PCC).height >= 2)
    dst = next(s for s in SPLITS if s != src)
    moved = tables[src].filter(pl.col("before") == "    rev: v4.5.0")
    assert moved.height == 1
    tables[src] = tables[src].filter(pl.col("before") != "    rev: v4.5.0")
    tables[dst] = pl.concat([tables[dst], moved])
    for s in (src, dst):
        shutil.rmtree(exp / f"{s}.parquet")
        write_parquet(tables[s].to_arrow(), exp / f"{s}.parquet" / part_name(0), {})
    problems, _ = verify_run(run)
    assert any("shape group (repo) groups span two or more splits" in p for p in problems)


def test_verify_fails_when_one_id_is_in_two_splits(sample_run: Path, tmp_path) -> None:
    _cli("export", "--config", sample_run / "editcurate.toml", "--force")
    run = tmp_path / "run"
    shutil.copytree(sample_run / "runs" / "sample", run)
    exp = run / "export"
    train, test = (pl.read_parquet(exp / f"{s}.parquet") for s in ("train", "test"))
    shutil.rmtree(exp / "test.parquet")  # an item of train copied into test as well
    write_parquet(pl.concat([test, train[:1]]).to_arrow(), exp / "test.parquet" / part_name(0), {})
    problems, _ = verify_run(run)
    assert any("export: 1 id groups span two or more splits" in p for p in problems), problems


def test_the_same_edit_in_two_files_or_two_repos_lands_in_one_split() -> None:
    """One commit made `attr()` -> `attr.ib()` in two test files, and another repository
    made the same edit with other numbers: wherever the seed deals them, one split."""
    from pipeline.config import ShapesConfig
    from pipeline.shapes import group_shapes
    from tests.conftest import make_item_table

    twins = [
        dict(repo="attrs/attrs", change="c1", path="tests/test_make.py", before="x = attr(1)"),
        dict(repo="attrs/attrs", change="c1", path="tests/test_dark.py", before="  x = attr(1)"),
        dict(repo="other/lib", change="9", path="lib/m.py", before="x = attr(7)"),
    ]
    twins = [{**t, "after": t["before"].replace("attr(", "attr.ib(")} for t in twins]
    filler = [
        dict(repo=f"r/{k % 4}", change=str(k), path=f"f{k}.py", before="a" * k, after="b" * k)
        for k in range(1, 80)
    ]
    df = pl.from_arrow(make_item_table(twins + filler))
    shapes = group_shapes(df, ShapesConfig()).drop("_row")
    clusters = pl.DataFrame(schema={"id": pl.String, "cluster_id": pl.Int64})
    ids = df["id"].to_list()[:3]
    for seed in range(20):
        a = assign_splits(df, clusters, shapes, ExportConfig(seed=seed, ratios=[0.4, 0.3, 0.3]))
        assert a.filter(pl.col("id").is_in(ids))["split"].n_unique() == 1, seed


def test_the_card_has_hugging_face_front_matter_and_the_funnel(tmp_path, cli):
    import yaml

    rows = "".join(
        json.dumps({"before": f"x = {k}", "after": f"y = {k}", "comment": f"rename x in f{k}"})
        + "\n"
        for k in range(40)
    )
    (tmp_path / "d.jsonl").write_text(rows)
    (tmp_path / "c.toml").write_text(
        '[run]\nname = "t: a run"\nroot = "runs"\n[[ingest.sources]]\nkind = "table"\n'
        'path = "d.jsonl"\n[export]\nlicense = "mit"\n'
    )
    cli("run", "--config", tmp_path / "c.toml")
    card = (tmp_path / "runs" / "t: a run" / "export" / "README.md").read_text()
    assert card.startswith("---\n")
    meta = yaml.safe_load(card.split("---\n")[1])
    assert meta["license"] == "mit" and meta["size_categories"] == ["n<1K"]
    assert meta["task_categories"] == ["text-generation"] and "code-review" in meta["tags"]
    files = meta["configs"][0]["data_files"]
    assert [(f["split"], f["path"]) for f in files] == [
        ("train", "train.parquet/*.parquet"),
        ("validation", "validation.parquet/*.parquet"),
        ("test", "test.parquet/*.parquet"),
    ]
    assert "## Curation funnel" in card and "| filter | 40 |" in card


def test_deal_is_the_midpoint_rule_over_the_seeded_sha256_order():
    """The vectorised deal equals the rule written out group by group."""
    import hashlib
    import random

    from pipeline.export import deal

    def reference(sizes, keys, ratios, seed):
        order = sorted(
            range(len(sizes)),
            key=lambda g: (hashlib.sha256(f"{seed}\0{keys[g]}".encode()).hexdigest(), keys[g]),
        )
        bounds = np.cumsum(ratios) / sum(ratios)
        out, done = [0] * len(sizes), 0
        for g in order:
            mid = (done + sizes[g] / 2) / (sum(sizes) or 1)
            out[g] = min(int(np.searchsorted(bounds, mid, side="right")), len(ratios) - 1)
            done += sizes[g]
        return out

    r = random.Random(3)
    for _ in range(200):
        keys = sorted({f"id{r.randrange(10**6)}" for _ in range(r.randrange(40))})
        sizes = [r.randint(1, 9) for _ in keys]
        ratios = [r.random() + 0.01 for _ in range(3)]
        assert list(deal(sizes, keys, ratios, 5)) == reference(sizes, keys, ratios, 5)


def _leaks_in_files(d: Path, splits: pl.DataFrame, grouping: dict) -> list[int]:
    """verify's count of one grouping's groups across splits, from split files in `d` (in
    memory and by key range: the same)."""
    from pipeline.config import Config
    from pipeline.leakage import leakage_counts
    from pipeline.verify import leakage_in_memory

    for s in SPLITS:
        rows = splits.filter(pl.col("split") == s).drop("split").to_arrow()
        shutil.rmtree(d / f"{s}.parquet", ignore_errors=True)
        write_parquet(rows, d / f"{s}.parquet" / part_name(0), {})
    leak = {"splits": {s: f"{s}.parquet" for s in SPLITS}, "groupings": [grouping]}
    here = leakage_in_memory(d, leak, True)
    assert leakage_counts(Config(), d, leak, True) == here
    return here[0]


def test_split_by_change_keeps_every_hunk_of_a_change_in_one_split(tmp_path) -> None:
    """Hunks of one commit share its comment and often its text: split_by = "change" deals
    whole changes; items of unknown change (empty) are not one change."""
    from pipeline.export.split import manifest_groupings
    from pipeline.verify import column_keys

    n = 300
    items, clusters, shapes = frames(list(range(n)), list(range(n)), [k % 3 for k in range(n)])
    change = [f"c{k // 6}" if k % 10 else "" for k in range(n)]  # 6 hunks a change, some unknown
    items = items.with_columns(change=pl.Series(change))
    e = ExportConfig(split_by="change", ratios=[0.4, 0.3, 0.3])
    a = assign_splits(items, clusters, shapes, e)
    per = items.join(a, on="id").filter(pl.col("change") != "")
    assert per.group_by("repo", "change").agg(pl.col("split").n_unique())["split"].max() == 1
    assert set(leaks(items, clusters, shapes, e, a).values()) == {0}
    unknown = a.join(items.filter(pl.col("change") == ""), on="id")
    assert unknown["split"].n_unique() == 3  # not held together
    assert {"name": "change", "columns": ["repo", "change"]} in manifest_groupings(e, "c")
    assert column_keys(items, ["repo", "change"]).height == items.height - n // 10
    # verify reads the grouping back from the manifest and finds a change spread by hand
    splits = items.join(a.select("id", "split"), on="id")
    grouping = {"name": "change", "columns": ["repo", "change"]}
    assert _leaks_in_files(tmp_path, splits, grouping) == [0]
    moved = splits.with_columns(
        split=pl.when(pl.col("id") == per["id"][0]).then(pl.lit("test")).otherwise("split")
    )
    moved = moved.with_columns(
        split=pl.when(pl.col("id") == per.filter(pl.col("change") == per["change"][0])["id"][1])
        .then(pl.lit("train"))
        .otherwise("split")
    )
    assert _leaks_in_files(tmp_path, moved, grouping) == [1]
    e = ExportConfig(split_by="ratio", ratios=[0.4, 0.3, 0.3])
    ratio = assign_splits(items, clusters, shapes, e)
    split = items.join(ratio, on="id").filter(pl.col("change") != "")
    assert split.group_by("repo", "change").agg(pl.col("split").n_unique())["split"].max() > 1


def _held_out_sharing(run: Path) -> tuple[int, int]:
    """(held-out items sharing a change with train, held-out items), from the split files."""
    t = {s: pl.read_parquet(run / "export" / f"{s}.parquet") for s in SPLITS}
    train = {(r, c) for r, c in zip(t["train"]["repo"], t["train"]["change"], strict=True) if c}
    held = pl.concat([t["validation"], t["test"]])
    n = sum((r, c) in train for r, c in zip(held["repo"], held["change"], strict=True) if r and c)
    return n, held.height


def test_ratio_warns_in_the_card_and_the_report_and_change_does_not(sample_run: Path) -> None:
    """With split_by = "ratio" the export counts the held-out items that share a change with
    train; the card and the report warn with that count. With the default (change): 0, and no
    warning anywhere."""
    cfg, run = sample_run / "editcurate.toml", sample_run / "runs" / "sample"
    ratios = ["--set", "export.ratios=[0.4, 0.3, 0.3]"]
    out = _cli("export", "--config", cfg, "--force", "--set", "export.split_by=ratio", *ratios)
    n, held = _held_out_sharing(run)
    assert n > 0
    m = json.loads((run / "export" / "manifest.json").read_text())
    assert m["counts"]["held_out_sharing_change_with_train"] == n and m["split_by"] == "ratio"
    by = m["sharing_change"]["by_source"]
    assert sum(r["sharing_change"] for r in by) == n and sum(r["held_out"] for r in by) == held
    assert f"warning: {n} of {held} validation and test items share a change" in out
    card = (run / "export" / "README.md").read_text()
    assert f"**Warning**: {n} of {held} validation and test items share a change" in card
    _cli("report", run)
    fig = json.loads((run / "report" / "report.json").read_text())["splits"]["sharing_change"]
    assert (fig["sharing"], fig["held_out"], fig["whole"]) == (n, held, False)
    md = (run / "report" / "report.md").read_text()
    html = (run / "report" / "report.html").read_text()
    assert f"**Warning**: {n} of {held} validation and test items share a change" in md
    assert f"<b>Warning</b>: {n} of {held} validation and test items share a change" in html
    problems, passed = verify_run(run)  # verify re-counts it from the split files
    assert problems == [] and any(f"held_out_sharing_change_with_train {n}" in p for p in passed)

    _cli("export", "--config", cfg, "--force", *ratios)  # the default: whole changes
    assert _held_out_sharing(run)[0] == 0
    m = json.loads((run / "export" / "manifest.json").read_text())
    assert m["split_by"] == "change" and m["counts"]["held_out_sharing_change_with_train"] == 0
    card = (run / "export" / "README.md").read_text()
    assert "Warning" not in card
    assert "sharing a change with train: 0 of " in card
    _cli("report", run)
    md = (run / "report" / "report.md").read_text()
    html = (run / "report" / "report.html").read_text()
    assert "**Warning**" not in md and "<b>Warning</b>" not in html
    assert "keeps every change in one split" in md


def test_verify_finds_a_held_out_sharing_count_that_does_not_match(sample_run, tmp_path):
    _cli("export", "--config", sample_run / "editcurate.toml", "--force")
    run = tmp_path / "run"
    shutil.copytree(sample_run / "runs" / "sample", run)
    p = run / "export" / "manifest.json"
    m = json.loads(p.read_text())
    m["counts"]["held_out_sharing_change_with_train"] = 5
    p.write_text(json.dumps(m))
    problems, _ = verify_run(run)
    assert any(
        "0 held-out items share a change with train, the manifest recorded 5" in x for x in problems
    )


def test_the_hf_copy_is_byte_identical_across_exports_of_the_same_data(tmp_path: Path) -> None:
    """export/hf's state.json fingerprint is the splits' content hash, not one datasets
    derives from the files' paths and times (or draws at random for an empty split)."""
    import hashlib

    from pipeline.export.card import save_hf
    from pipeline.runs import parts_sink

    t = pl.DataFrame({"id": ["a", "b", "c"], "after": ["x", "y", "z"]}).to_arrow()

    def export(run: Path) -> dict[str, str]:
        files = {}
        for s, rows in zip(SPLITS, (2, 1, 0), strict=True):
            files[s] = run / f"{s}.parquet"
            with parts_sink(files[s], t.schema, {"stage": "export"}, 10) as w:
                w.write_table(t.slice(0, rows))
        save_hf(files, run / "hf")
        return {
            p.relative_to(run / "hf").as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((run / "hf").rglob("*"))
            if p.is_file()
        }

    first, second = export(tmp_path / "r1"), export(tmp_path / "r2")
    assert "train/state.json" in first and first == second
    dd = datasets.load_from_disk(str(tmp_path / "r2" / "hf"))
    assert [dd[s].num_rows for s in SPLITS] == [2, 1, 0]
    assert dd["train"]["id"] == ["a", "b"]

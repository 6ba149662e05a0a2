import random
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.config import DedupConfig, load_config
from pipeline.dedup import stage
from pipeline.dedup.shingles import item_shingles
from pipeline.runs import StageRun, write_parquet
from pipeline.verify import verify_run
from tests.conftest import make_item_table

OUTPUTS = (
    "kept.parquet",
    "removed.parquet",
    "edges.parquet",
    "clusters.parquet",
    "oversized_buckets.parquet",
)
CODE = "def load(path):\n    with open(path) as f:\n        data = json.load(f)\n    return data"
FOUNDING = [
    dict(
        path=".pre-commit-config.yaml",
        before=" rev: v4.5.0",
        after=" rev: v5.0.0",
        comment="fyi, there's a v5.0.0 of this out now",
        repo="pre-commit/pre-commit-hooks",
        change="abc",
    ),
    dict(
        path=".pre-commit-config.yaml",
        before=" rev: 6.1.0",
        after=" rev: 7.0.0",
        comment="and 7.0.0 of this",
        repo="pre-commit/pre-commit-hooks",
        change="abc",
    ),
]


def dedup(rows, **cfg):
    t = make_item_table(rows) if isinstance(rows, list) else rows
    d = DedupConfig(**cfg)
    return stage.find_duplicates(pl.from_arrow(t.select(stage.needed_columns(d))), d)


def jaccard(x, y, f=("before", "after")):
    x, y = {"path": "a.py", **x}, {"path": "a.py", **y}  # make_item_table's default path
    a, b = item_shingles(x, list(f), 5), item_shingles(y, list(f), 5)
    return len(a & b) / len(a | b)


def test_identical_items_cluster_and_the_keeper_is_chosen_by_rank():
    early, late = (
        datetime(2020, 1, 1, tzinfo=timezone.utc),
        datetime(2024, 1, 1, tzinfo=timezone.utc),
    )
    rows = [
        dict(before=CODE, after=CODE + "\n", comment="same", change="1", created_at=late),
        dict(before=CODE, after=CODE + "\n", comment="same", change="2"),  # no date: last
        dict(before=CODE, after=CODE + "\n", comment="same", change="3", created_at=early),
    ]
    t = make_item_table(rows)
    r = dedup(pa.concat_tables([t, t.slice(0, 1)]))  # row 0 read twice: same id
    assert r.counts["kept"] == 1 and r.counts["removed"] == 3
    keeper = t["id"][2].as_py()  # earliest wins (comments tie), not input order
    assert r.clusters["keeper_id"].unique().to_list() == [keeper]
    assert r.removed["kind"].to_list() == ["same_content"] * 3
    assert r.removed["j"].to_list() == [1.0, 1.0, 1.0]
    assert r.counts["removed_same_content"] == 3


def test_rows_sharing_an_id_are_same_id_duplicates():
    t = make_item_table([dict(before=CODE, comment="c")])
    r = dedup(pa.concat_tables([t, t]))
    assert r.counts["removed_same_id"] == 1 and r.removed["keeper_id"][0] == t["id"][0].as_py()


def test_near_duplicates_merge_with_their_exact_jaccard_and_disjoint_items_do_not():
    near = CODE.replace("data = json.load(f)", "data = json.load(f)  # noqa")
    rows = [
        dict(before=CODE, after=CODE.replace("json", "orjson"), comment="use orjson"),
        dict(before=CODE, after=near.replace("json", "orjson"), comment="use orjson"),
        dict(
            path="b.go",
            before="if err != nil { return err }",
            after="return nil",
            comment="simplify",
        ),
        dict(path="c.rs", before="let x = 5;", after="let y = 6;", comment="rename"),
    ]
    j = jaccard(rows[0], rows[1])
    assert 0.8 <= j < 1.0
    r = dedup(rows)
    assert r.counts["removed_near"] == 1 and r.counts["kept"] == 3
    assert r.removed["j"][0] == pytest.approx(j)
    assert r.edges["exact_j"].to_list() == [pytest.approx(j)]
    assert r.edges["est_j"][0] == pytest.approx(j, abs=0.15)


def test_empty_items_never_match():
    rows = [dict(path="", comment="", change=str(k)) for k in range(3)]
    rows += [
        dict(path=" ", before="\n", after="\n  ", change="9"),
        dict(path=" ", before="\n", after="\n  ", change="10"),
    ]
    r = dedup(rows)
    assert r.counts["removed"] == 0 and r.counts["no_shingles"] == 5


def test_the_founding_pre_commit_items_are_not_merged_at_08():
    assert jaccard(*FOUNDING) < 0.5  # same path, but every version token differs
    r = dedup(FOUNDING)
    assert r.counts["removed"] == 0 and r.counts["kept"] == 2


def _chain():
    base = [f"    x{k} = f{k}(a, b)" for k in range(4)]
    v = ["\n".join(base + [f"    y{j} = g{j}(c)" for j in range(k)]) for k in range(3)]
    rows = [dict(before=v[k], comment="x", change=str(k)) for k in range(3)]
    assert jaccard(rows[0], rows[2]) < 0.8 <= min(jaccard(*rows[:2]), jaccard(*rows[1:]))
    return rows


def test_a_chain_a_b_c_keeps_a_and_c_and_one_component_holds_all_three():
    rows = _chain()
    rows[0]["lines_added"] = 9  # A is the best-ranked: most lines changed
    r = dedup(rows, keeper=["-lines_changed"])
    ids = make_item_table(rows)["id"].to_pylist()
    assert r.counts["kept"] == 2 and r.counts["removed_near"] == 1
    assert r.removed["keeper_id"].to_list() == [ids[0]]
    assert r.removed["j"][0] == pytest.approx(jaccard(rows[0], rows[1]))
    kept_ids = set(r.clusters.filter(pl.col("is_keeper"))["id"])
    assert kept_ids == {ids[0], ids[2]}  # C is not removed through B
    assert r.clusters["component_id"].n_unique() == 1 and r.clusters.height == 3
    assert r.counts["clusters"] == 1 and r.counts["components"] == 1
    assert r.counts["kept_pairs_above_threshold"] == 0


def test_the_middle_of_a_chain_ranked_first_removes_both_ends():
    rows = _chain()
    rows[1]["lines_added"] = 9
    r = dedup(rows, keeper=["-lines_changed"])
    ids = make_item_table(rows)["id"].to_pylist()
    assert r.counts["kept"] == 1
    assert set(r.removed["keeper_id"]) == {ids[1]}
    assert (r.removed["j"] >= 0.8).all()


def test_two_one_line_edits_of_one_commit_and_file_never_merge():
    """Real history: a commit whose subject and path dominate its small hunks."""
    common = dict(
        repo="attrs/attrs",
        change="6f2b1c0",
        path="src/attr/_make.py",
        comment="Implement auto_detect for attr.s: detect eq, order and hash methods that "
        "the user wrote in the class body, and use them instead of generating",
    )
    rows = [
        dict(common, before="", after="        auto_detect=False,"),
        dict(common, before="    eq = True", after="    eq = default_eq"),
    ]
    assert dedup(rows).counts["removed"] == 0
    # what the old default (path and comment shingled too, no change check) did to them
    old = dict(fields=["path", "before", "after", "comment"], change_threshold=0)
    assert dedup(rows, **old).counts["removed"] == 1
    # shingled so, they are near; their changes (`auto_detect=False,` put in; `True` ->
    # `default_eq`) share nothing, so the change check keeps them apart all the same
    assert dedup(rows, fields=old["fields"]).counts["removed"] == 0


def _brute_jaccard(rows, fields=("before", "after")):
    sets = [item_shingles({"path": "a.py", **r}, list(fields), 5) for r in rows]
    return lambda i, k: len(sets[i] & sets[k]) / max(len(sets[i] | sets[k]), 1)


def test_every_removed_item_is_near_its_keeper_and_no_two_kept_items_are():
    """A templated family with drift: stars over exact J, checked against brute force."""
    rnd = random.Random(7)
    lines = [f"    value_{k} = compute_{k}(alpha, beta, gamma)" for k in range(12)]
    rows = []
    for i in range(60):
        body = list(lines)
        for _ in range(rnd.randint(0, 4)):  # drift: each item changes a few lines
            body[rnd.randrange(12)] = f"    other_{rnd.randrange(99)} = g(x)"
        rows.append(dict(before="\n".join(body), after="", comment="c", change=str(i)))
    r = dedup(rows, bucket_cap=4)  # force the oversized-bucket scan
    ids = make_item_table(rows)["id"].to_pylist()
    pos = {x: k for k, x in enumerate(ids)}
    jac = _brute_jaccard(rows)
    for rid, kid, j in r.removed.select(pl.col("_row"), "keeper_id", "j").iter_rows():
        assert j >= 0.8 and jac(rid, pos[kid]) == pytest.approx(j)
    kept = sorted(set(range(len(rows))) - set(r.removed["_row"]))
    above = [(a, b) for a in kept for b in kept if a < b and jac(a, b) >= 0.8]
    assert above == [] and r.counts["removed"] > 10


def make_run(tmp_path: Path, table: pa.Table, name: str = "t"):
    cfg_path = tmp_path / f"{name}.toml"
    cfg_path.write_text(f'[run]\nname = "{name}"\nroot = "runs"\n')
    cfg = load_config(cfg_path)
    sr = StageRun(cfg.run_dir, "filter", "fp", "cfg", {})
    sr.begin()
    write_parquet(table, sr.dir / "kept.parquet", sr.meta)
    sr.record_output("kept.parquet", "items")
    sr.finish({})
    return cfg, cfg_path


def corpus(n=60):
    rnd = random.Random(3)
    rows = []
    for k in range(n):
        body = "\n".join(
            f"    v{rnd.randrange(999)} = call_{rnd.randrange(99)}(x)" for _ in range(6)
        )
        rows.append(
            dict(
                path=f"m{k % 5}.py",
                before=body,
                after=body + "\n    return x",
                comment=f"comment {k}",
                change=str(k),
            )
        )
        if k % 4 == 0:  # a near copy elsewhere, and an exact copy in another PR
            rows.append(dict(rows[-1], change=f"{k}b", comment=f"comment {k}!"))
            rows.append(dict(rows[-1], change=f"{k}c"))
    return make_item_table(rows)


def test_stage_writes_conserving_outputs_independent_of_input_order(tmp_path, cli):
    t = corpus()
    cfg1, p1 = make_run(tmp_path, t, "a")
    rows = list(range(t.num_rows))
    random.Random(0).shuffle(rows)
    cfg2, p2 = make_run(tmp_path, t.take(rows), "b")
    cli("dedup", "--config", p1)
    cli("dedup", "--config", p2)
    for name in OUTPUTS:
        x = pq.read_table(cfg1.run_dir / "dedup" / name)
        y = pq.read_table(cfg2.run_dir / "dedup" / name)
        assert x.equals(y), name
    problems, _ = verify_run(cfg1.run_dir)
    assert problems == []
    removed = pl.read_parquet(cfg1.run_dir / "dedup" / "removed.parquet")
    assert {"keeper_id", "j", "kind", "flags"} <= set(removed.columns)
    assert removed.height == 30  # 15 near copies + 15 exact copies of them
    res = cli("dedup", "--config", p1)
    assert "skipped" in res.output


def test_a_missing_filter_output_is_one_clear_line(tmp_path, cli):
    p = tmp_path / "c.toml"
    p.write_text('[run]\nname = "x"\nroot = "runs"\n')
    res = cli("dedup", "--config", p, ok=False)
    assert res.exit_code == 2
    assert "no filter output" in res.output and "editcurate filter" in res.output


def test_a_bad_dedup_config_names_the_key(tmp_path, cli):
    cfg, p = make_run(tmp_path, corpus(4))
    res = cli("dedup", "--config", p, "--set", "dedup.bands=64", ok=False)
    assert res.exit_code == 2 and "dedup.bands" in res.output


def test_an_empty_input_gives_empty_outputs_that_verify(tmp_path, cli):
    cfg, p = make_run(tmp_path, make_item_table([]))
    cli("dedup", "--config", p)
    for name in OUTPUTS:
        assert pq.read_table(cfg.run_dir / "dedup" / name).num_rows == 0
    assert verify_run(cfg.run_dir)[0] == []

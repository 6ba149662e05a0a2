"""The report shows why: drop-rule examples, borderline pairs on both sides of the threshold,
the largest clusters member by member, the spread order the shapes stage wrote, and data that
cannot break out of the HTML or the Markdown it lands in.

One small corpus is built here so that each of those exists: seven lock files (more than the
five examples shown), bot authors, a no-op, a six-item near-duplicate cluster, pairs a line or
two apart, and thirty version bumps of one shape in one repo (more than the spread windows).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest

from pipeline.report import report as R
from pipeline.report.dedup import borderline, largest_clusters
from pipeline.report.filtering import rule_examples
from pipeline.report.render import md_code, md_fence
from pipeline.report.sampling import sampling, stage_order, window_collisions

XSS = '<script>alert("pwned")</script> rename this'
TICKS = "x = '````'  # four backticks"
PIPE_PATH = "src/a|b.py"


def _code(tag: str, n: int) -> list[str]:
    return [
        f"    value_{tag}_{k} = compute_{tag}(alpha_{k}, beta_{k}, gamma={k})" for k in range(n)
    ]


def _row(repo, path, before, after, comment, reviewer="dev", pr="1", day=1) -> dict:
    return {
        "repo": repo,
        "pr": pr,
        "file": path,
        "code_before": before,
        "code_after": after,
        "review_comment": comment,
        "reviewer": reviewer,
        "created": f"2024-01-{day:02d}T00:00:00Z",
    }


def corpus() -> list[dict]:
    rows = []
    for i in range(7):  # lock_file: 7 dropped, 5 shown; one of them also by a bot
        rows.append(
            _row(
                "o/app",
                f"crate{i}/Cargo.lock",
                f'version = "1.{i}.0"',
                f'version = "1.{i}.1"',
                f"lock update number {i} for the crate",
                reviewer="renovate[bot]" if i == 0 else "dev",
            )
        )
    for i in range(3):  # bot_author: 3 dropped, 4 matched (the bot lock file)
        rows.append(
            _row(
                "o/app",
                PIPE_PATH if i == 0 else f"src/bot{i}.py",
                TICKS if i == 0 else f"a = {i}",
                f"a = {i + 1}",
                XSS if i == 0 else f"please rename variable {i} for clarity",
                reviewer="helper[bot]",
            )
        )
    rows.append(_row("o/app", "src/same.py", "x = 1", "x = 1", "no change needed here"))
    base = _code("clu", 30)  # a six-item cluster, members one line apart from the keeper
    after = [*base[:-1], base[-1] + "  # fixed"]
    for v in range(6):
        b = list(base)
        if v:
            b[5 * v] = f"    other_{v} = unrelated_call({v}, {v * 7})"
        a = [*b[:-1], after[-1]]
        note = "the keeper: the longest comment of all the cluster members" if v == 0 else "fix"
        rows.append(
            _row("o/dup", PIPE_PATH if v == 0 else f"src/c{v}.py", "\n".join(b), "\n".join(a), note)
        )
    for k, tag in ((1, "p1"), (2, "p2"), (3, "p3")):  # pairs k lines apart
        b = _code(tag, 20)
        a = [*b[:-1], b[-1] + "  # done"]
        b2, a2 = list(b), list(a)
        for j in range(k):
            b2[3 + 5 * j] = a2[3 + 5 * j] = f"    changed_{tag}_{j} = elsewhere({j})"
        rows.append(_row("o/pairs", f"src/{tag}a.py", "\n".join(b), "\n".join(a), "add a note"))
        rows.append(_row("o/pairs", f"src/{tag}b.py", "\n".join(b2), "\n".join(a2), "add a note"))
    for i in range(30):  # one shape group (digit-only) of 30 in one repo
        rows.append(
            _row(
                "o/hooks",
                ".pre-commit-config.yaml",
                f"    rev: v{i}.{i * 3}.{i + 7}",
                f"    rev: v{i}.{i * 3 + 1}.{i + 7}",
                f"there is a newer release of hook {i}, please move to it",
                pr=str(100 + i),
            )
        )
    return rows


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The corpus through every stage with policy = spread; the report written by `run`."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    root = tmp_path_factory.mktemp("why")
    (root / "edits.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus()))
    (root / "editcurate.toml").write_text(
        '[run]\nname = "why"\nroot = "runs"\n\n[shapes]\npolicy = "spread"\n\n'
        '[[ingest.sources]]\nname = "edits"\nkind = "table"\nformat = "jsonl"\n'
        'path = "edits.jsonl"\n[ingest.sources.fields]\nrepo = "repo"\nchange = "pr"\n'
        'path = "file"\nbefore = "code_before"\nafter = "code_after"\n'
        'comment = "review_comment"\nauthor = "reviewer"\ncreated_at = "created"\n'
    )
    res = CliRunner().invoke(app, ["run", "--config", str(root / "editcurate.toml")])
    assert res.exit_code == 0, res.output
    return root / "runs" / "why"


def _fig(run: Path) -> dict:
    return json.loads((run / "report" / "report.json").read_text())


def _out(run: Path, name: str) -> str:
    return (run / "report" / name).read_text()


def test_each_drop_rule_has_its_count_and_up_to_five_examples_by_id(run):
    rej = pl.read_parquet(run / "filter" / "rejected.parquet")
    rules = {x["rule"]: x for x in _fig(run)["filter"]["rules"]}
    assert set(rules) == set(rej["rule"])
    for rule, x in rules.items():
        mine = rej.filter(pl.col("rule") == rule).sort("id")
        assert x["dropped"] == mine.height
        assert [e["id"] for e in x["examples"]] == mine["id"].head(5).to_list()
        assert all(e["reason"] and e["path"] is not None and e["diff"] for e in x["examples"])
    assert rules["lock_file"]["dropped"] == 7 and len(rules["lock_file"]["examples"]) == 5
    assert rules["bot_author"]["dropped"] == 3 and rules["bot_author"]["matched"] == 4
    assert rules["noop"]["dropped"] == 1
    md = _out(run, "report.md")
    assert "### Rule `lock_file`: 7 dropped" in md
    sec = md[md.index("## 2. Filter drop rules") : md.index("## 3. Distributions")]
    assert sec.count("Reason: path matches") == 5


def test_rule_examples_do_not_depend_on_row_order():
    df = pl.DataFrame(
        {
            "id": [f"{k:02d}" for k in range(12)],
            "repo": ["o/r"] * 12,
            "path": ["a.py"] * 12,
            "before": ["x"] * 12,
            "after": ["y"] * 12,
            "comment": ["c"] * 12,
            "rule": ["a"] * 9 + ["b"] * 3,
            "reason": ["why"] * 12,
            "rules": [["a"]] * 8 + [["a", "b"]] + [["b"]] * 3,
        }
    )
    one = rule_examples(df)
    two = rule_examples(df.reverse())
    assert one == two
    assert rule_examples(iter([df[:5], df[5:6], df[6:]])) == one  # counted a batch at a time
    assert [(x["rule"], x["dropped"], x["matched"]) for x in one] == [("a", 9, 9), ("b", 3, 4)]
    assert [e["id"] for e in one[0]["examples"]] == ["00", "01", "02", "03", "04"]


def test_borderline_pairs_on_both_sides_of_the_threshold():
    edges = pl.DataFrame(
        {
            "a": list("abcdefg"),
            "b": list("hijklmn"),
            "est_j": [0.5, 0.7, 0.79, 0.8, 0.81, 0.95, 1.0],
            "exact_j": [0.55, 0.72, 0.799, 0.8, 0.83, 0.97, 1.0],
        }
    )
    below, above = borderline(edges, 0.8, n=2)
    assert below["exact_j"].to_list() == [0.799, 0.72]  # nearest first
    assert above["exact_j"].to_list() == [0.8, 0.83]  # at the threshold counts as above


def test_report_shows_borderline_pairs_from_both_sides(run):
    x = _fig(run)["dedup"]
    t = x["threshold"]
    edges = pl.read_parquet(run / "dedup" / "edges.parquet")
    above, below = x["borderline_above"], x["borderline_below"]
    assert above and below
    assert all(p["exact_j"] >= t for p in above) and all(p["exact_j"] < t for p in below)
    want_above = edges.filter(pl.col("exact_j") >= t).sort("exact_j")["exact_j"].head(5)
    want_below = edges.filter(pl.col("exact_j") < t).sort("exact_j", descending=True)
    assert [p["exact_j"] for p in above] == [round(j, 4) for j in want_above]
    assert [p["exact_j"] for p in below] == [round(j, 4) for j in want_below["exact_j"].head(5)]
    for p in above + below:  # both items, each with a before/after
        assert p["a"]["diff"].startswith("--- before") and p["b"]["diff"].startswith("--- before")
    md = _out(run, "report.md")
    assert "#### Just above the threshold" in md and "#### Just below the threshold" in md


def test_largest_clusters_list_members_with_their_jaccard_to_the_keeper(run):
    x = _fig(run)["dedup"]
    clusters = pl.read_parquet(run / "dedup" / "clusters.parquet")
    top = x["largest"][0]
    assert top["size"] == 6 and len(top["members"]) == 6
    assert top["members"][0]["is_keeper"] and top["members"][0]["path"] == PIPE_PATH
    j = dict(zip(clusters["id"], clusters["j_to_keeper"], strict=True))
    for m in top["members"]:
        assert m["j"] == round(j[m["id"]], 4)
        assert m["diff"].startswith("--- before")
    assert [m["j"] for m in top["members"][1:]] == sorted(
        (m["j"] for m in top["members"][1:]), reverse=True
    )
    md = _out(run, "report.md")
    row = next(ln for ln in md.splitlines() if ln.startswith("| keeper |") and "a\\|b" in ln)
    assert len(re.findall(r"(?<!\\)\|", row)) == 6  # five cells: the path's | is escaped


def test_largest_clusters_show_the_component_when_clusters_have_one():
    df = pl.DataFrame(
        {
            "id": ["k1", "m1", "m2", "k2", "m3"],
            "cluster_id": [0, 0, 0, 1, 1],
            "size": [3, 3, 3, 2, 2],
            "is_keeper": [True, False, False, True, False],
            "keeper_id": ["k1", "k1", "k1", "k2", "k2"],
            "j_to_keeper": [1.0, 0.85, 0.9, 1.0, 0.82],
            "kind": ["keeper", "near", "near", "keeper", "near"],
            "exact_of": ["k1", "m1", "m2", "k2", "m3"],
        }
    )
    plain = largest_clusters(df, n=1, members=2)
    assert plain[0]["component_id"] is None
    assert [m["id"] for m in plain[0]["members"]] == ["k1", "m2"] and plain[0]["shown"] == 2
    comp = largest_clusters(df.with_columns(component_id=pl.lit(7, pl.Int64)))
    assert [c["component_id"] for c in comp] == [7, 7]


def test_spread_row_counts_the_windows_of_the_stage_order(run):
    s = _fig(run)["sampling"]
    spread = next(q for q in s["policies"] if q["policy"] == "spread")
    kept = pl.read_parquet(run / "shapes" / "kept.parquet", columns=["id", "batch_order"])
    shp = pl.read_parquet(run / "shapes" / "shapes.parquet")
    grp = shp.filter(pl.col("scope") == s["scope"]).select("id", "group_id").unique("id")
    order = kept.join(grp, on="id", how="left").sort("batch_order")
    w = spread["batch"]
    groups = [
        g if g is not None else f"solo:{i}"
        for i, g in zip(order["id"], order["group_id"], strict=True)
    ]
    want = sum(
        len(set(groups[k : k + w])) < len(groups[k : k + w]) for k in range(0, len(groups), w)
    )
    assert spread["batches_with_shape_twins"] == want
    assert want >= 1  # 30 items of one group over fewer windows than that must collide
    assert spread["order"] == "shapes/kept.parquet batch_order"
    md = _out(run, "report.md")
    assert re.search(rf"\| spread \| .*\| {want} \| window {w} ", md)


def test_spread_uses_the_window_the_manifest_records_and_never_invents_an_order():
    items = pl.DataFrame(
        {
            "id": [f"i{k}" for k in range(8)],
            "language": ["python"] * 8,
            "repo": ["o/a"] * 8,
            "author_is_bot": [False] * 8,
        }
    )
    shp = pl.DataFrame({"id": [f"i{k}" for k in range(8)], "scope": ["repo"] * 8})
    shp = shp.with_columns(group_id=pl.Series([0, 0, 0, 0, 1, 2, 3, 4]))
    order = pl.DataFrame(
        {"id": [f"i{k}" for k in range(8)], "batch_order": [0, 2, 4, 6, 1, 3, 5, 7]}
    )
    stage = {
        "policy": "spread",
        "order": order,
        "window": 2,
        "window_note": "test",
        "scope": "repo",
    }
    q = {p["policy"]: p for p in sampling(shp, items, batch=4, stage=stage)["policies"]}
    assert q["spread"]["batch"] == 2 and q["spread"]["batches"] == 4
    assert q["spread"]["batches_with_shape_twins"] == 0  # group 0 at 0, 2, 4, 6: one per window
    stage["window"] = 4
    q = {p["policy"]: p for p in sampling(shp, items, batch=4, stage=stage)["policies"]}
    assert q["spread"]["batches_with_shape_twins"] == 2
    assert window_collisions(order.with_columns(group_id=shp["group_id"]), 8) == 1
    none = {"policy": "annotate", "order": None}
    q = {p["policy"]: p for p in sampling(shp, items, stage=none)["policies"]}
    assert q["spread"]["batches_with_shape_twins"] is None
    assert q["spread"]["note"].startswith("not run; rerun shapes with policy = spread")


def test_stage_order_reads_the_window_from_the_shapes_manifest(tmp_path):
    (tmp_path / "shapes").mkdir()
    pl.DataFrame({"id": ["a"], "batch_order": [0]}).write_parquet(
        tmp_path / "shapes" / "kept.parquet"
    )
    m = {"stage": "shapes", "policy": "spread", "scope": "repo", "shapes_config": {"window": 8}}
    (tmp_path / "shapes" / "manifest.json").write_text(json.dumps(m))
    st = stage_order(tmp_path, batch=16)
    assert st["window"] == 8 and st["order"].collect()["id"].to_list() == ["a"]
    m.pop("shapes_config")
    (tmp_path / "shapes" / "manifest.json").write_text(json.dumps(m))
    st = stage_order(tmp_path, batch=16)
    assert st["window"] == 16 and "not recorded" in st["window_note"]
    assert stage_order(tmp_path, batch=16, window=4)["window"] == 4  # the config's shapes.window


def test_no_absolute_path_in_any_output(run):
    roots = {str(run.resolve()), str(run.parent.resolve()), str(Path.cwd())}
    for name in ("report.md", "report.html", "report.json"):
        text = _out(run, name)
        for r in roots:
            assert r not in text, f"{name} names {r}"
        assert not re.search(r"""[\s"'`(>](/tmp|/work|/home|/root)/""", text), name


def test_item_text_is_escaped_in_html_and_fenced_in_markdown(run):
    html = _out(run, "report.html")
    assert "<script>" not in html
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in html
    md = _out(run, "report.md")
    assert "<script>" not in md and r"\<script\>" in md
    lines = md[: md.index(TICKS)].splitlines()[-6:]
    opener = next(ln for ln in reversed(lines) if ln.startswith("``"))
    assert opener.startswith("`````diff")  # longer than the four backticks in the text


def test_markdown_code_cannot_be_closed_by_the_text():
    assert md_code("a ``` b") == "````a ``` b````"
    assert md_code("`x`") == "`` `x` ``"
    assert md_fence("```\nrm -rf /\n```", "sh").startswith("````sh\n")
    assert md_fence("plain").startswith("```\n")


def test_html_environment_autoescapes_every_template():
    env = R._env(True)
    assert env.autoescape is True
    assert "&lt;script&gt;" in env.from_string("{{ x }}").render(x="<script>")


def test_table_of_contents_links_every_section(run):
    md, html = _out(run, "report.md"), _out(run, "report.html")
    toc = _fig(run)["toc"]
    assert [s["id"] for s in toc][:2] == ["header", "filter"]
    for s in toc:
        for sid in [s["id"], *(x["id"] for x in s["sub"])]:
            assert f"](#{sid})" in md and f'<a id="{sid}"></a>' in md
            assert f'href="#{sid}"' in html and f'id="{sid}"' in html
    assert md.index("## Contents") < md.index("## 1. Header and funnel")


def test_each_removed_item_is_shown_beside_its_keeper(run):
    """Borderline pairs label each item keeper, removed or kept; a removed item whose keeper
    is not the other item of the pair carries its keeper's text (once per pair). The largest
    clusters show the keeper first and label every other member removed."""
    x = _fig(run)["dedup"]
    rem = pl.read_parquet(run / "dedup" / "removed.parquet")
    keeper_of = dict(zip(rem["id"], rem["keeper_id"], strict=True))
    kept = set(pl.read_parquet(run / "dedup" / "kept.parquet")["id"])
    md, html = _out(run, "report.md"), _out(run, "report.html")
    with_keeper = 0
    for p in x["borderline_above"] + x["borderline_below"] + x["other_change"]:
        for me, other in ((p["a"], p["b"]), (p["b"], p["a"])):
            if me["id"] in kept:
                assert me["role"] in ("keeper", "kept") and "keeper" not in me
                continue
            assert me["role"] == "removed" and me["label"].startswith("Removed: near duplicate")
            k = keeper_of[me["id"]]
            if k == other["id"]:
                assert "the other item of this pair" in me["label"] and "keeper" not in me
                continue
            assert me["keeper_id"] == k and k in me["label"]
            if me.get("keeper_above"):
                assert other["keeper"]["id"] == k
            else:
                with_keeper += 1
                assert me["keeper"]["id"] == k and me["keeper"]["diff"].startswith("--- before")
                assert f"Its keeper `{k}`: `{me['keeper']['repo']}`" in md
    assert with_keeper >= 1  # the six-item cluster's members pair with each other
    assert "Its keeper <code>" in html and '<div class="pair">' in html
    top = x["largest"][0]["members"]
    assert top[0]["label"] == "Keeper (kept)"
    assert [m["label"].split(":")[0] for m in top[1:]] == [f"Removed {k}" for k in range(1, 6)]
    assert "**Removed 1: near duplicate of the keeper, J " in md


def test_kept_sample_escapes_item_text(tmp_path_factory):
    """A kept item whose comment holds <script> and ESC (a rules file that keeps everything,
    so control_chars does not drop it) is written escaped in the kept sample: no raw ESC,
    no live tag in HTML or Markdown."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    root = tmp_path_factory.mktemp("kept")
    evil = '<script>alert("x")</script> \x1b[31mred\x1b[0m and a | pipe'
    rows = [
        {"repo": "o/r", "change": str(k), "path": f"src/m{k}.py", "before": f"a = {k}\n"}
        | {"after": f"a = {k + 1}\n", "comment": evil if k == 0 else f"bump a in module {k}"}
        for k in range(6)
    ]
    (root / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "keep.yaml").write_text("name: keep-all\nrules: []\n")
    (root / "c.toml").write_text(
        '[run]\nname = "k"\nroot = "runs"\n[filter]\nrules = "keep.yaml"\n'
        '[[ingest.sources]]\nname = "t"\nkind = "table"\npath = "items.jsonl"\n'
    )
    res = CliRunner().invoke(app, ["run", "--config", str(root / "c.toml")])
    assert res.exit_code == 0, res.output
    run = root / "runs" / "k"
    fig = _fig(run)["kept"]
    assert len(fig["items"]) == 6  # all of them: fewer than the sample size
    (mine,) = [m for m in fig["items"] if m["path"] == "src/m0.py"]
    assert mine["comment"] == " ".join(evil.split())  # the data as it is, in report.json
    md, html = _out(run, "report.md"), _out(run, "report.html")
    for text in (md, html):
        assert "\x1b" not in text and "<script>" not in text
    sec = md[md.index("## 9. Kept sample") : md.index("## 10. Smoke train")]
    assert r'\<script\>alert("x")\</script\> \x1b\[31mred\x1b\[0m and a \| pipe' in sec
    h = html[html.index('id="kept"') : html.index('id="smoke"')]
    assert r"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; \x1b[31mred\x1b[0m" in h

"""The sampling report: built from the sample run, checked against the run's own Parquet."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.report import report as R

ROOT = Path(__file__).resolve().parents[1]
SPLITS = ("train", "validation", "test")
CONFIG = ROOT / "data" / "sample" / "editcurate.toml"
HEADINGS = [
    "## 1. Header and funnel",
    "## 2. Filter drop rules",
    "## 3. Distributions",
    "## 4. Dedup",
    "## 5. Shapes",
    "## 6. Sampling options",
    "## 7. Recommendation",
    "## 8. Splits",
    "## 9. Kept sample",
    "## 10. Smoke train",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The sample corpus through every stage, tune, and the report `run` writes at the end."""
    from typer.testing import CliRunner

    from pipeline.cli import app

    root = tmp_path_factory.mktemp("runs")
    runner = CliRunner()
    for args in (
        ["run", "--config", str(CONFIG), "--set", f"run.root={json.dumps(str(root))}"],
        ["tune", str(root / "sample")],
        ["report", str(root / "sample")],
    ):
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
    return root / "sample"


def _json(run: Path) -> dict:
    return json.loads((run / "report" / "report.json").read_text())


def test_every_section_is_present_in_md_html_and_json(run):
    md = (run / "report" / "report.md").read_text()
    html = (run / "report" / "report.html").read_text()
    pos = [md.index(h) for h in HEADINGS]
    assert pos == sorted(pos)
    for sid in (
        "header",
        "funnel",
        "filter",
        "distributions",
        "dedup",
        "shapes",
        "sampling",
        "recommendation",
        "splits",
        "kept",
        "smoke",
    ):
        assert f'id="{sid}"' in html
    assert set(_json(run)["sections"]) <= set(_json(run))
    assert "Conservation verified" in md
    assert "smoke stage not run" in md
    assert r"`\w+|[^\w\s]`" in md  # says which tokenizer counted tokens


def test_split_table_matches_the_export_outputs(run):
    x = _json(run)["splits"]
    assert x["present"] and x["cross_split_groups"] == 0
    for row in x["rows"]:
        assert row["items"] == pl.read_parquet(run / "export" / f"{row['split']}.parquet").height
    assert sum(r["items"] for r in x["rows"]) == pl.read_parquet(run / "shapes/kept.parquet").height


def test_funnel_matches_the_parquet_outputs(run):
    f = _json(run)["funnel"]
    stages = {s["stage"]: s for s in f["stages"]}
    rows = lambda p: pl.read_parquet(run / p).height  # noqa: E731
    assert stages["ingest"]["out"] == rows("ingest/items.parquet")
    assert stages["ingest"]["removed"] == rows("ingest/errors.parquet")
    assert stages["filter"]["in"] == rows("ingest/items.parquet")
    assert stages["filter"]["out"] == rows("filter/kept.parquet")
    assert stages["dedup"]["out"] == rows("dedup/kept.parquet")
    assert stages["dedup"]["removed"] == rows("dedup/removed.parquet")
    reasons = {(r["stage"], r["reason"]): r["items"] for r in f["reasons"]}
    rej = pl.read_parquet(run / "filter/rejected.parquet")["rule"].value_counts()
    for rule, n in rej.iter_rows():
        assert reasons[("filter", f"rule {rule}")] == n
    errs = pl.read_parquet(run / "ingest/errors.parquet")
    for (sev, reason), g in errs.group_by("severity", "reason"):
        assert reasons[("ingest", f"{sev}: {reason.split(':')[0]}")] == g.height
    near = pl.read_parquet(run / "dedup/removed.parquet").filter(pl.col("kind") == "near")
    assert reasons.get(("dedup", "near-duplicate"), 0) == near.height
    assert f["conservation"]["ok"] and not f["conservation"]["problems"]


def test_distributions_match_the_kept_items(run):
    d = _json(run)["distributions"]
    kept = pl.read_parquet(run / "dedup/kept.parquet")
    assert d["items"] == kept.height
    tokens = [
        len(
            re.findall(
                r"\w+|[^\w\s]", "\n".join([r["comment"], r["before"], r["after"], r["context"]])
            )
        )
        for r in kept.iter_rows(named=True)
    ]
    assert d["tokens"]["median"] == float(np.median(tokens))
    assert d["tokens"]["max"] == max(tokens)
    assert d["comment_chars"]["max"] == max(len(c) for c in kept["comment"])
    langs = {r["value"]: r["items"] for r in d["by_language"] if r["value"] != "(other)"}
    counts = dict(kept["language"].value_counts().iter_rows())
    assert all(counts[k] == v for k, v in langs.items())
    assert sum(r["items"] for r in d["by_language"]) == kept.height
    assert sum(r["items"] for r in d["bot_vs_human"]) == kept.height


def test_dedup_section_matches_clusters_and_edges(run):
    x = _json(run)["dedup"]
    clusters = pl.read_parquet(run / "dedup/clusters.parquet")
    edges = pl.read_parquet(run / "dedup/edges.parquet")
    sizes = clusters.group_by("cluster_id").agg(pl.col("size").first())
    sizes = sizes.filter(pl.col("size") > 1)  # a keeper alone in its star is no cluster
    manifest = json.loads((run / "dedup/manifest.json").read_text())
    assert x["clusters"] == sizes.height == manifest["counts"]["clusters"]
    assert sum(c["clusters"] for c in x["cluster_sizes"]) == sizes.height
    assert x["edges"] == edges.height
    same = pl.col("change_j") >= manifest["dedup_config"]["change_threshold"]
    at = pl.col("exact_j") >= x["threshold"]
    assert x["edges_at_threshold"] == edges.filter(same & at).height
    assert x["edges_other_change"] == edges.filter(~same & at).height
    assert x["edges"] == x["edges_at_threshold"] + x["edges_other_change"] + x["edges_below"]
    assert len(x["largest"]) == min(5, sizes.height)
    for c in x["largest"]:
        assert len(c["members"]) == min(8, c["size"])
        assert c["members"][0]["is_keeper"] and c["members"][0]["j"] == 1.0
    assert x["tune"] and x["tune"][0]["threshold"] == 0.5  # tune/sweep.csv was read
    below = edges.filter(same & ~at).sort("exact_j", descending=True)
    assert [b["exact_j"] for b in x["borderline_below"]] == [
        round(j, 4) for j in below["exact_j"].head(5)
    ]


def test_shapes_and_sampling_match_shapes_parquet(run):
    r = _json(run)
    shp = pl.read_parquet(run / "shapes/shapes.parquet")
    kept = pl.read_parquet(run / "dedup/kept.parquet")
    for p in r["shapes"]["per_scope"]:
        s = shp.filter(pl.col("scope") == p["scope"])
        assert p["items_sharing"] == s.filter(pl.col("group_size") > 1).height
        assert p["digit_only_items"] == s["digit_only"].sum()
    pol = {q["policy"]: q for q in r["sampling"]["policies"]}
    repo = shp.filter(pl.col("scope") == "repo")
    assert pol["no shape dedup"]["items"] == kept.height
    assert pol["spread"]["items"] == kept.height
    # the sample runs shapes with policy = annotate: spread has no order to count, and says so
    assert pol["spread"]["batches_with_shape_twins"] is None
    assert "not run; rerun shapes with policy = spread" in pol["spread"]["note"]
    assert not r["sampling"]["spread_ran"]
    assert pol["cap k=1"]["items"] == repo["group_id"].n_unique()
    for k in (2, 4):
        want = repo.group_by("group_id").len()["len"].clip(upper_bound=k).sum()
        assert pol[f"cap k={k}"]["items"] == want


def test_sections_4_and_5_say_when_the_shapes_stage_has_not_run(run, tmp_path):
    copy = tmp_path / "noshapes"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("shapes", "report"))
    R.write_report(copy)
    md = (copy / "report" / "report.md").read_text()
    shapes_part = md[md.index(HEADINGS[4]) : md.index(HEADINGS[6])]
    assert shapes_part.count("shapes stage not run") == 2
    assert _json(copy)["sampling"] == {"present": False, "note": "shapes stage not run"}


def test_html_is_one_file_with_embedded_plots_and_no_network(run):
    html = (run / "report" / "report.html").read_text()
    srcs = re.findall(r'src="([^"]*)"', html)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert len(srcs) == len(list((run / "report" / "plots").glob("*.png")))
    assert not re.search(r"(src|href)=\"(https?:)?//", html)


def test_html_escapes_item_text():
    t = R._env(True).get_template("report.html.j2")
    assert t.environment.autoescape is not False
    out = R._env(True).from_string("{{ x }}").render(x="<script>alert(1)</script>")
    assert "<script>" not in out


def test_sampling_policies_and_batch_collisions_on_known_groups():
    items = pl.DataFrame(
        {
            "id": [f"i{k}" for k in range(8)],
            "language": ["python"] * 6 + ["go"] * 2,
            "repo": ["o/a"] * 8,
            "author_is_bot": [False] * 7 + [True],
        }
    )
    shp = pl.DataFrame(
        {
            "id": [f"i{k}" for k in range(6)],
            "scope": ["repo"] * 6,
            "group_id": [0, 0, 0, 0, 1, 1],
        }
    )
    s = R.sampling(shp, items, batch=4, seed=3)
    pol = {q["policy"]: q for q in s["policies"]}
    assert [pol[p]["items"] for p in ("no shape dedup", "cap k=1", "cap k=2", "cap k=4")] == [
        8,
        4,
        6,
        8,
    ]
    assert pol["cap k=1"]["language_kept"]["python"] == pytest.approx(100 * 2 / 6, abs=0.01)
    assert pol["spread"]["batches_with_shape_twins"] is None  # no stage order: never invented
    assert R._collisions(np.array(["a", "b", "a", "c", "d"]), 2) == 0
    assert R._collisions(np.array(["a", "a", "b", "c", "d"]), 2) == 1


def test_report_without_a_finished_run_is_one_clear_error(tmp_path):
    from typer.testing import CliRunner

    from pipeline.cli import app

    res = CliRunner().invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2
    assert "no ingest output" in res.output


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if p := shutil.which(name):
            return p
    if os.environ.get("CI") and os.geteuid() == 0:
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-q"], env=env, check=False, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"],
            env=env,
            check=False,
            capture_output=True,
        )
        if p := shutil.which("chromium"):
            return p
    pytest.skip(
        "headless screenshot check skipped: no chromium (install the Debian package "
        "`chromium`; the test installs it itself only when root and CI is set)"
    )


def screenshot(html: Path, png: Path, browser: str, tmp: Path) -> None:
    """Render `html` with headless Chromium to `png` (1280 x 4000), networking off."""
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp}",
            f"--screenshot={png}",
            "--window-size=1280,4000",
            html.resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )


def test_report_html_renders_headless_to_a_non_blank_png(run, tmp_path):
    import matplotlib.image as mpimg

    browser = _chromium()
    png = tmp_path / "report.png"
    screenshot(run / "report" / "report.html", png, browser, tmp_path / "profile")
    img = mpimg.imread(png)[..., :3]
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    ink = (img.mean(axis=2) < 0.9).mean()
    assert ink > 0.02, f"screenshot is nearly blank ({ink:.3%} non-white pixels)"
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50  # text and plots, not a flat fill


def test_html_diffs_keep_one_line_per_diff_line(run):
    html = (run / "report" / "report.html").read_text()
    pre = re.search(r'<pre class="diff">(.*?)</pre>', html, re.S).group(1)
    assert pre.count("\n") >= 3  # ---, +++, @@ and the changed lines each on their own line


def test_an_unknown_shape_scope_is_one_clear_error(run):
    with pytest.raises(R.ReportFailed, match="no shape scope 'file'"):
        R.build(run, scope="file")


def test_the_funnel_ends_at_export_with_every_item_in_a_split(run):
    f = _json(run)["funnel"]
    last = f["stages"][-1]
    m = json.loads((run / "export/manifest.json").read_text())["counts"]
    assert last["stage"] == "export" and last["in"] == m["items_in"]
    assert last["out"] == m["train"] + m["validation"] + m["test"] and last["removed"] == 0
    assert "export" in {s["stage"] for s in _json(run)["header"]["stages"]}


def test_flag_counts_match_filter_kept(run):
    """Every flag of filter/kept.parquet with the rows it marks, the exported items that carry
    it, and up to two examples (lowest ids) that carry it."""
    g = _json(run)["filter"]["flags"]
    kept = pl.read_parquet(run / "filter" / "kept.parquet")
    want: dict[str, int] = {}
    for flags in kept["flags"].to_list():
        for f in set(flags or []):
            want[f] = want.get(f, 0) + 1
    assert want  # the sample keeps flagged items
    assert {x["flag"]: x["items"] for x in g["flags"]} == want
    assert g["kept"] == kept.height
    assert g["flagged"] == kept.filter(pl.col("flags").list.len() > 0).height
    manifest = json.loads((run / "filter" / "manifest.json").read_text())
    assert g["flagged"] == manifest["counts"]["flagged"]
    exported = pl.concat(
        [pl.read_parquet(run / "export" / f"{s}.parquet", columns=["id", "flags"]) for s in SPLITS]
    )
    for x in g["flags"]:
        assert x["exported"] == exported.filter(pl.col("flags").list.contains(x["flag"])).height
        ids = sorted(set(kept.filter(pl.col("flags").list.contains(x["flag"]))["id"]))
        assert [e["id"] for e in x["examples"]] == ids[:2]
        assert all(x["flag"] in e["flags"] and e["diff"] for e in x["examples"])
    md = (run / "report" / "report.md").read_text()
    sec = md[md.index("### Flagged items (kept)") : md.index(HEADINGS[2])]
    for f, n in want.items():
        assert f"#### Flag `{f}`: {n} kept" in sec


def test_kept_sample_is_seeded_drawn_from_the_export_and_stable(run, tmp_path):
    """20 exported items, each with its split, the same on every build; another seed gives
    another sample; the order of the ids does not matter."""
    import heapq

    from pipeline.report.kept import kept_sample, pick, sample_key

    k = _json(run)["kept"]
    split_of = {}
    for s in SPLITS:
        for i in pl.read_parquet(run / "export" / f"{s}.parquet", columns=["id"])["id"]:
            split_of[i] = s
    manifest = json.loads((run / "export" / "manifest.json").read_text())
    assert k["present"] and k["seed"] == manifest["seed"] == 0
    assert k["exported"] == len(split_of) > 20 and len(k["items"]) == 20
    assert all(split_of[m["id"]] == m["split"] for m in k["items"])  # exported, right split
    assert len({m["id"] for m in k["items"]}) == 20
    assert all(m["diff"] and m["path"] is not None for m in k["items"])
    ids = sorted(split_of)
    assert [m["id"] for m in k["items"]] == pick(ids, 0, 20) == pick(ids[::-1], 0, 20)
    assert pick(ids, 0, 20) == heapq.nsmallest(20, ids, key=lambda i: sample_key(0, i))
    assert pick(ids, 1, 20) != pick(ids, 0, 20)
    again = kept_sample(run)
    assert [m["id"] for m in again["items"]] == [m["id"] for m in k["items"]]
    # read a range of ids at a time (a few ids a range here): the same sample and count
    from pipeline.report import common

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(common, "RANGE_ITEMS", 3)
        cut = kept_sample(run)
    assert cut["items"] == again["items"] and cut["exported"] == k["exported"]
    # not the first groups of the split deal (which all go to train): every split can show
    assert {m["split"] for m in kept_sample(run, n=len(ids))["items"]} == set(SPLITS)
    md = (run / "report" / "report.md").read_text()
    sec = md[md.index(HEADINGS[8]) : md.index(HEADINGS[9])]
    assert sec.count("\n#### ") == 20 and all(f"`{m['id']}`" in sec for m in k["items"])


def test_a_possible_secret_is_counted_in_the_report_but_never_shown(tmp_path):
    """Its text is kept as written (a guess is never masked): the report must not copy it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pipeline.report.filtering import flag_counts

    base = {"repo": "o/r", "change": "c", "path": "x", "before": "", "comment": "m"}
    rows = [
        {**base, "id": "a1", "flags": ["possible_secret:password_assignment"], "after": "pw"},
        {**base, "id": "b2", "flags": ["prose_file"], "after": "Read the docs."},
    ]
    (tmp_path / "filter").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "filter" / "kept.parquet")
    got = {f["flag"]: f for f in flag_counts(tmp_path)["flags"]}
    assert got["possible_secret:password_assignment"]["items"] == 1
    assert got["possible_secret:password_assignment"]["examples"] == []
    assert len(got["prose_file"]["examples"]) == 1


def test_every_example_names_its_id_and_the_why_command(run):
    """From any example in the report to `editcurate why`: filter drops, flags, dedup clusters,
    borderline pairs, shape groups and the kept sample each show the id and the command."""
    md = (run / "report" / "report.md").read_text()
    html = (run / "report" / "report.html").read_text()
    fig = _json(run)
    why = fig["header"]["why"]
    assert why.startswith("editcurate why ") and not os.path.isabs(why.split()[-1])
    examples = [m for r in fig["filter"]["rules"] for m in r["examples"]]
    examples += [m for f in fig["filter"]["flags"]["flags"] for m in f["examples"]]
    examples += [m for c in fig["dedup"]["largest"] for m in c["members"]]
    examples += [m for g in fig["shapes"]["largest"] for m in g["examples"]]
    examples += fig["kept"]["items"]
    assert len(examples) > 30
    for m in examples:
        assert f"`{why} {m['id']}`" in md, m["id"]
        assert f'<code class="why">{why} {m["id"]}</code>' in html, m["id"]


def test_per_split_tables_by_repo_source_and_language_add_up(run):
    x = _json(run)["splits"]
    items = pl.concat(
        [
            pl.read_parquet(run / "export" / f"{s}.parquet").with_columns(split=pl.lit(s))
            for s in SPLITS
        ],
        how="diagonal_relaxed",
    )
    for col in ("repo", "source", "language"):
        rows = x["by"][col]
        assert [r["value"] for r in rows].count("(other)") <= 1
        for s in SPLITS:
            assert sum(r[s] for r in rows) == items.filter(pl.col("split") == s).height
        top = rows[0]
        want = items.filter(pl.col(col) == top["value"])
        assert top["total"] == want.height and top["train"] == (want["split"] == "train").sum()
    assert (
        "| by language | train | validation | test | all |"
        in (run / "report" / "report.md").read_text()
    )


def test_a_blank_language_reads_none_and_never_an_empty_header(run, tmp_path):
    d = tmp_path / "run"
    shutil.copytree(run, d)
    for f in ("dedup/kept.parquet", "export/train.parquet"):  # files, or folders of parts
        for part in [d / f] if (d / f).is_file() else sorted((d / f).glob("*.parquet")):
            pl.read_parquet(part).with_columns(language=pl.lit("")).write_parquet(part)
    fig = R.build(d)
    assert fig["sampling"]["languages"] == ["(none)"]
    assert fig["sampling"]["policies"][0]["language_kept"] == {"(none)": 100.0}
    assert any(r["value"] == "(none)" for r in fig["splits"]["by"]["language"])
    md = R.render_md(fig)
    assert "| policy | (none) |" in md  # the language column's header
    assert "| by language | items | share % |\n|---|---:|---:|\n| (none) |" in md


def test_smoke_train_refreshes_the_report_with_its_table_plot_and_culprits(run, tmp_path):
    """smoke-train writes the report again: its measures as a table (not a JSON dump), the loss
    plot embedded, and the non-finite set it found in the recommendation, with its ids."""
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    from typer.testing import CliRunner

    from pipeline.cli import app

    d = tmp_path / "run"
    shutil.copytree(run, d)
    bad = sorted(pl.read_parquet(d / "export" / "train.parquet")["id"].to_list())[3]
    res = CliRunner().invoke(
        app,
        ["smoke-train", str(d), "--eval-items", "0", "--max-len", "256", "--fault", f"item:{bad}"],
    )
    assert res.exit_code == 1, res.output  # the fault makes it fail: over the skip budget
    assert "report: refreshed" in " ".join(res.output.split())
    fig = _json(d)
    s = fig["smoke"]
    assert s["present"] and s["verdict"] == "fails" and s["plot"] == "loss_grad.png"
    measures = {r["measure"]: r["value"] for r in s["rows"]}
    assert measures["fault injection (TEST ONLY)"] == f"item:{bad}"
    assert [c["ids"] for c in s["culprits"]] == [[bad]]
    (c,) = fig["recommendation"]["culprit_sets"]
    assert c["ids"] == [bad] and c["kept_apart_by"] == []  # one item alone: the data
    md = (d / "report" / "report.md").read_text()
    assert "![loss and gradient norm per step](plots/loss_grad.png)" in md
    assert "| measure | value |" in md and '"summary"' not in md
    html = (d / "report" / "report.html").read_text()
    assert 'alt="loss_grad.png" src="data:image/png;base64,' in html


def test_report_in_a_real_browser_has_no_error_no_request_and_every_anchor(run, tmp_path):
    """Playwright drives the system Chromium over the sample run's html report: no console
    error, nothing fetched but the file itself, every in-page anchor resolves, every image
    decodes, and the recommendation, the why commands and the flag counts are on the page."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
    browser = _chromium()
    html = (run / "report" / "report.html").resolve()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
        try:
            page = b.new_page()
            errors: list[str] = []
            urls: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: urls.append(r.url))
            page.goto(html.as_uri(), wait_until="load")
            broken = page.evaluate(
                """() => [...document.querySelectorAll('a[href]')]
                     .map(a => a.getAttribute('href'))
                     .filter(h => !h.startsWith('#') || !document.getElementById(h.slice(1)))"""
            )
            images = page.evaluate(
                "() => [...document.images].map(i => i.complete && i.naturalWidth > 0)"
            )
            ids = page.evaluate("() => [...document.querySelectorAll('[id]')].map(e => e.id)")
            rec = page.inner_text("#recommendation + *")
            why = page.locator("code.why").count()
            flags = page.inner_text("#flags ~ table")  # the flag count table
        finally:
            b.close()
    assert errors == [] and urls == [html.as_uri()]
    assert broken == []  # every link is in-page and lands on an element
    assert images and all(images)
    assert len(ids) == len(set(ids))  # an anchor lands on one place
    assert rec.startswith("Train with ")
    assert why >= 20
    assert "% of kept" in flags and "prose_file" in flags


def test_count_axes_read_whole_numbers(tmp_path, monkeypatch):
    """A count is whole: no 0.5 tick on a linear axis, no 4 x 10^0 on a log one."""
    from pipeline.report import plots

    seen = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: seen.append(fig) or path.name)
    plots.hist([2, 2, 2, 3], tmp_path / "a.png", "t", "x", bins=[1.5, 2.5, 3.5], integer_x=True)
    plots.hist(
        [2] * 5 + [3], tmp_path / "b.png", "t", "x", [1.5, 2.5, 3.5], log_y=True, integer_x=True
    )
    plots.bars(["a", "b"], [1, 2], tmp_path / "c.png", "t", "items")
    for fig in seen:
        fig.canvas.draw()
        for axis in (fig.axes[0].xaxis, fig.axes[0].yaxis):
            labels = [t.get_text() for t in axis.get_ticklabels(which="both") if t.get_text()]
            numbers = [
                x for x in labels if x.replace("−", "-").lstrip("-").replace(".", "").isdigit()
            ]
            assert all(float(x.replace("−", "-")).is_integer() for x in numbers), labels
            assert not any("10^" in x or "times" in x for x in labels), labels
    assert [
        t.get_text() for t in seen[1].axes[0].yaxis.get_ticklabels(which="both") if t.get_text()
    ]


def test_ids_cut_into_ranges_each_id_in_exactly_one_in_id_order():
    from pipeline.report.common import id_ranges

    rng = np.random.default_rng(5)
    hexes = [f"{int(x):024x}" for x in rng.integers(0, 2**62, 500)] + ["f" * 24, "0" * 24]
    ids = pl.DataFrame({"id": hexes + ["", "i0", "zz", "F00"]})
    cuts = id_ranges(ids.height * 9, 100)  # about 100 items a range: 46 ranges
    assert len(cuts) == 46
    parts = [ids.filter(c)["id"].sort() for c in cuts]
    assert sum(len(p) for p in parts) == ids.height
    assert pl.concat(parts).to_list() == sorted(ids["id"].to_list())
    assert len(id_ranges(0)) == len(id_ranges(10)) == 1


def test_item_measures_in_small_batches_match_one_batch(run, monkeypatch):
    """The tallies are added up as the batches are read: a corpus far larger than a batch
    gives the figures one batch would."""
    from pipeline.report import overview
    from pipeline.report.common import ranked

    whole = overview.item_measures(run / "dedup" / "kept.parquet")
    monkeypatch.setattr(overview, "MEASURE_BATCH", 7)
    monkeypatch.setattr(overview, "TALLY_MERGE", 3)
    small = overview.item_measures(run / "dedup" / "kept.parquet")
    assert small.values.equals(whole.values)
    for col, t in whole.tallies.items():
        assert ranked(small.tallies[col], col) == ranked(t, col)
        assert small.tallies[col]["items"].sum() == whole.values.height


def test_sampling_matched_a_range_of_ids_at_a_time_equals_all_at_once(monkeypatch):
    """The policies' figures do not depend on how many id ranges the items were matched in,
    the stage's spread order included; items in no group count as groups of their own."""
    from pipeline.report import common
    from pipeline.report import sampling as S

    rng = np.random.default_rng(11)
    ids = sorted({f"{int(x):024x}" for x in rng.integers(0, 2**62, 400)})
    items = pl.DataFrame(
        {
            "id": ids,
            "language": rng.choice(["python", "go", "rust", ""], len(ids)).tolist(),
            "repo": rng.choice([f"o/r{k}" for k in range(9)], len(ids)).tolist(),
            "author_is_bot": (rng.random(len(ids)) < 0.1).tolist(),
        }
    )
    grouped = ids[: len(ids) - 30]  # the last 30 in no group: each alone
    shp = pl.DataFrame(
        {
            "id": grouped * 2,
            "scope": ["repo"] * len(grouped) + ["change"] * len(grouped),
            "group_id": rng.integers(0, 40, 2 * len(grouped)).tolist(),
        }
    )
    order = pl.DataFrame({"id": ids, "batch_order": rng.permutation(len(ids)).tolist()})
    stage = {"policy": "spread", "order": order, "window": 8, "window_note": "t", "scope": "repo"}
    whole = S.sampling(shp.lazy(), items.lazy(), batch=8, seed=2, stage=stage)
    monkeypatch.setattr(common, "RANGE_ITEMS", 17)
    cut = S.sampling(shp.lazy(), items.lazy(), batch=8, seed=2, stage=stage)
    assert cut == whole
    pol = {p["policy"]: p for p in whole["policies"]}
    assert pol["cap k=1"]["items"] == 40 + 30  # a group keeps one, each lone item itself
    assert pol["spread"]["batches_with_shape_twins"] is not None

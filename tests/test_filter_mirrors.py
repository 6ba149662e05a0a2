"""Mirror folders: a folder whose files copy another folder's is dropped, the source kept.

The copy is found from history alone (no folder name is special): the two folders are edited
in the same commits, file by file alike. What only looks like a mirror stays: hand-written
parallel folders edited together but differently, tests named like the modules they test,
packages whose manifests are bumped together in releases, and a copy too young to tell.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pyarrow.parquet as pq

from pipeline.filter.apply import apply_rules
from pipeline.filter.mirrors import find_mirrors
from pipeline.filter.rules import RULES_DIR, load_rules
from tests.conftest import toml_config
from tests.test_filter import _fake_ingest, assert_vectorised_is_the_reference, frame, item

DEFAULT = load_rules(RULES_DIR / "default.yaml")
T0 = datetime(2021, 3, 1, tzinfo=timezone.utc)
MODULES = [
    "types.ts",
    "parser.ts",
    "errors.ts",
    "helpers/util.ts",
    "helpers/parseUtil.ts",
    "index.ts",
]


def _params():
    return next(r.params for r in DEFAULT.rules if r.name == "mirror_copy")


def _edit(k: int, deno: bool = False) -> tuple[str, str]:
    """The k-th commit's hunk in a module; the deno copy spells the import it adds with .ts."""
    before = f"export const limit{k} = {k};\nexport const floor{k} = 0;\nlet cache{k};"
    ext = ".ts" if deno else ""
    after = (
        f"export const limit{k} = {k + 1};\nexport const floor{k} = 1;\nlet cache{k} = new Map();\n"
        f'import {{ util{k} }} from "./helpers/util{ext}";'
    )
    return before, after


def _history(repo: str = "acme/schemakit", commits: int = 14, copy_from: int = 2) -> list[dict]:
    """src/ edited in every commit; deno/lib/ (made by a build script from commit `copy_from`
    on) edited alike in most of them, and caught up alone in a rebuild commit now and then."""
    rows = []
    for k in range(commits):
        when = T0 + timedelta(days=k)
        for i, name in enumerate(MODULES):
            if (k + i) % 2:
                continue
            b, a = _edit(k)
            rows.append(
                item(
                    repo=repo,
                    change=f"c{k}",
                    path=f"src/{name}",
                    before=b,
                    after=a,
                    language="typescript",
                    comment=f"Tighten limit {k}",
                    created_at=when,
                    source_ref=f"{repo}:{k}:src/{name}",
                )
            )
            if k >= copy_from and k % 5 != 4:
                b, a = _edit(k, deno=True)
                rows.append(
                    item(
                        repo=repo,
                        change=f"c{k}",
                        path=f"deno/lib/{name}",
                        before=b,
                        after=a,
                        language="typescript",
                        comment=f"Tighten limit {k}",
                        created_at=when,
                        source_ref=f"{repo}:{k}:deno/{name}",
                    )
                )
        if k >= copy_from and k % 5 == 4:  # a rebuild: the copy alone
            rows.append(
                item(
                    repo=repo,
                    change=f"r{k}",
                    path="deno/lib/types.ts",
                    before="// old build",
                    after=f"export const built = {k};",
                    language="typescript",
                    comment="rebuilt deno",
                    created_at=when,
                    source_ref=f"{repo}:{k}:rebuild",
                )
            )
    return rows


def _parallel(repo: str) -> list[dict]:
    """Two hand-written API folders (classic/ and mini/) with the same file names, edited in
    the same commits but each in its own way."""
    rows = []
    for k in range(14):
        for name in MODULES:
            for folder, style in (("classic", "method"), ("mini", "function")):
                rows.append(
                    item(
                        repo=repo,
                        change=f"p{k}",
                        path=f"src/{folder}/{name}",
                        before=f"// {style} {k}\n",
                        after=f"export {style} {folder}{k}_{name[:3]}(x) {{ return x; }}",
                        language="typescript",
                        comment=f"Add check {k}",
                        created_at=T0 + timedelta(days=k),
                        source_ref=f"{repo}:{k}:{folder}/{name}",
                    )
                )
    return rows


def _mirrors(rows):
    return find_mirrors(frame(rows).lazy(), _params())


def test_a_build_copy_is_found_with_its_source_and_counts():
    (m,) = _mirrors(_history())
    assert (m.repo, m.folder, m.source) == ("acme/schemakit", "deno/lib", "src")
    assert m.reason().startswith("deno/lib/ mirrors src/: ")
    assert m.alike == 1.0 and m.files == len(MODULES)


def test_parallel_hand_written_folders_and_tests_named_like_modules_are_not_mirrors():
    assert _mirrors(_parallel("acme/api")) == ()
    rows = []
    for k in range(14):  # lib/x.js and test/unit/x.js: edited together, never alike
        for name in ("core.js", "utils.js", "headers.js", "cancel.js", "auth.js"):
            rows.append(
                item(
                    repo="acme/fetchy",
                    change=f"t{k}",
                    path=f"lib/{name}",
                    before=f"var a{k} = 1;",
                    after=f"var a{k} = 2;",
                    language="javascript",
                    source_ref=f"{k}lib{name}",
                )
            )
            rows.append(
                item(
                    repo="acme/fetchy",
                    change=f"t{k}",
                    path=f"test/unit/{name}",
                    before=f"it('works {k}');",
                    after=f"it('works {k} twice');",
                    language="javascript",
                    source_ref=f"{k}test{name}",
                )
            )
    assert _mirrors(rows) == ()


def test_packages_bumped_together_in_releases_are_not_mirrors():
    rows = []
    for k in range(14):  # every release bumps each package's manifest and changelog alike
        for pkg in ("core", "cli"):
            for name, b, a in (
                ("package.json", f'  "version": "1.{k}.0",', f'  "version": "1.{k + 1}.0",'),
                ("CHANGELOG.md", "", f"## 1.{k + 1}.0"),
            ):
                rows.append(
                    item(
                        repo="acme/mono",
                        change=f"v{k}",
                        path=f"packages/{pkg}/{name}",
                        before=b,
                        after=a,
                        language="json",
                        source_ref=f"{k}{pkg}{name}",
                    )
                )
    assert _mirrors(rows) == ()  # two files alike, not five


def test_the_copy_is_the_folder_first_edited_later_whatever_its_share():
    """src/ loses its lone commits but the first, deno/lib/ gains rebuilds of its own: by
    share, src/ would now look like the copy; it was edited first, so it is the source."""
    rows = [
        r
        for r in _history()
        if not (r["path"].startswith("src/") and r["change"] in ("c1", "c4", "c9"))
    ]
    rows += [
        item(
            repo="acme/schemakit",
            change=f"rb{k}",
            path="deno/lib/index.ts",
            before="",
            after=f"export * from './v{k}.ts';",
            language="typescript",
            comment="rebuilt deno",
            created_at=T0 + timedelta(days=20 + k),
            source_ref=f"rb{k}",
        )
        for k in range(8)
    ]
    (m,) = _mirrors(rows)
    assert m.together / m.changes < 10 / 11  # src/'s share of changes with the other is higher
    assert (m.folder, m.source) == ("deno/lib", "src")


def test_the_stage_drops_the_copy_keeps_the_source_and_lists_the_mirror(tmp_path, cli):
    cfg = toml_config(tmp_path, "")
    rows = _history() + _parallel("acme/api")
    run = tmp_path / "runs" / "t"
    _fake_ingest(run, rows)
    out = cli("filter", "--config", cfg).output
    assert "deno/lib/ mirrors src/" in out
    rej = pq.read_table(run / "filter" / "rejected.parquet").to_pylist()
    kept = pq.read_table(run / "filter" / "kept.parquet").to_pylist()
    copies = [r for r in rows if r["path"].startswith("deno/lib/")]
    assert {r["source_ref"] for r in rej if r["rule"] == "mirror_copy"} == {
        r["source_ref"] for r in copies
    }
    assert all(r["reason"].startswith("deno/lib/ mirrors src/: ") for r in rej)
    assert not any(r["path"].startswith("deno/") for r in kept)
    assert {r["source_ref"] for r in kept} >= {
        r["source_ref"] for r in rows if r["path"].startswith("src/")
    }
    m = json.loads((run / "filter" / "manifest.json").read_text())
    (listed,) = m["mirrors"]
    assert listed["items"] == len(copies) and listed["mirror"].startswith("deno/lib/ mirrors")
    assert cli("verify", run).exit_code == 0


def test_batches_see_the_mirrors_found_over_the_whole_input(tmp_path, cli):
    """One commit per batch: no batch alone shows the mirror."""
    cfg = toml_config(tmp_path, "[filter]\nbatch_size = 3\n")
    rows = _history()
    run = tmp_path / "runs" / "t"
    _fake_ingest(run, rows)
    cli("filter", "--config", cfg)
    rej = pq.read_table(run / "filter" / "rejected.parquet").to_pylist()
    assert sum(r["rule"] == "mirror_copy" for r in rej) == sum(
        r["path"].startswith("deno/lib/") for r in rows
    )


def test_vectorised_mirror_rule_agrees_with_the_per_row_reference():
    rows = _history() + _parallel("acme/api")
    rows += [
        item(repo="acme/schemakit", path="deno/library/x.ts", source_ref="near-name"),
        item(repo="other/repo", path="deno/lib/x.ts", source_ref="other-repo"),
        item(repo=None, path="deno/lib/x.ts", source_ref="no-repo"),
    ]
    mirrors = {"mirror_copy": _mirrors(rows)}
    assert mirrors["mirror_copy"]
    assert_vectorised_is_the_reference(rows, DEFAULT, found=mirrors)


def test_without_a_mirror_found_the_rule_matches_nothing():
    res = apply_rules(frame(_history()), DEFAULT)  # no mirrors given: a batch on its own
    assert res.dropped["mirror_copy"] == 0

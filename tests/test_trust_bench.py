"""bench/trust.py's six measures on a tiny fake run folder: each counts what it should."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import polars as pl
import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "trust.py"


def _load():
    spec = importlib.util.spec_from_file_location("bench_trust", BENCH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is made
    spec.loader.exec_module(mod)
    return mod


trust = _load()

ITEM = {
    "id": "",
    "source": "a",
    "repo": "r",
    "change": "",
    "path": "x.py",
    "before": "",
    "after": "",
}


def rows(*items: dict) -> pl.DataFrame:
    return pl.DataFrame([{**ITEM, **i} for i in items])


def write(root: Path, rel: str, df: pl.DataFrame) -> None:
    p = root / rel
    if rel.startswith("export/"):  # a folder of parts, as the export stage writes it
        p.mkdir(parents=True, exist_ok=True)
        p = p / "part-00000.parquet"
    p.parent.mkdir(parents=True, exist_ok=True)
    df.write_parquet(p)


BUMP1 = ('    "dep": "~1.6.3",', '    "dep": "~1.6.4",')
BUMP2 = ('    "dep": "^2.0.0",', '    "dep": "^2.1.0",')


@pytest.fixture()
def run(tmp_path: Path) -> Path:
    root = tmp_path / "run"
    long_b, long_a = "def frobnicate(x):\n    return x + 1", "def frobnicate(x):\n    return x + 2"
    other = "class Completely(Different):\n    pass"
    # dedup: k1 keeps r1 (after differs), r2 (both sides match), r3 (same_content, differs)
    write(root, "dedup/kept.parquet", rows({"id": "k1", "before": long_b, "after": long_a}))
    write(
        root,
        "dedup/removed.parquet",
        rows(
            {"id": "r1", "before": long_b, "after": other},
            {"id": "r2", "before": long_b, "after": long_a, "source": "b"},
            {"id": "r3", "before": other, "after": other},
        ).with_columns(
            keeper_id=pl.lit("k1"), j=pl.lit(0.9), kind=pl.Series(["near", "near", "same_content"])
        ),
    )
    train = rows(
        {"id": "t1", "change": "c1", "path": "dist/axios.js", "before": "a", "after": "b"},
        {"id": "t2", "path": "src/dist.ts", "before": "a = 1", "after": "a  =\n 1"},
        {"id": "t3", "path": "docs/index.html", "before": "<p>", "after": "<p>x"},
        {"id": "t4", "path": "examples/index.html", "before": "<p>", "after": "<p>x"},
        {"id": "t5", "path": "guide/intro.html", "before": "<p>", "after": "<p>x"},
        {"id": "t6", "path": "doc/fd.1", "before": ".TH", "after": ".TH FD"},
        {"id": "t7", "path": "lib/app.min.js", "before": "a", "after": "b"},
        {"id": "t8", "path": "src/coverage/lcov-report/index.html", "before": "1", "after": "2"},
        {"id": "t9", "path": "vendor/github.com/x/y.go", "before": "a", "after": "b"},
        {
            "id": "t10",
            "path": "third",
            "before": "Subproject commit " + "a" * 40,
            "after": "Subproject commit " + "b" * 40,
        },
        {"id": "t11", "path": "x.py", "before": " ", "after": "\n"},  # blank: not ws-only
        {"id": "t12", "path": "x.py", "before": "x = 1", "after": "x = 2"},
        {"id": "t13", "path": "a.py", "before": "p = [REDACTED:jwt]", "after": "p = 1"},
    )
    validation = rows(
        {"id": "v1", "change": "c1", "before": "a", "after": "b"},  # its change has train items
        {"id": "v2", "change": "", "before": "a", "after": "c"},  # no change: not counted
        {"id": "v3", "change": "c9", "source": "b", "before": "a", "after": "d"},
    )
    test = rows({"id": "s1", "change": "c2", "before": "a", "after": "e"})
    for name, df in (("train", train), ("validation", validation), ("test", test)):
        write(root, f"export/{name}.parquet", df)
    write(
        root,
        "ingest/items.parquet",
        rows({"path": "guide/intro.md"}, {"path": "examples/readme.md"}),
    )
    write(
        root,
        "filter/rejected.parquet",
        rows({"id": "x1"}, {"id": "x2"}, {"id": "x3", "source": "b"}).with_columns(
            rules=pl.Series([["secret_masked"], ["noop", "secret"], ["lock_file"]])
        ),
    )
    write(root, "filter/kept.parquet", rows({"id": "f1"}, {"id": "f2", "source": "b"}))
    # shapes: two bumps of one class in different repo groups (split), two of another class in
    # one group (not split), one lone bump, one edit that is no version bump
    kept = rows(
        {"id": "b1", "path": "package.json", "before": BUMP1[0], "after": BUMP1[1]},
        {"id": "b2", "path": "pkg/package.json", "before": BUMP2[0], "after": BUMP2[1]},
        {"id": "b3", "path": "setup.cfg", "before": "version = 1.0.0", "after": "version = 1.1"},
        {"id": "b4", "path": "setup.cfg", "before": "version = v2.0", "after": "version = 2.0.1"},
        {"id": "b5", "path": "Cargo.toml", "before": 'x = "0.1"', "after": 'x = "0.2"'},
        {"id": "b6", "path": "setup.cfg", "before": "n = 1", "after": "n = 2"},
        {"id": "b7", "path": "package.json", "before": BUMP1[0], "after": BUMP1[1], "repo": "q"},
    )
    write(root, "shapes/kept.parquet", kept)
    groups = {"b1": 1, "b2": 2, "b3": 3, "b4": 3, "b5": 4, "b6": 5, "b7": 6}
    shapes = pl.DataFrame(
        [
            {"id": i, "scope": scope, "group_id": g if scope == "repo" else 0}
            for i, g in groups.items()
            for scope in ("change", "repo", "corpus")
        ]
    )
    write(root, "shapes/shapes.parquet", shapes)
    return root


def counts(c: pl.DataFrame, source: str = "TOTAL") -> tuple[int, int]:
    row = c.filter(pl.col("source") == source)
    return int(row["n"][0]), int(row["of"][0])


def measure(root: Path, fn, sources=()):
    return fn(trust.Run(root, list(sources)))


def test_near_counts_a_side_that_differs_not_a_match_nor_other_kinds(run: Path) -> None:
    c = measure(run, trust.m_near)
    assert counts(c) == (1, 2)
    assert counts(c, "a") == (1, 1) and counts(c, "b") == (0, 1)


def test_side_jaccard_edges() -> None:
    assert trust.side_jaccard("", None) == 1.0
    assert trust.side_jaccard("", "abcdef") == 0.0
    assert trust.side_jaccard("abc", "abc") == 1.0  # shorter than 5: one gram
    assert trust.side_jaccard("abc", "abd") == 0.0


def test_leak_counts_held_out_items_whose_change_has_train_items(run: Path) -> None:
    c = measure(run, trust.m_leak)
    assert counts(c) == (1, 3)  # v1 of v1, v3, s1 (v2 has no change)


def test_whitespace_only_edits(run: Path) -> None:
    assert counts(measure(run, trust.m_ws_only))[0] == 1  # t2, not the blank t11


def test_built_files(run: Path) -> None:
    built = trust._built(trust.Run(run, [])).filter(pl.col("kind").is_not_null())
    assert set(built["path"]) == {
        "dist/axios.js",
        "docs/index.html",
        "guide/intro.html",  # guide/intro.md beside it
        "lib/app.min.js",
        "src/coverage/lcov-report/index.html",
    }  # not src/dist.ts, examples/index.html (no examples/index.md), doc/fd.1 (no doc/fd.1.md)
    assert counts(measure(run, trust.m_built)) == (5, 17)
    assert counts(measure(run, trust.m_vendored))[0] == 2  # vendor/ and Subproject commit


def test_built_kind_paths() -> None:
    assert trust.built_kind("dist/axios.js", set()) == "bundle"
    assert trust.built_kind("packages/x/build/app.css", set()) == "bundle"
    assert trust.built_kind("src/dist.ts", set()) is None
    assert trust.built_kind("dist/index.d.ts", set()) is None
    assert trust.built_kind("dist/axios.js.map", set()) == "sourcemap"
    assert trust.built_kind("man/man1/fd.1", {("man/man1", "fd")}) == "man"  # fd.ronn beside it
    assert trust.built_kind("doc/fd.1", {("doc", "fd.1")}) == "man"  # doc/fd.1.md
    assert trust.built_kind("doc/fd.1", set()) is None  # hand-written roff
    assert trust.built_kind("a.html", {("", "a")}) == "html"
    assert trust.built_kind("a.html", {("", "b")}) is None


def test_secret_rejections_and_redacted(run: Path) -> None:
    c = measure(run, trust.m_secret)
    assert counts(c) == (2, 5) and counts(c, "b") == (0, 2)
    assert counts(measure(run, trust.m_redacted))[0] == 1


def test_fold_versions() -> None:
    f = trust.fold_versions
    assert f('"~1.6.3"') == f('"^2.0.0"') == f('"1.10.x"') == f('">=1.0.0-rc.1"') == '"⟨V⟩"'
    assert f("v4") == f("2.0.0.Final") == f("1.2.3+build.5") == f("4.5.0-beta2") == "⟨V⟩"
    assert f('"*"') == '"⟨V⟩"'
    assert f("uses: a/b@0123456789abcdef0123456789abcdef01234567") == "uses: a/b@⟨V⟩"
    assert f("x = 1") == "x = 1" and f("a * b") == "a * b"  # plain numbers and products stay
    assert f("word defaced here") == "word defaced here"  # hex letters without a digit


def test_version_bump_classes_split_over_repo_groups(run: Path) -> None:
    bumps = trust.version_bumps(trust.Run(run, []).read("shapes/kept.parquet", list(ITEM)))
    assert set(bumps["id"]) == {"b1", "b2", "b3", "b4", "b5", "b7"}  # not b6: no version
    # b1 + b2: "~1.6.3" -> "~1.6.4" and "^2.0.0" -> "^2.1.0" in package.json of repo r: one
    # class over two groups; b3 + b4: one class in one group; b5, b7: classes of one item
    assert counts(measure(run, trust.m_vbump)) == (1, 2)


def test_main_prints_tables_side_by_side_and_skips_missing(run: Path, capsys) -> None:
    other = run.parent / "after"
    shutil.copytree(run, other)
    shutil.rmtree(other / "shapes")
    trust.main([str(run), str(other), "--sources", "a,b"])
    out = capsys.readouterr().out
    assert "skip vbump" in out and "shapes.parquet missing" in out
    assert "six measures, run -> after" in out
    assert "1/2 50.0%" in out  # the near total
    assert "earlier trust figures" in out

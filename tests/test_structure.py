"""The package's shape: no import circle, and the vocabulary PIPELINE names used as named."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pipeline
from pipeline.config import SECTIONS
from pipeline.stage import PIPELINE, SPLITS, by_name

PKG = Path(pipeline.__file__).parent


def module_imports(pkg: Path) -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports anywhere in its source,
    `if TYPE_CHECKING:` blocks and function bodies included; `from a import b` counts as
    importing a.b where b is a module (not the package a itself)."""
    files = {}
    for f in sorted(pkg.rglob("*.py")):
        parts = (pkg.name, *f.relative_to(pkg).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph: dict[str, set[str]] = {}
    for name, f in files.items():
        base = name.split(".") if f.name == "__init__.py" else name.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(f.read_bytes(), str(f))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                up = base[: len(base) - node.level + 1] if node.level else []
                module = ".".join(up + ([node.module] if node.module else []))
                subs = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in files]
                found.update(subs)
                if len(subs) < len(node.names):
                    found.add(module)
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def test_no_import_circle_in_the_package():
    graph = module_imports(PKG)
    assert len(graph) > 50 and "pipeline.runner" in graph["pipeline.api"]
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as e:
        raise AssertionError(f"import circle: {' -> '.join(e.args[1])}") from None


def test_the_circle_check_sees_a_circle(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n"
    )
    (pkg / "b.py").write_text("def f():\n    from pkg import a\n")
    graph = module_imports(pkg)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError:
        return
    raise AssertionError("a circle through a TYPE_CHECKING import was not seen")


def test_executors_only_decide_where_work_runs():
    """Executors import nothing of the runner or of any stage: the runner writes outputs."""
    graph = module_imports(PKG)
    for name in ("pipeline.executors", "pipeline.executors.contract", "pipeline.executors.ray"):
        assert not {m for m in graph[name] if m == "pipeline.runner" or m.endswith(".stage")}


def test_stage_vocabulary_comes_from_pipeline():
    for stage in PIPELINE:
        assert stage.doc, stage.name  # the CLI's help for its command
        assert stage.section is None or stage.section in SECTIONS
    export = by_name("export")
    assert [o.name for o in export.writes if o.role == "terminal"] == [
        f"{s}.parquet" for s in SPLITS
    ]
    # each stage reads what the stage before it passes on
    for before, stage in zip(PIPELINE, PIPELINE[1:], strict=False):
        assert stage.reads[0] == f"{before.name}/{before.passes_on[0]}"


def test_smoke_train_is_an_optional_stage_through_the_runner():
    from pipeline.stage import NAMES, OPTIONAL, SMOKE

    assert SMOKE in OPTIONAL and SMOKE.name not in NAMES  # not in `editcurate run`
    assert SMOKE.reads == tuple(f"export/{s}.parquet" for s in SPLITS)
    # its code fingerprint is derived as every stage's: the loop and the model are in it
    assert {"train/stage.py", "train/loop.py", "train/model.py"} <= set(SMOKE.code)


def test_dedup_find_is_pure_and_the_stage_picks_where_it_runs():
    graph = module_imports(PKG)
    ray = {m for m in graph["pipeline.dedup.find"] if m.rsplit(".", 1)[-1].split("_")[0] == "ray"}
    assert not ray  # (executors.ray, dedup.ray_*; not pipeline.arrays, which only spells it)
    assert "pipeline.dedup.ray_pairs" in graph["pipeline.dedup.stage"]
    # the helpers every stage may use have homes of their own, not dedup's modules
    assert "pipeline.arrays" in graph["pipeline.dedup.ray_pairs"]
    assert "pipeline.executors" in graph["pipeline.dedup.index"]  # in_order


def test_ingest_sources_are_one_module_each_and_the_config_knows_their_names():
    from pipeline.config import SOURCE_KINDS
    from pipeline.ingest.sources import SOURCES

    assert tuple(SOURCES) == SOURCE_KINDS
    for kind, source in SOURCES.items():
        assert source.read.__module__ == f"pipeline.ingest.sources.{kind}"
        assert source.expects in ("file", "folder", "any")

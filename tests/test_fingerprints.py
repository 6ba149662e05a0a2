"""A stage's code fingerprint covers the files derived from its code (pipeline/stage.py
code_files), not a hand-written list: every module of the package its steps import."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import pipeline.stage as stage_mod
from pipeline import Pipeline
from pipeline.runner import prepare
from pipeline.runs import read_manifest
from pipeline.stage import PIPELINE, PKG, Stage, by_name, code_files, code_version

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample" / "edits.jsonl"

# Import the given modules in a fresh interpreter (only the standard library loaded) and print
# the file of every module of the package that Python loaded for them; call nothing else.
IMPORTS = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps({k: m.__file__ for k, m in sys.modules.items()
                  if k == "pipeline" or k.startswith("pipeline.")}))
"""

# Run the whole pipeline on the sample and print, per stage, the files of the package's modules
# first imported while it ran: its lazy imports (inside functions) as Python makes them.
RUN_IMPORTS = """
import json, sys
import pipeline.api as api
from pipeline import Pipeline

new, real = {}, api.run_stage
def run_stage(stage, cfg, force=False, **kw):
    before = set(sys.modules)
    try:
        return real(stage, cfg, force, **kw)
    finally:
        new[stage.name] = sorted(sys.modules[k].__file__ for k in set(sys.modules) - before
                                 if k == "pipeline" or k.startswith("pipeline."))
api.run_stage = run_stage
Pipeline.from_paths(sys.argv[1], out=sys.argv[2]).run()
print(json.dumps(new))
"""


def _rel(files) -> set[str]:
    return {Path(f).resolve().relative_to(PKG.resolve()).as_posix() for f in files}


def missing(stage: Stage, imported: set[str]) -> list[str]:
    """Files of modules Python imported for the stage that its fingerprint leaves out."""
    return sorted(imported - set(stage.code))


@pytest.fixture(scope="module")
def imported() -> dict[str, set[str]]:
    out = {}
    for s in PIPELINE:
        res = subprocess.run(
            [sys.executable, "-c", IMPORTS, *sorted(s.modules)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        out[s.name] = _rel(json.loads(res.stdout).values())
    return out


def test_every_module_a_stage_imports_is_in_its_fingerprint(imported):
    for s in PIPELINE:
        # the stage's own modules, at least, and their package's __init__.py
        assert s.modules and len(imported[s.name]) > len(s.modules), s.name
        assert missing(s, imported[s.name]) == [], s.name
    print({s.name: len(s.code) for s in PIPELINE})


def test_the_check_notices_a_module_the_derivation_drops(imported, monkeypatch):
    dropped = "dedup/change.py"
    assert dropped in imported["dedup"]
    real = code_files
    monkeypatch.setattr(
        stage_mod, "code_files", lambda mods: tuple(f for f in real(mods) if f != dropped)
    )
    assert missing(by_name("dedup"), imported["dedup"]) == [dropped]


def test_modules_a_stage_imports_while_it_runs_are_in_its_fingerprint(tmp_path):
    res = subprocess.run(
        [sys.executable, "-c", RUN_IMPORTS, str(SAMPLE), str(tmp_path / "run")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    new = json.loads(res.stdout.splitlines()[-1])
    assert list(new) == [s.name for s in PIPELINE]
    assert "ingest/sources/table.py" in by_name("ingest").code  # a reader, through SOURCES
    for s in PIPELINE:
        assert missing(s, _rel(new[s.name])) == [], s.name


def test_the_derivation_follows_every_import_form_and_skips_type_checking(tmp_path, monkeypatch):
    pkg = tmp_path / "pipeline"
    files = {
        "__init__.py": "",
        "a/__init__.py": "from . import b\n",  # from pkg import submodule, relative
        "a/b.py": "from ..c import x\n",  # relative, two levels
        "a/lazy.py": "def f():\n    import pipeline.d.e\n",  # inside a function
        "c.py": "x = 1\n",
        "d/__init__.py": "",
        "d/e.py": "from pipeline.f import g\n",  # absolute from-import of a name
        "f.py": "import importlib\nMOD = 'pipeline.h'\ng = importlib.import_module(MOD)\n",
        "h.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pipeline.i\n",
        "i.py": "",
        "unused.py": "",
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    monkeypatch.setattr(stage_mod, "PKG", pkg)
    assert stage_mod.code_files(["pipeline.a.lazy"]) == (
        "__init__.py",
        "a/__init__.py",
        "a/b.py",
        "a/lazy.py",
        "c.py",
        "d/__init__.py",
        "d/e.py",
        "f.py",
        "h.py",
    )
    assert stage_mod.code_files(["pipeline.c", "elsewhere.module"]) == ("__init__.py", "c.py")


def test_the_code_version_is_the_same_for_the_same_code_in_any_order():
    files = by_name("dedup").code
    assert list(files) == sorted(files)
    assert code_version(files) == code_version(tuple(reversed(files)))
    assert code_version(files) != code_version(files[1:])


def _skipped(p: Pipeline) -> dict[str, bool]:
    return {r.stage: r.skipped for r in p.run().results}


# change.py: dedup imports it, its upstream stages do not; schema.py: dedup imports it (for
# with_change_j) and the old list for dedup, ("dedup",), left it out
@pytest.mark.parametrize("edited", ["dedup/change.py", "schema.py"])
def test_editing_a_module_a_stage_imports_reruns_it_and_what_follows(edited, tmp_path, monkeypatch):
    assert edited in by_name("dedup").code
    p = Pipeline.from_paths(SAMPLE, out=tmp_path / "run")
    assert not any(_skipped(p).values())
    assert all(_skipped(p).values())  # nothing changed: everything skipped
    before = read_manifest(tmp_path / "run" / "dedup")["fingerprint"]
    # the fingerprint reads a copy of the package: the same code, so still everything skipped
    copy = tmp_path / "src" / "pipeline"
    shutil.copytree(PKG, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(stage_mod, "PKG", copy)
    assert all(_skipped(p).values())
    with open(copy / edited, "a") as f:
        f.write("\n# edited\n")
    assert prepare(by_name("dedup"), p.config).fingerprint != before  # its own code, not input
    want, upstream_ran = {}, False
    for s in PIPELINE:
        upstream_ran = upstream_ran or edited in s.code
        want[s.name] = not upstream_ran
    assert want["dedup"] is False and want["export"] is False
    assert _skipped(p) == want
    assert all(_skipped(p).values())

"""A first run says it is compiling: the runner finds a stage's numba kernels not cached yet."""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest

from pipeline.jit import uncached_kernels


def test_kernels_are_uncached_until_first_called(tmp_path, monkeypatch):
    (tmp_path / "jitmod_under_test.py").write_text(
        "from numba import njit\n\n\n@njit(cache=True)\ndef inc(x):\n    return x + 1\n\n\n"
        "def plain(x):\n    return x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("jitmod_under_test")
    try:
        name = "jitmod_under_test"
        assert uncached_kernels([name]) == ([f"{name}.inc"], [f"{name}.inc"])
        assert mod.inc(1) == 2  # compiles, and writes numba's cache beside the module
        assert uncached_kernels([name]) == ([], [f"{name}.inc"])
        assert uncached_kernels(["not_imported_anywhere"]) == ([], [])
    finally:
        sys.modules.pop("jitmod_under_test", None)


KERNEL = """\
import importlib.util
import pathlib

from numba import njit

from pipeline.jit import use_kernel_cache

use_kernel_cache()
_spec = importlib.util.spec_from_file_location("c", pathlib.Path(__file__).parent / "consts.py")
_consts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_consts)
STEP = _consts.STEP  # a sibling's constant, baked into the kernel


@njit(cache=True)
def inc(x):
    return x + STEP
"""
NAME = "pipeline._jit_kernel_under_test"


def test_a_fresh_copy_of_the_same_code_loads_the_kernels_another_compiled(tmp_path, monkeypatch):
    """The kernel cache is keyed by content, not by folder: a second clone or install of the
    same code loads the compiled kernels; a sibling's edit (a constant it reads) compiles anew."""
    from numba.core import config

    if config.CACHE_DIR:
        pytest.skip("NUMBA_CACHE_DIR is set: numba's own cache location stands")
    monkeypatch.setenv("EDITCURATE_CACHE_DIR", str(tmp_path / "cache"))
    try:
        for clone, step, cold in (("a", 1, True), ("b", 1, False), ("c", 2, True)):
            (tmp_path / clone).mkdir()
            (tmp_path / clone / "kern.py").write_text(KERNEL)
            (tmp_path / clone / "consts.py").write_text(f"STEP = {step}\n")
            spec = importlib.util.spec_from_file_location(NAME, tmp_path / clone / "kern.py")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[NAME] = mod
            spec.loader.exec_module(mod)
            assert uncached_kernels([NAME])[0] == ([f"{NAME}.inc"] if cold else []), clone
            assert mod.inc(1) == 1 + step
            assert uncached_kernels([NAME])[0] == []
        assert len(list((tmp_path / "cache").iterdir())) == 2  # a and b share one
    finally:
        sys.modules.pop(NAME, None)


CALLS = """\
from numba import njit

from pipeline.jit import use_kernel_cache

use_kernel_cache()


@njit
def step(x, by):
    return x + by


@njit
def run(n):
    x = 0
    for _ in range(n):
        x = step(x, 7)  # a constant argument, and x = 0 first typed as a literal too
    return x
"""


def test_a_kernel_called_with_constants_is_compiled_once_for_plain_types(tmp_path):
    """numba types a constant argument as a literal and would compile the callee again for
    it; a project kernel is compiled for the plain types only (the first run's wait)."""
    from numba.core import types

    name = "pipeline._jit_calls_under_test"
    (tmp_path / "calls.py").write_text(CALLS)
    spec = importlib.util.spec_from_file_location(name, tmp_path / "calls.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
        assert mod.run(3) == 21
        assert len(mod.step.signatures) == 1
        assert not any(isinstance(t, types.Literal) for t in mod.step.signatures[0])
    finally:
        sys.modules.pop(name, None)


LISTEN = """\
import sys

from numba.core import event


class Compiled(event.Listener):
    def on_start(self, ev):
        pass

    def on_end(self, ev):
        name = ev.data["dispatcher"].py_func.__module__
        if name.startswith("pipeline."):
            print("compiled here:", name, ev.data["dispatcher"].py_func.__name__, file=sys.stderr)


event.register("numba:compile", Compiled())
from pipeline.cli import app

sys.argv[0] = "editcurate"
app()
"""


def test_a_first_run_compiles_later_stages_kernels_ahead_for_the_types_the_run_passes(tmp_path):
    """With no kernel compiled yet, a run starts the filter, dedup and shapes warm-ups in
    processes of their own, and they compile every kernel the run then calls: the run's own
    process compiles none (a warm-up that missed a type would leave the stage compiling it)."""
    import os
    import subprocess
    from pathlib import Path

    from numba.core import config

    if config.CACHE_DIR:
        pytest.skip("NUMBA_CACHE_DIR is set: numba's own cache location stands")
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "listen.py").write_text(LISTEN)
    env = os.environ | {"EDITCURATE_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    sample = root / "data" / "sample" / "edits.jsonl"
    cmd = [sys.executable, str(tmp_path / "listen.py"), "run", str(sample), "--out"]
    out = subprocess.run([*cmd, str(tmp_path / "run")], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    assert "compiling the numba kernels of filter, dedup, shapes in 4 processes" in text
    assert "compiled here:" not in text, text
    assert "failed" not in text

"""A first run says it is compiling: the runner finds a stage's numba kernels not cached yet."""

from __future__ import annotations

import importlib
import sys

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

"""Whether a stage's numba kernels are compiled yet: the first run after an install compiles
them (about a minute for dedup and shapes together), later runs load them from numba's cache.
The runner says so in one line before such a stage, so a first run never looks hung."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable


def uncached_kernels(modules: Iterable[str]) -> tuple[list[str], list[str]]:
    """Of the cached numba kernels (`njit(cache=True)`) of the given imported modules, as
    module.function: those whose cache has no index yet, and all of them."""
    out: list[str] = []
    every: list[str] = []
    for name in sorted(set(modules)):
        mod = sys.modules.get(name)
        for attr, v in sorted(vars(mod).items()) if mod is not None else ():
            cache = getattr(v, "_cache", None)
            index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
            if getattr(v, "__module__", None) == name and isinstance(index, str):
                every.append(f"{name}.{attr}")
                if not os.path.exists(index):
                    out.append(f"{name}.{attr}")
    return out, every

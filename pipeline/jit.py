"""The project's numba kernels: where they are cached, whether a stage's are compiled yet,
compiling them ahead of a run's stages, and running them on threads (on_threads).

Compiling dedup's and shapes' kernels takes about half a minute (each kernel once, for its
arguments' plain types: _compile_unliteral). numba's own cache sits beside each
source file (or under a folder named by its absolute path), so every fresh clone or install
compiled again. The project's kernels are cached instead under one user folder, by source
*content*: KernelCache keys a module's cache by a digest of every Python file of its package
folder (a kernel inlines helpers and bakes in constants from its siblings, as shapes/scan.py
does from shapes/normalise.py, so an edit to a sibling must recompile it), so any copy of the
same code on the machine loads what another compiled, and changed code never loads a stale
kernel. numba keeps one entry per signature and CPU in that folder.

Folder: $EDITCURATE_CACHE_DIR, else $XDG_CACHE_HOME/editcurate/numba, else
~/.cache/editcurate/numba. Where NUMBA_CACHE_DIR is set numba's own choice stands, and where
the folder cannot be written numba falls back to its own. Kernel modules call
use_kernel_cache() before their first `njit(cache=True)`, which is when numba picks a locator.

What is still to compile the runner says in one line before the stage (uncached_kernels), so a
first run never looks hung. A run compiles ahead: each later stage whose kernels are all
uncached names warm-up functions (Stage.warm), and the runner starts each in its own process
(`python -m pipeline.jit REF`, the run's config on stdin) while the earlier stages run, then
waits for a stage's before running it; the stage loads what they compiled from the cache. A
warm-up calls the stage's own code on warm_items(), so it compiles what a run needs, for the
types a run passes (tests/test_jit.py checks that a run after them compiles nothing).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

PACKAGE = "pipeline"


def cache_root() -> Path:
    if d := os.environ.get("EDITCURATE_CACHE_DIR"):
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "editcurate" / "numba"


@cache
def package_digest(folder: str) -> str:
    """sha256 over the names and bytes of the folder's Python files (not recursive)."""
    h = hashlib.sha256()
    for f in sorted(Path(folder).glob("*.py")):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:20]


@cache
def use_kernel_cache() -> type:
    """Puts KernelCache first among numba's cache locators (once) and returns it. Kernel modules
    call it before their first `njit(cache=True)`; numba is imported here, not at the import of
    this module, which the runner imports for every stage."""
    from numba.core import caching, config

    class KernelCache(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
        """numba's cache of a project kernel: <cache_root>/<module>-<package digest>/."""

        def __init__(self, py_func: Any, py_file: str) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            self._digest = package_digest(str(Path(py_file).resolve().parent))
            name = py_func.__module__.removeprefix(PACKAGE + ".")
            self._cache_path = str(cache_root() / f"{name}-{self._digest}")

        def get_cache_path(self) -> str:
            return self._cache_path

        def get_source_stamp(self) -> str:  # the folder's content, not the file's mtime
            return self._digest

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if config.CACHE_DIR or not str(py_func.__module__).startswith(PACKAGE + "."):  # type: ignore[attr-defined]
                return None
            return super().from_function(py_func, py_file)

    caching.CacheImpl._locator_classes.insert(0, KernelCache)
    _compile_unliteral()
    return KernelCache


def _compile_unliteral() -> None:
    """A project kernel called from another is compiled for its arguments' plain types only.
    numba's type inference first sees a constant argument (`p = 0`, a literal `7`) as a literal
    type, and compiles the callee, and everything it calls, once more for that type: the
    shapes and dedup kernels compiled two to six times each, most of a first run's wait. A
    literal still matches the plain signature (safe conversion); no kernel here reads an
    argument's value at compile time."""
    from numba.core import types
    from numba.core.dispatcher import Dispatcher

    plain = Dispatcher.get_call_template

    def get_call_template(self: Any, args: Any, kws: Any) -> Any:
        if str(self.py_func.__module__).startswith(PACKAGE + "."):
            args = tuple(types.unliteral(a) for a in args)
            kws = {k: types.unliteral(v) for k, v in kws.items()}
        return plain(self, args, kws)

    Dispatcher.get_call_template = get_call_template  # type: ignore[method-assign]


_AHEAD: set[str] = set()  # packages whose kernels a warm-up of this process is compiling


def note_compiling_ahead(package: str) -> None:
    """Notes that a warm-up started by this process (runner.CompileAhead) is compiling the
    kernels of `package` ("pipeline.filter")."""
    _AHEAD.add(package)


def compiling_ahead(module: str) -> bool:
    """Whether a warm-up started by this process is compiling the kernels of `module`
    ("pipeline.filter.kernels")."""
    return any(module.startswith(p + ".") for p in _AHEAD)


WARMED, BEGUN = "warmed", "begun"  # a warm-up's marks: finished, started


def warm_mark(module: str, state: str = WARMED) -> Path | None:
    """The file a warm-up of a kernel module ("pipeline.filter.kernels") leaves in its cache
    folder as it starts (BEGUN) and when it has finished (WARMED), so a run can tell,
    importing nothing, whether to start one again (None where numba's own cache location
    stands)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    folder = _package_folder(module.rpartition(".")[0])
    name = module.removeprefix(PACKAGE + ".")
    return cache_root() / f"{name}-{package_digest(str(folder))}" / state


def _package_folder(package: str) -> Path:
    """The source folder of a package of this project ("pipeline.dedup")."""
    return Path(__file__).resolve().parent.joinpath(*package.split(".")[1:])


def none_cached(package: str) -> bool | None:
    """Whether no kernel module of the package ("pipeline.dedup") has a folder in the kernel
    cache for the package's current code: its kernels are all still to compile. Read from the
    folder names alone, importing nothing (so a run can start compiling ahead at once); None
    where numba's own cache location stands (NUMBA_CACHE_DIR)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    folder = _package_folder(package)
    prefix = package.removeprefix(PACKAGE + ".") + "."
    root = cache_root()
    try:
        names = os.listdir(root)
    except FileNotFoundError:  # a first run on this machine (numba makes the folder)
        return True
    except OSError:
        return None
    if not os.access(root, os.W_OK):  # numba falls back to its own location then
        return None
    digest = package_digest(str(folder))
    return not any(n.startswith(prefix) and n.endswith("-" + digest) for n in names)


def _index(kernel: Any) -> str | None:
    """Where a cached numba kernel (`njit(cache=True)`) keeps its cache's index (None: not
    such a kernel)."""
    cache_file = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
    index = getattr(cache_file, "_index_path", None)
    return index if isinstance(index, str) else None


def in_cache(kernel: Any) -> bool:
    """Whether a cached numba kernel has an index in its cache yet."""
    index = _index(kernel)
    return index is not None and os.path.exists(index)


def uncached_kernels(modules: Iterable[str]) -> tuple[list[str], list[str]]:
    """Of the cached numba kernels (`njit(cache=True)`) of the given imported modules, as
    module.function: those whose cache has no index yet, and all of them."""
    out: list[str] = []
    every: list[str] = []
    for name in sorted(set(modules)):
        mod = sys.modules.get(name)
        for attr, v in sorted(vars(mod).items()) if mod is not None else ():
            if getattr(v, "__module__", None) == name and _index(v) is not None:
                every.append(f"{name}.{attr}")
                if not in_cache(v):
                    out.append(f"{name}.{attr}")
    return out, every


def on_threads(kernel: Callable[..., None], n: int, *args: Any) -> None:
    """kernel(lo, hi, *args) over consecutive ranges of 0..n-1 (up to 8 per thread, so a
    slow range holds one thread only) on numba's number of threads: for serial kernels that
    release the GIL (nogil=True). numba's parallel loops (prange) do the same, but compiling
    them took 3.5 s more of every first run, and two threads must not start them at once."""
    import numba

    threads = min(numba.get_num_threads(), n)
    if threads <= 1:
        if n > 0:
            kernel(0, n, *args)
        return
    parts = min(n, 8 * threads)
    bounds = [n * k // parts for k in range(parts + 1)]
    with ThreadPoolExecutor(threads) as ex:
        for _ in ex.map(lambda k: kernel(bounds[k], bounds[k + 1], *args), range(parts)):
            pass


def warm_items() -> pa.Table:
    """A few items in ITEM_SCHEMA shaped to take every common path of the stages' kernels:
    a version bump and a hash bump (shapes' digit scans), an addition to an empty file, text
    outside ASCII, a multi-line edit, and an exact and a near duplicate (dedup's pairs)."""
    import pyarrow as pa

    from pipeline.schema import ITEM_SCHEMA

    body = "def area(r):\n    return 3.14 * r * r\n\n\nprint(area(2))\n"
    edits = [
        ("  rev: v4.5.0\n", "  rev: v5.0.0\n", "bump pre-commit hooks"),
        ('"lodash": "^4.17.20",\n', '"lodash": "~4.17.21",\n', "bump lodash"),
        ("ref = 1a2b3c4d5e6f7a8\n", "ref = 9f8e7d6c5b4a3f2\n", "pin the new commit"),
        ("", 'fn main() {\n    println!("héllo");\n}\n', "add main"),
        (body, body.replace("3.14", "math.pi"), "use math.pi"),
        (body, body.replace("3.14", "math.pi"), "use math.pi"),
        (body, body.replace("3.14 * r * r", "math.pi * r**2"), "use math.pi, r**2"),
    ]
    rows = [
        {
            "id": f"{k:024x}",
            "source": "warm",
            "source_ref": f"line {k + 1}",
            "repo": "o/r",
            "change": f"c{k}",
            "path": f"src/f{k % 3}.py",
            "language": "python",
            "before": before,
            "after": after,
            "context": "",
            "comment": comment,
            "author": None,
            "author_is_bot": False,
            "lines_removed": before.count("\n"),
            "lines_added": after.count("\n"),
            "created_at": None,
        }
        for k, (before, after, comment) in enumerate(edits)
    ]
    return pa.Table.from_pylist(rows, schema=ITEM_SCHEMA)


def _warm_main() -> int:
    """`python -m pipeline.jit REF [NICE]`: runs warm-up REF (module:function) with the run's
    config, read as JSON from stdin, at CPU priority NICE (os.nice), marking its start and
    its end in the module's kernel cache folder (warm_mark)."""
    from pipeline.config import Config
    from pipeline.stage import resolve

    if len(sys.argv) > 2 and int(sys.argv[2]):
        os.nice(int(sys.argv[2]))
    cfg = Config.model_validate_json(sys.stdin.read())
    module = sys.argv[1].partition(":")[0]
    _touch(warm_mark(module, BEGUN))
    resolve(sys.argv[1])(cfg)
    _touch(warm_mark(module, WARMED))  # its kernels are in the cache now
    return 0


def _touch(mark: Path | None) -> None:
    if mark is not None:
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.touch()


if __name__ == "__main__":
    sys.exit(_warm_main())

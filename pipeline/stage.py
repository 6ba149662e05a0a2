"""The Stage contract, and PIPELINE: the one ordered list of stages.

A Stage declares what it reads (finished outputs of earlier stages), what it writes (with its
role and, for Parquet, its Arrow schema), its config section, and its steps. The code its
fingerprint covers is derived, not listed: the modules its steps live in and every module of the
package they import, transitively (`code_files`). The runner (runner.py) does all the rest for
every stage alike: fingerprint and skip, the run-folder lock, atomic writes, schema and
conservation checks, the manifest, timing, progress. Adding a stage = its module, one line in
PIPELINE, its tests.

Steps come in two shapes, so that an executor can run them without knowing the stage:
- `map` (+ `finalize`): a pure function of one Arrow batch of the first input, returning a
  batch per output and counts to be summed; `finalize` turns the summed counts into the
  manifest's counts and extras. Any executor (in-process, Ray Data `map_batches`) can run it.
- `step`: the whole stage over its inputs, reading and writing through the StageIO the runner
  hands it (used where a stage needs a global view: banding, clustering, grouping, splits).

Steps and hooks are given as "module:function" strings, imported only when the stage runs, so
that reading PIPELINE (the CLI's --help, verify) imports no heavy library.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROLES = ("items", "terminal", "aux")  # items carry on to the next stage; terminal: they leave
# The held-out splits export writes, in order (its outputs `<split>.parquet`), named once here
# for every module that reads them: PIPELINE is read without importing any stage's code.
SPLITS = ("train", "validation", "test")
Ref = Callable[..., Any] | str


def resolve(ref: Ref) -> Callable[..., Any]:
    """A callable, or the one a "module:attribute" string names."""
    if callable(ref):
        return ref
    module, _, attr = ref.partition(":")
    found: Callable[..., Any] = getattr(importlib.import_module(module), attr)
    return found


@dataclass(frozen=True)
class Output:
    name: str  # a file or folder in the stage folder: "kept.parquet", "hf", "README.md"
    role: str = "aux"
    # Parquet outputs: the schema, or a function of the first input's schema (kept = input)
    schema: Any = None
    # (cfg) -> bool: whether the stage writes it this run (None: always). One it does not is
    # neither checked nor recorded, and what an earlier run left there is removed.
    when: Ref | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"output {self.name}: role {self.role!r} not in {ROLES}")


@dataclass(frozen=True)
class Stage:
    name: str
    section: str | None  # the config section it is configured by (its fingerprint)
    reads: tuple[str, ...]  # "filter/kept.parquet": outputs of finished earlier stages
    writes: tuple[Output, ...]
    step: Ref | None = None  # (cfg, io) -> (counts, extra)
    map: Ref | None = None  # (batch, ctx) -> ({output: batch}, counts)
    finalize: Ref | None = None  # (cfg, summed counts, io) -> (counts, extra)
    # map stages: (cfg, input folder) -> ctx handed to every map call (a view of the whole
    # input that each batch needs: the filter's mirror folders)
    start: Ref | None = None
    # (cfg) -> (fingerprint text, {external input: content fingerprint}); runs before
    # anything else, so it also validates what the stage needs (sources, rule files)
    key: Ref | None = None
    summary: Ref | None = None  # (manifest) -> None: print what the stage did
    check: Ref | None = None  # (manifest) -> None, raising DataError: the data failed
    conservation: str = "ids"  # ids | records (the step records it) | none
    batch_size: Callable[[Any], int] | None = field(default=None, compare=False)
    # (cfg) -> None each: compile the stage's numba kernels on a few items; a first run runs
    # them in processes of their own while the stages before run (pipeline/jit.py)
    warm: tuple[Ref, ...] = field(default=(), compare=False)
    # False: the stage has a way for while its kernels compile (filter/measures.py): its
    # warm-ups run at the lowest priority, and it does not wait for them; their modules
    # have `ready() -> bool` (every kernel in the cache), asked where jit.warm_mark is None
    warm_waits: bool = field(default=True, compare=False)
    doc: str = ""  # one line: what it does (its CLI command's help)

    def __post_init__(self) -> None:
        if (self.step is None) == (self.map is None):
            raise ValueError(f"stage {self.name}: give exactly one of step and map")
        if self.map is not None and not self.reads:
            raise ValueError(f"stage {self.name}: a map stage maps batches of its first input")

    def written(self, cfg: Any) -> list[Output]:
        """The outputs it writes under cfg (every one but those whose `when` says no)."""
        return [o for o in self.writes if o.when is None or resolve(o.when)(cfg)]

    @property
    def passes_on(self) -> list[str]:
        return [o.name for o in self.writes if o.role == "items"]

    @property
    def leaves(self) -> list[str]:
        return [o.name for o in self.writes if o.role in ("items", "terminal")]

    @property
    def modules(self) -> set[str]:
        """The modules its steps, hooks and declared schemas live in."""
        refs = (self.step, self.map, self.finalize, self.start, self.key, self.summary)
        out: set[str] = set()
        outs = (x for o in self.writes for x in (o.schema, o.when))
        for ref in (*refs, self.check, *outs):
            if isinstance(ref, str):
                out.add(ref.partition(":")[0])
            elif callable(ref) and isinstance(getattr(ref, "__module__", None), str):
                out.add(ref.__module__)
        return out

    @property
    def code(self) -> tuple[str, ...]:
        """The package-relative source files its code fingerprint covers (see code_files)."""
        return code_files(self.modules)


# ------------------------------------------------------------------------ code fingerprints

PKG = Path(__file__).parent  # the package whose source code fingerprints read


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk, less the bodies of `if TYPE_CHECKING:` (imports there never run)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and ast.unparse(child.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            for sub in child.orelse:
                yield sub
                yield from _walk(sub)
            continue
        yield child
        yield from _walk(child)


@functools.cache
def import_graph(pkg: Path) -> dict[str, tuple[str, frozenset[str]]]:
    """Every module of the package at `pkg`: its package-relative file and the package's modules
    it imports, read from its source with `ast`. Counted: imports anywhere in the module (stages
    import lazily, inside functions), `from pkg import submodule`, relative imports, and string
    constants naming a module (`importlib.import_module(READERS[kind])`); importing a.b.c runs
    a and a.b too. Cached per process: stages ask for it one by one."""
    files = {}
    for f in sorted(pkg.rglob("*.py")):
        if "__pycache__" in f.parts:
            continue
        parts = (pkg.name, *f.relative_to(pkg).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        files[name] = f
    named = re.compile(re.escape(pkg.name) + r"(\.\w+)*")

    def imports(name: str, path: Path) -> frozenset[str]:
        is_pkg = path.name == "__init__.py"
        found: set[str] = set()

        def add(module: str) -> None:
            bits = module.split(".")
            found.update(".".join(bits[:i]) for i in range(1, len(bits) + 1))

        for node in _walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add(alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's package, up level - 1
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                add(module)
                for alias in node.names:  # from pkg import submodule
                    if f"{module}.{alias.name}" in files:
                        add(f"{module}.{alias.name}")
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and named.fullmatch(node.value)
            ):
                add(node.value)
        return frozenset(m for m in found if m in files and m != name)

    return {name: (f.relative_to(pkg).as_posix(), imports(name, f)) for name, f in files.items()}


def code_files(modules: Iterable[str]) -> tuple[str, ...]:
    """The package-relative source files of `modules` (those of the package; others are left
    out) and of every module of the package they import, transitively, with the packages'
    `__init__.py` on the way; sorted."""
    graph = import_graph(PKG)
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in seen or name not in graph:
            continue
        seen.add(name)
        bits = name.split(".")
        todo.extend(".".join(bits[:i]) for i in range(1, len(bits)))
        todo.extend(graph[name][1])
    return tuple(sorted(graph[m][0] for m in seen))


def code_version(files: Iterable[str]) -> str:
    """sha256 over package-relative source files in sorted order (names and contents), so
    editing any of them invalidates old outputs and the same code gives the same version."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + (PKG / rel).read_bytes())
    return h.hexdigest()[:16]


def _ref(module: str, name: str) -> str:
    return f"pipeline.{module}:{name}"


PIPELINE: tuple[Stage, ...] = (
    Stage(
        name="ingest",
        doc="Read every configured source into items.parquet (+ errors.parquet).",
        section="ingest",
        reads=(),
        writes=(
            Output("items.parquet", "items", "pipeline.schema:ITEM_SCHEMA"),
            Output("errors.parquet", "terminal", "pipeline.schema:ERROR_SCHEMA"),
        ),
        step=_ref("ingest.stage", "step"),
        key=_ref("ingest.stage", "key"),
        summary=_ref("ingest.stage", "print_summary"),
        check=_ref("ingest.stage", "check"),
        conservation="records",
    ),
    Stage(
        name="filter",
        doc="Apply the rule set: kept.parquet (+ flags) and rejected.parquet (+ rule, reason).",
        section="filter",
        reads=("ingest/items.parquet",),
        writes=(
            Output("kept.parquet", "items", "pipeline.filter.stage:KEPT_SCHEMA"),
            Output("rejected.parquet", "terminal", "pipeline.filter.stage:REJECTED_SCHEMA"),
        ),
        map=_ref("filter.stage", "map_batch"),
        start=_ref("filter.stage", "start"),
        finalize=_ref("filter.stage", "finalize"),
        key=_ref("filter.stage", "key"),
        summary=_ref("filter.stage", "print_summary"),
        batch_size=lambda cfg: cfg.filter.batch_size,
        warm=(_ref("filter.kernels", "warm"),),
        warm_waits=False,
    ),
    Stage(
        name="dedup",
        doc="Remove exact and near duplicates (shingle Jaccard) from filter's kept items.",
        section="dedup",
        reads=("filter/kept.parquet",),
        writes=(
            Output("kept.parquet", "items"),
            Output("removed.parquet", "terminal"),
            Output("edges.parquet", "aux", "pipeline.dedup.stage:EDGE_SCHEMA"),
            Output("clusters.parquet", "aux", "pipeline.dedup.stage:CLUSTER_SCHEMA"),
            Output("oversized_buckets.parquet", "aux", "pipeline.dedup.stage:OVERSIZED_SCHEMA"),
            # kept items' text and band keys, for later runs: dedup.index, or with against
            Output("index", "aux", when=_ref("dedup.stage", "writes_index")),
        ),
        step=_ref("dedup.stage", "step"),
        key=_ref("dedup.stage", "key"),
        summary=_ref("dedup.stage", "print_summary"),
        warm=(_ref("dedup.scan", "warm"), _ref("dedup.find", "warm")),
    ),
    Stage(
        name="decontaminate",
        doc="Remove items that duplicate a benchmark's items (decontaminate.against).",
        section="decontaminate",
        reads=("dedup/kept.parquet",),
        writes=(
            Output("kept.parquet", "items"),
            Output("removed.parquet", "terminal"),
        ),
        step=_ref("decontaminate", "step"),
        key=_ref("decontaminate", "key"),
        summary=_ref("decontaminate", "print_summary"),
    ),
    Stage(
        name="shapes",
        doc="Group items by edit shape (digits/SHAs normalised); annotate, cap or spread them.",
        section="shapes",
        reads=("decontaminate/kept.parquet",),
        writes=(
            Output("kept.parquet", "items"),
            Output("removed.parquet", "terminal"),
            Output("shapes.parquet", "aux", "pipeline.shapes.stage:SHAPES_SCHEMA"),
        ),
        step=_ref("shapes.stage", "step"),
        key=_ref("shapes.stage", "key"),
        summary=_ref("shapes.stage", "print_summary"),
        warm=(_ref("shapes.stage", "warm"),),
    ),
    Stage(
        name="export",
        doc="Split shapes' kept items into train/validation/test by whole group; Parquet + HF"
        " dataset.",
        section="export",
        reads=("shapes/kept.parquet", "shapes/shapes.parquet", "dedup/clusters.parquet"),
        writes=(
            *(Output(f"{s}.parquet", "terminal") for s in SPLITS),
            Output("hf", "aux"),
            Output("README.md", "aux"),
        ),
        step=_ref("export.stage", "step"),
        summary=_ref("export.stage", "print_summary"),
    ),
)

# Stages outside the default PIPELINE, run by a command of their own through the same runner.
SMOKE = Stage(
    name="smoke",
    doc="LoRA-train export's train split, judge on validation, explain any non-finite step. Slow.",
    section="smoke",
    reads=tuple(f"export/{s}.parquet" for s in SPLITS),
    # always written; eval.parquet (when judged) the step records itself, adapter/ and
    # windows/ (when non-finite) sit beside them
    writes=(
        Output("items.parquet"),
        Output("steps.parquet"),
        Output("culprits.json"),
        Output("summary.json"),
        Output("loss_grad.png"),
    ),
    step=_ref("train.stage", "step"),
    key=_ref("train.stage", "key"),
    conservation="none",  # it trains on items, it does not pass them on
)
OPTIONAL: tuple[Stage, ...] = (SMOKE,)

NAMES = tuple(s.name for s in PIPELINE)


def by_name(name: str, stages: tuple[Stage, ...] = PIPELINE) -> Stage:
    for s in stages:
        if s.name == name:
            return s
    raise KeyError(name)

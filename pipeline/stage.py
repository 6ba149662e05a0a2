"""The Stage contract, and PIPELINE: the one ordered list of stages.

A Stage declares what it reads (finished outputs of earlier stages), what it writes (with its
role and, for Parquet, its Arrow schema), its config section, the code its fingerprint covers,
and its steps. The runner (runner.py) does all the rest for every stage alike: fingerprint and
skip, the run-folder lock, atomic writes, schema and conservation checks, the manifest, timing,
progress. Adding a stage = its module, one line in PIPELINE, its tests.

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

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ROLES = ("items", "terminal", "aux")  # items carry on to the next stage; terminal: they leave
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
    code: tuple[str, ...] = ()  # package-relative files or folders: the code fingerprint
    conservation: str = "ids"  # ids | records (the step records it) | none
    batch_size: Callable[[Any], int] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if (self.step is None) == (self.map is None):
            raise ValueError(f"stage {self.name}: give exactly one of step and map")
        if self.map is not None and not self.reads:
            raise ValueError(f"stage {self.name}: a map stage maps batches of its first input")

    @property
    def passes_on(self) -> list[str]:
        return [o.name for o in self.writes if o.role == "items"]

    @property
    def leaves(self) -> list[str]:
        return [o.name for o in self.writes if o.role in ("items", "terminal")]


def _ref(module: str, name: str) -> str:
    return f"pipeline.{module}:{name}"


PIPELINE: tuple[Stage, ...] = (
    Stage(
        name="ingest",
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
        code=("ingest", "schema.py", "secrets.py", "secret_rules.py"),
        conservation="records",
    ),
    Stage(
        name="filter",
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
        code=("filter", "schema.py", "secrets.py", "secret_rules.py"),  # weak secrets: flags
        batch_size=lambda cfg: cfg.filter.batch_size,
    ),
    Stage(
        name="dedup",
        section="dedup",
        reads=("filter/kept.parquet",),
        writes=(
            Output("kept.parquet", "items"),
            Output("removed.parquet", "terminal"),
            Output("edges.parquet", "aux", "pipeline.dedup.stage:EDGE_SCHEMA"),
            Output("clusters.parquet", "aux", "pipeline.dedup.stage:CLUSTER_SCHEMA"),
            Output("oversized_buckets.parquet", "aux", "pipeline.dedup.stage:OVERSIZED_SCHEMA"),
            Output("index", "aux"),  # kept items' signatures + band keys, for later runs
        ),
        step=_ref("dedup.stage", "step"),
        key=_ref("dedup.stage", "key"),
        summary=_ref("dedup.stage", "print_summary"),
        code=("dedup",),  # the whole package: change sets and pair checks decide removals too
    ),
    Stage(
        name="decontaminate",
        section="decontaminate",
        reads=("dedup/kept.parquet",),
        writes=(
            Output("kept.parquet", "items"),
            Output("removed.parquet", "terminal"),
        ),
        step=_ref("decontaminate", "step"),
        key=_ref("decontaminate", "key"),
        summary=_ref("decontaminate", "print_summary"),
        code=("decontaminate.py", "dedup", "ingest", "schema.py", "secrets.py", "secret_rules.py"),
    ),
    Stage(
        name="shapes",
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
        code=("shapes", "dedup/clusters.py"),
    ),
    Stage(
        name="export",
        section="export",
        reads=("shapes/kept.parquet", "shapes/shapes.parquet", "dedup/clusters.parquet"),
        writes=(
            Output("train.parquet", "terminal"),
            Output("validation.parquet", "terminal"),
            Output("test.parquet", "terminal"),
            Output("hf", "aux"),
            Output("README.md", "aux"),
        ),
        step=_ref("export.stage", "step"),
        summary=_ref("export.stage", "print_summary"),
        code=("export", "template.py", "verify.py", "dedup/clusters.py", "shapes/normalise.py"),
    ),
)

NAMES = tuple(s.name for s in PIPELINE)


def by_name(name: str, stages: tuple[Stage, ...] = PIPELINE) -> Stage:
    for s in stages:
        if s.name == name:
            return s
    raise KeyError(name)

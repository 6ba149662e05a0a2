"""The config as pydantic models, one per section: types, ranges and cross-field rules, and the
errors a bad value raises.

Every rule a stage relies on lives here, so a bad value anywhere fails when the file is loaded,
before any stage runs. A rule that needs the data or the file system (a rules file, a model
folder, a source path) stays with the stage that reads it.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from pipeline import linear, storage
from pipeline.config.vocab import (
    ITEM_FIELDS,
    RANK_KEY_NAMES,
    TABLE_FORMATS,
    TEXT_FIELDS,
    TRANSFORM_NAMES,
    Device,
    ExportFormat,
    ExportScope,
    ShapePolicy,
    ShapeScope,
    ShingleMode,
    SourceKind,
    SplitBy,
)
from pipeline.errors import UsageError
from pipeline.ingest.base import DEFAULT_BOT_PATTERNS, bot_regex
from pipeline.storage import Location


class ConfigError(UsageError, ValueError):
    """A config that cannot be used; the message names the file and the key (exit 2)."""


class FieldProblem(ValueError):
    """Raised by a validator: `key` (relative to the model, dotted) is what the message is about."""

    def __init__(self, key: str, msg: str):
        super().__init__(msg)
        self.key = key


def each_in(values: list[str], allowed: tuple[str, ...], what: str) -> list[str]:
    """values, or FieldProblem at the first one not in allowed (its index is the key)."""
    for i, v in enumerate(values):
        if v not in allowed:
            raise FieldProblem(str(i), f"{v!r} is not {what}; use some of {', '.join(allowed)}")
    return values


def paths_listed(values: list[str], what: str) -> list[str]:
    """values, or FieldProblem at the first empty or repeated path."""
    seen: set[str] = set()
    for i, v in enumerate(values):
        if not v.strip():
            raise FieldProblem(str(i), f"an empty path; give {what}")
        if v in seen:
            raise FieldProblem(str(i), f"{v!r} is listed twice")
        seen.add(v)
    return values


def text_fields(values: list[str]) -> list[str]:
    """values, or FieldProblem at the first that is not a text field or is repeated."""
    return paths_listed(each_in(values, TEXT_FIELDS, "a text field"), "a text field")


class Section(BaseModel):
    """Frozen, no unknown keys, no silent coercion ("5" is not an integer, 1 not a bool)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
    # keys that change how the work is cut up, never its result: left out of the stage's
    # fingerprint, so changing them neither reruns the stage nor changes an output byte
    NOT_FINGERPRINTED: ClassVar[frozenset[str]] = frozenset()


_BUILDER_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def _item_field_keys(keys: Any) -> None:
    for k in keys:
        if k not in ITEM_FIELDS:
            close = difflib.get_close_matches(k, ITEM_FIELDS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise FieldProblem(k, f"not an item field{hint}; item fields: {', '.join(ITEM_FIELDS)}")


class SourceConfig(Section):
    """One input. `kind` picks the reader; the other keys are that reader's options."""

    kind: SourceKind
    path: str = Field(min_length=1)
    name: str = ""  # the `source` column; default: the file or folder name
    # table: auto | jsonl | json | csv | parquet. hf: disk (load_from_disk) or a
    # `load_dataset` builder for local files (json, csv, parquet, text ...).
    format: str = "auto"
    # item field -> input field (dotted for nested objects: "user.login"); table and hf.
    fields: dict[str, str] = Field(default_factory=dict)
    # item field -> a named transform of the mapped value (see ingest/mapping.py).
    transforms: dict[str, str] = Field(default_factory=dict)
    # item field -> a constant, used where the record has no value ("repo" for a file).
    defaults: dict[str, str] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=lambda: ["before", "after"])
    csv_delimiter: str = ","
    # hf: which split(s) of a DatasetDict; "" = all, in sorted order.
    split: str = ""
    data_files: list[str] = Field(default_factory=list)  # hf with a builder
    # git
    rev: str = "HEAD"
    max_commits: int = Field(default=0, ge=0)  # 0 = all
    max_hunk_lines: int = Field(default=400, ge=0)  # a hunk with more changed lines is skipped
    context_lines: int = Field(default=3, ge=0)
    repo: str = ""  # git/codereviewer: the repo name; git default: the folder name

    def display_name(self) -> str:
        return self.name or Path(self.path).name

    @field_validator("fields", "defaults")
    @classmethod
    def _item_keys(cls, v: dict[str, str]) -> dict[str, str]:
        _item_field_keys(v)
        return v

    @field_validator("fields")
    @classmethod
    def _input_names(cls, v: dict[str, str]) -> dict[str, str]:
        for k, src in v.items():
            if not src.strip():
                raise FieldProblem(k, "the input field name is empty")
        return v

    @field_validator("transforms")
    @classmethod
    def _transforms(cls, v: dict[str, str]) -> dict[str, str]:
        _item_field_keys(v)
        for k, name in v.items():
            if name not in TRANSFORM_NAMES:
                m = f"{name!r} is not a transform; use one of {', '.join(TRANSFORM_NAMES)}"
                raise FieldProblem(k, m)
        return v

    @field_validator("required")
    @classmethod
    def _required(cls, v: list[str]) -> list[str]:
        return each_in(v, ITEM_FIELDS, "an item field")

    @field_validator("csv_delimiter")
    @classmethod
    def _delimiter(cls, v: str) -> str:
        if len(v) != 1 or v in '"\r\n':
            raise ValueError(f"{v!r}: must be one character (not a quote or a line break)")
        return v

    @model_validator(mode="after")
    def _format(self) -> SourceConfig:
        f = self.format
        if self.kind == "table" and f not in TABLE_FORMATS:
            raise FieldProblem(
                "format", f"{f!r} is not a table format; use one of {', '.join(TABLE_FORMATS)}"
            )
        if self.kind == "hf" and not _BUILDER_RE.fullmatch(f):
            raise FieldProblem(
                "format", f"{f!r}: use disk, auto or a datasets builder (json, csv, parquet ...)"
            )
        if self.kind not in ("table", "hf") and f != "auto":
            raise FieldProblem("format", f"{f!r}: only table and hf sources take a format")
        return self


class IngestConfig(Section):
    NOT_FINGERPRINTED = frozenset({"shard_bytes"})
    sources: list[SourceConfig] = Field(default_factory=list)
    # the folder a source's relative path is read from (itself relative to the config's
    # folder); "": the config's folder. One `--set ingest.root=...` moves every source
    root: str = ""
    batch_size: int = Field(default=10_000, ge=1)
    # a longer input line or record is an error record; bounded: the readers take it as a
    # buffer size, and 2**63 - 1 overflowed one (exit 1, "internal error")
    max_record_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1,
        le=1 << 30,
        description="a longer record is an error record, not an item",
    )
    # bigger JSON-lines files / Parquet tables are read in pieces this big (ingest/shards.py)
    shard_bytes: int = Field(default=64 * 1024 * 1024, ge=1)
    bot_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_BOT_PATTERNS))
    # the secret-scan work one item may take (pipeline.secrets.finding's Budget: characters
    # scanned per rule, 4,096 a match; counted, not timed): an item over it makes its record
    # an error record. 1e9 is about 3 s at worst (a text dense with matches: 1-3 ns a unit),
    # far more than any real record needs
    record_scan_budget: int = Field(default=1_000_000_000, ge=1)

    @field_validator("bot_patterns")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        # matched on RE2 (linear in the name): a pattern only Python's backtracking `re` runs
        # (look-around, backreference) is refused here, never run there
        for i, p in enumerate(v):
            why = linear.problem(p, re.I)
            if why:
                raise FieldProblem(str(i), f"{p!r} is not a regular expression RE2 runs: {why}")
        why = linear.problem(bot_regex(v), re.I) if v else None
        if why:
            raise ValueError(f"the patterns together cannot run on RE2: {why}")
        return v

    @model_validator(mode="after")
    def _distinct_names(self) -> IngestConfig:
        seen: set[str] = set()
        for i, s in enumerate(self.sources):
            n = s.display_name()
            if n in seen:
                m = f"two sources are both named {n!r}; give each a distinct `name`"
                raise FieldProblem(f"sources.{i}.name", m)
            seen.add(n)
        return self


class FilterConfig(Section):
    """The filter stage (pipeline/filter/)."""

    rules: str = Field(default="default", min_length=1)  # a rule set in rules/, or a YAML path
    batch_size: int = Field(default=100_000, ge=1)  # items per batch: bounds memory only


MAX_PERM = 4096  # dedup.num_perm
MAX_BANDS = 512  # dedup.bands: one open working file each
MAX_WINDOW = 1 << 20  # shapes.window


class DedupConfig(Section):
    """The dedup and tune stages (pipeline/dedup/)."""

    NOT_FINGERPRINTED = frozenset({"driver_edges"})

    # exact shingle Jaccard at or above which two items are duplicates
    threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    # ... and what each edit removes, what it puts in, and each side's text (dedup/change.py)
    # each at or above this Jaccard, so two edits of one line, or two that share one side, or
    # an edit and its reverse, are not duplicates; 0 = off; needs before+after
    change_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    # Item text fields shingled; each shingle is tagged with its field, the set is the union.
    # Default: the edit itself. Path and comment (often the commit subject) dominate small
    # hunks and merged distinct edits of one commit; add them back here if wanted.
    fields: list[str] = Field(default_factory=lambda: ["before", "after"], min_length=1)
    shingle: ShingleMode = "tokens"  # tokens (code-aware \w+|[^\w\s]) or chars (code points)
    ngram: int = Field(default=5, ge=1)  # tokens (or chars) per shingle
    # MinHash permutations (datasketch affine32): every item's signature holds num_perm uint32
    num_perm: int = Field(
        default=256,
        ge=1,
        le=MAX_PERM,
        description="each item's signature holds num_perm 32-bit values",
    )
    seed: int = Field(default=1, ge=0, lt=1 << 32)  # permutation seed, as datasketch.MinHash
    # LSH bands x rows: 32 x 8 gives P(J=0.8) = 0.997. Each band is a working file held open
    # while items are scanned, so bands stays well under the usual open-file limit (1024)
    bands: int = Field(
        default=32,
        ge=1,
        le=MAX_BANDS,
        description="each band is a working file dedup holds open",
    )
    rows: int = Field(default=8, ge=1)
    # A band bucket with more items is scanned pairwise on signatures instead of expanded to
    # all its pairs; one with more than max_bucket items is skipped and reported.
    bucket_cap: int = Field(default=64, ge=2)
    max_bucket: int = 20_000
    # verified pairs at or above this go to edges.parquet (for tune)
    edge_floor: float = Field(default=0.5, gt=0.0, le=1.0)
    # Which item of a cluster is kept: rank keys in order, "-" = largest first; ties then
    # broken by id, source, source_ref. Keys: comment_len, after_len, lines_changed,
    # created_at (nulls last), path_depth (folders in the path: of one edit copied to several
    # files in one commit, the shallowest is kept), human, id.
    keeper: list[str] = Field(
        default_factory=lambda: ["-comment_len", "created_at", "path_depth", "id"]
    )
    batch_size: int = Field(default=100_000, ge=1)  # items shingled and MinHashed per batch
    # run.executor = "ray": past this many candidate pairs from the bands, the pairs stay on
    # Ray through verification and clustering (the driver holds none); the same result
    driver_edges: int = Field(default=50_000_000, ge=0)
    # Earlier run folders (relative to the config's folder) whose dedup index (dedup/index/)
    # new items are matched against: a duplicate of an indexed item is removed, with it as
    # keeper. Indexed items are never removed or re-emitted. List every earlier run.
    against: list[str] = Field(default_factory=list)
    # Write dedup/index/ (the kept items' text and band keys) for a later run to name in its
    # `against`: about 0.4 KB per kept item, the most of the stage's folder, and a sixth of its
    # time, so only when asked for. A run with `against` writes its own whatever this says (an
    # incremental chain goes on).
    index: bool = False

    @field_validator("against")
    @classmethod
    def _against(cls, v: list[str]) -> list[str]:
        return paths_listed(v, "an earlier run folder")

    @field_validator("fields")
    @classmethod
    def _fields(cls, v: list[str]) -> list[str]:
        return text_fields(v)

    @field_validator("keeper")
    @classmethod
    def _keeper(cls, v: list[str]) -> list[str]:
        for i, k in enumerate(v):
            if k.removeprefix("-") not in RANK_KEY_NAMES:
                m = f"{k!r} is not a rank key; use {', '.join(RANK_KEY_NAMES)}"
                raise FieldProblem(str(i), f"{m} ('-' = largest first)")
        return v

    @model_validator(mode="after")
    def _lsh(self) -> DedupConfig:
        if (br := self.bands * self.rows) > self.num_perm:
            m = f"bands x rows = {self.bands} x {self.rows} = {br} must fit in num_perm"
            raise FieldProblem("bands", f"{m} ({self.num_perm})")
        if self.max_bucket < self.bucket_cap:
            m = f"must be >= bucket_cap ({self.bucket_cap}), got {self.max_bucket}"
            raise FieldProblem("max_bucket", m)
        return self

    @property
    def writes_index(self) -> bool:
        """Whether the dedup stage writes dedup/index/: asked for, or an incremental run."""
        return self.index or bool(self.against)

    @property
    def checks_change(self) -> bool:
        """Whether a duplicate must also make the same change (before and after shingled)."""
        return self.change_threshold > 0 and {"before", "after"} <= set(self.fields)


class DecontaminateConfig(Section):
    """The decontaminate stage (pipeline/decontaminate.py), between dedup and shapes.

    Items are shingled, MinHashed and banded exactly as [dedup] says (shingle, ngram,
    num_perm, seed, bands, rows, bucket_cap, max_bucket); only the fields and the threshold
    are this section's own. An empty `against` makes the stage a pass-through.
    """

    # Benchmark files (relative to the config's folder): any table format ingest reads
    # (JSON lines, a JSON array, CSV/TSV, Parquet, gzip detected), in the item's field names.
    against: list[str] = Field(default_factory=list)
    # exact shingle Jaccard to a benchmark item at or above which an item is removed
    threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    fields: list[str] = Field(default_factory=lambda: ["before", "after"], min_length=1)

    @field_validator("against")
    @classmethod
    def _against(cls, v: list[str]) -> list[str]:
        return paths_listed(v, "a benchmark file")

    @field_validator("fields")
    @classmethod
    def _fields(cls, v: list[str]) -> list[str]:
        return text_fields(v)


class ShapesConfig(Section):
    """The shapes stage (pipeline/shapes/)."""

    policy: ShapePolicy = "annotate"  # annotate (group columns) | cap (keep k per group) | spread
    scope: ShapeScope = "repo"  # the groups cap and spread act on: change | repo | corpus | edit
    # Put the file path in the group key (per-file groups; file-name groups at corpus scope).
    # Default false: the same edit made in several files of a change or repo is one group.
    path_in_key: bool = False
    cap_digit_only: int = Field(default=1, ge=1)  # cap: items kept per digit-only group
    cap_other: int = Field(default=2, ge=1)  # cap: items kept per other group
    context_key: bool = False  # add the nearest context line to the group key
    # spread: items per window (micro-batch x accum)
    window: int = Field(
        default=16,
        ge=1,
        le=MAX_WINDOW,
        description="items per training window: micro-batch x gradient accumulation",
    )
    seed: int = Field(default=0, ge=0, lt=1 << 32)  # spread: seed of the batch order


def iso_cutoff(after: str) -> datetime:
    """export.after as a datetime (naive = UTC is the caller's business)."""
    return datetime.fromisoformat(after)


_LICENSE_ID_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")


def link_problem(link: str) -> str | None:
    """What keeps `link` from being a dataset card's license_link (None: nothing): an http(s)
    URL with a host, or a relative path that stays inside the dataset repository."""
    if any(c.isspace() for c in link) or "\\" in link:
        return "has a space or a backslash"
    if "://" in link:
        scheme = link.partition("://")[0]
        if scheme.lower() not in ("http", "https"):
            return f"the scheme {scheme}:// is not http(s)"
        if not urlsplit(link).netloc:
            return "a URL without a host"
        return None
    if ":" in link:
        return "a ':' in a path (a URL starts http:// or https://)"
    if link.startswith(("/", "~")) or ".." in link.split("/"):
        return "a path outside the dataset repository"
    return None


class ExportConfig(Section):
    """The export stage (pipeline/export/)."""

    # change (whole changes: every hunk of a commit in one split) | ratio (seeded, whole groups;
    # a change may span splits) | repo (whole repos) | time
    split_by: SplitBy = "change"
    ratios: list[float] = Field(default_factory=lambda: [0.9, 0.05, 0.05])  # train/val/test
    seed: int = Field(default=0, ge=0, lt=1 << 32)  # seed of the group order of the splits
    scope: ExportScope = "repo"  # shape groups kept in one split
    after: str = ""  # time: ISO date; a group with an item at or after it goes to test
    format: ExportFormat = "plain"  # plain | sft (adds prompt, completion: pipeline/template.py)
    license: str = Field(default="other", min_length=1)  # the dataset card's `license`
    # license = "other" (the Hub lists no such license): the card's license_name, a short
    # lowercase id ("" = unknown, and the card asks for one: mined code is under its
    # repositories' own licenses) and license_link, an http(s) URL or a path in the dataset
    # repository such as LICENSE ("" = none). Not written for any other license.
    license_name: str = ""
    license_link: str = ""

    @field_validator("ratios")
    @classmethod
    def _ratios(cls, v: list[float]) -> list[float]:
        if len(v) != 3 or not all(x >= 0 for x in v) or not abs(sum(v) - 1) <= 1e-6:
            raise ValueError(f"three shares (train, validation, test) >= 0 summing to 1, got {v}")
        return v

    @field_validator("license_name")
    @classmethod
    def _license_name(cls, v: str) -> str:
        if v and not _LICENSE_ID_RE.fullmatch(v):
            raise ValueError(
                f"{v!r}: must be a short id of lowercase letters, digits, '.', '-' and '_' "
                "(no spaces), e.g. my-license-1.0"
            )
        return v

    @field_validator("license_link")
    @classmethod
    def _license_link(cls, v: str) -> str:
        if v and (why := link_problem(v)):
            raise ValueError(
                f"{v!r}: {why}; give an http(s) URL or a path in the dataset repository "
                "(LICENSE, licenses/code.md)"
            )
        return v

    @model_validator(mode="after")
    def _after(self) -> ExportConfig:
        if self.split_by == "time":
            try:
                iso_cutoff(self.after)
            except ValueError:
                raise FieldProblem(
                    "after", f"{self.after!r}: time splits need an ISO date, e.g. 2024-06-01"
                ) from None
        return self


class SmokeConfig(Section):
    """The smoke-train command (pipeline/train/); not part of `editcurate run`."""

    model: str = ""  # a local HF checkpoint folder; "" = the tiny byte-level model
    lr: float = Field(default=2e-4, gt=0)  # AdamW learning rate
    micro_batch: int = Field(default=1, ge=1)  # items per forward/backward
    grad_accum: int = Field(default=16, ge=1)  # micro-batches per optimizer step
    max_len: int = Field(default=1024, ge=1)  # tokens per item after truncation
    seed: int = Field(default=0, ge=0, lt=1 << 32)  # init, LoRA and (no batch_order) order
    warmup: float = Field(default=0.1, ge=0, le=1)  # fraction of steps with a linear warmup
    schedule: str = Field(default="cosine", pattern="^(cosine|linear)$")  # decay to 0.1 x lr
    grad_checkpointing: bool = False  # activation checkpointing: less memory, more compute
    clip: float = Field(default=1.0, gt=0)  # grad-norm clip, applied only after the finite check
    skip_budget: float = Field(default=0.01, ge=0, le=1)  # more skipped (non-finite): fails
    lora_r: int = Field(default=16, ge=1)
    lora_alpha: int = Field(default=32, ge=1)
    exclude_bad: bool = True  # leave out zero-supervision and truncated-target items
    eval_items: int = Field(default=32, ge=0)  # items generated for edit similarity (greedy)
    max_new_tokens: int = Field(default=128, ge=1)  # generation length cap
    probe_batch: int = Field(default=0, ge=0)  # K > 0: probe K-item batches, bisect bad ones
    device: Device = "auto"  # auto (cuda when available) | cpu | cuda


class RunConfig(Section):
    name: str = "default"
    root: str = Field(default="data/runs", min_length=1)  # relative to the config's folder
    executor: Literal["local", "ray"] = "local"  # who runs map steps (pipeline/executors)
    ray_address: str = ""  # ray: a cluster to join ("" = start a local instance)
    num_cpus: int = Field(default=2, ge=1)  # ray: CPUs of the local instance
    # options of the filesystem that reads URL inputs (s3://, gs:// ...; pipeline/storage.py),
    # passed as given: {endpoint_url = "http://minio:9000"}, {anon = true} ... Credentials
    # and endpoints come from the standard sources (AWS_* variables) unless given here.
    storage_options: dict[str, Any] = Field(default_factory=dict)
    # rows per Parquet part of every stage output (pipeline/parts.py)
    part_rows: int = Field(default=1 << 18, ge=1)
    # the folder relative paths are read from; "" = the config file's folder. The copy of the
    # config a run folder keeps (RUN_DIR/config.toml) sets it, so it loads from anywhere.
    base_dir: str = ""

    @field_validator("name")
    @classmethod
    def _plain_name(cls, n: str) -> str:
        if n in ("", ".", "..") or any(c in n for c in "/\\\0") or n != n.strip():
            raise ValueError(
                f"{n!r}: must be a plain folder name inside run.root "
                "(no '/', '\\', '..', or surrounding spaces)"
            )
        return n


class Config(Section):
    run: RunConfig = Field(default_factory=RunConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    filter: FilterConfig = Field(default_factory=FilterConfig)
    dedup: DedupConfig = Field(default_factory=DedupConfig)
    decontaminate: DecontaminateConfig = Field(default_factory=DecontaminateConfig)
    shapes: ShapesConfig = Field(default_factory=ShapesConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)
    smoke: SmokeConfig = Field(default_factory=SmokeConfig)
    # Folder that relative paths are resolved against (the config file's); not fingerprinted
    # and not compared.
    _base_dir: str = PrivateAttr(default=".")

    @property
    def base_dir(self) -> str:
        return self.run.base_dir or self._base_dir

    def with_base_dir(self, base: str | Path) -> Config:
        c = self.model_copy()
        c._base_dir = str(base)
        return c

    def resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else Path(os.path.normpath(Path(self.base_dir) / p))

    @property
    def run_root(self) -> Location:
        """run.root: a local folder, or a prefix in object storage (a URL)."""
        if storage.is_url(self.run.root):
            return storage.run_root(self.run.root, self.run.storage_options)
        return self.resolve(self.run.root)

    @property
    def run_dir(self) -> Location:
        return self.run_root / self.run.name

    def section(self, name: str) -> dict[str, Any]:
        if name not in SECTIONS:
            raise KeyError(name)
        model: BaseModel = getattr(self, name)
        return model.model_dump(mode="json")

    def fingerprint(self, section: str | None = None) -> str:
        """sha256 of the canonical text of one section (less its NOT_FINGERPRINTED keys),
        or of the whole config."""
        data = self.canonical()
        if section:
            data = self.section(section)
            for k in getattr(self, section).NOT_FINGERPRINTED:
                data.pop(k, None)
        return hashlib.sha256(canonical_text(data).encode()).hexdigest()[:16]

    def canonical(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self.canonical() == other.canonical()

    __hash__ = None  # type: ignore[assignment]


# the config's sections, in order: run, one per stage (Stage.section), smoke
SECTIONS: tuple[str, ...] = tuple(Config.model_fields)


def canonical_text(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

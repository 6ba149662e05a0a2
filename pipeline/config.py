"""One typed config for the whole pipeline: a TOML file plus `--set key=value` overrides.

The canonical text of a section (sorted-key JSON) is its fingerprint, so a stage can tell
whether what it was configured with has changed since it last ran.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from pipeline.errors import UsageError
from pipeline.ingest.base import DEFAULT_BOT_PATTERNS
from pipeline.schema import ITEM_SCHEMA


class ConfigError(UsageError, ValueError):
    """A config that cannot be used; the message names the file and the key (exit 2)."""


SOURCE_KINDS = ("table", "github", "codereviewer", "git", "hf")
# Item fields a source may map, default or transform: the schema's, less those ingest sets.
ITEM_FIELDS = tuple(n for n in ITEM_SCHEMA.names if n not in ("id", "source", "source_ref"))


@dataclass(frozen=True)
class SourceConfig:
    """One input. `kind` picks the reader; the other keys are that reader's options."""

    kind: str
    path: str
    name: str = ""  # the `source` column; default: the file or folder name
    # table: auto | jsonl | json | csv | parquet. hf: disk (load_from_disk) or a
    # `load_dataset` builder for local files (json, csv, parquet, text ...).
    format: str = "auto"
    # item field -> input field (dotted for nested objects: "user.login"); table and hf.
    fields: dict[str, str] = field(default_factory=dict)
    # item field -> a named transform of the mapped value (see ingest/mapping.py).
    transforms: dict[str, str] = field(default_factory=dict)
    # item field -> a constant, used where the record has no value ("repo" for a file).
    defaults: dict[str, str] = field(default_factory=dict)
    required: list[str] = field(default_factory=lambda: ["before", "after"])
    csv_delimiter: str = ","
    # hf: which split(s) of a DatasetDict; "" = all, in sorted order.
    split: str = ""
    data_files: list[str] = field(default_factory=list)  # hf with a builder
    # git
    rev: str = "HEAD"
    max_commits: int = 0  # 0 = all
    max_hunk_lines: int = 400  # a hunk with more changed lines is skipped and counted
    context_lines: int = 3
    repo: str = ""  # git/codereviewer: the repo name; git default: the folder name

    def display_name(self) -> str:
        return self.name or Path(self.path).name


@dataclass(frozen=True)
class IngestConfig:
    sources: list[SourceConfig] = field(default_factory=list)
    batch_size: int = 10_000
    max_record_bytes: int = 8 * 1024 * 1024
    bot_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_BOT_PATTERNS))


@dataclass(frozen=True)
class FilterConfig:
    """The filter stage (pipeline/filter/)."""

    rules: str = "default"  # a rule set in rules/ by name, or a path to a YAML rules file
    batch_size: int = 100_000  # items per batch: bounds memory, does not change the result


@dataclass(frozen=True)
class DedupConfig:
    """The dedup and tune stages (pipeline/dedup/)."""

    threshold: float = 0.8  # exact shingle Jaccard at or above which two items are duplicates
    # Item text fields shingled; each shingle is tagged with its field, the set is the union.
    # Default: the edit itself. Path and comment (often the commit subject) dominate small
    # hunks and merged distinct edits of one commit; add them back here if wanted.
    fields: list[str] = field(default_factory=lambda: ["before", "after"])
    shingle: str = "tokens"  # tokens (code-aware \w+|[^\w\s]) or chars (code points)
    ngram: int = 5  # tokens (or chars) per shingle; a shorter field gives one shingle of all
    num_perm: int = 256  # MinHash permutations (datasketch affine32 scheme)
    seed: int = 1  # permutation seed, as datasketch.MinHash(seed=...)
    bands: int = 32  # LSH bands x rows: 32 x 8 gives P(candidate | J=0.8) = 0.997
    rows: int = 8
    # A band bucket with more items is scanned pairwise on signatures instead of expanded to
    # all its pairs; one with more than max_bucket items is skipped and reported.
    bucket_cap: int = 64
    max_bucket: int = 20_000
    edge_floor: float = 0.5  # verified pairs at or above this go to edges.parquet (for tune)
    # Which item of a cluster is kept: rank keys in order, "-" = largest first; ties then
    # broken by id, source, source_ref. Keys: comment_len, after_len, lines_changed,
    # created_at (nulls last), human, id.
    keeper: list[str] = field(default_factory=lambda: ["-comment_len", "created_at", "id"])
    batch_size: int = 100_000  # items shingled and MinHashed per batch


@dataclass(frozen=True)
class ShapesConfig:
    """The shapes stage (pipeline/shapes/)."""

    policy: str = "annotate"  # annotate (add group columns) | cap (keep k per group) | spread
    scope: str = "repo"  # the groups cap and spread act on: change | repo | corpus | edit
    # Put the file path in the group key (per-file groups; file-name groups at corpus scope).
    # Default false: the same edit made in several files of a change or repo is one group.
    path_in_key: bool = False
    cap_digit_only: int = 1  # cap: items kept per digit-only group (version/SHA bumps)
    cap_other: int = 2  # cap: items kept per other group
    context_key: bool = False  # add the nearest context line to the group key
    window: int = 16  # spread: items per window (micro-batch x grad accumulation)
    seed: int = 0  # spread: seed of the batch order


@dataclass(frozen=True)
class ExportConfig:
    """The export stage (pipeline/export.py)."""

    split_by: str = "ratio"  # ratio (seeded, whole groups) | repo (whole repos) | time
    ratios: list[float] = field(default_factory=lambda: [0.9, 0.05, 0.05])  # train/val/test
    seed: int = 0  # seed of the group order the splits are dealt from
    scope: str = "repo"  # shape groups kept in one split: change | repo | corpus | none
    after: str = ""  # time: ISO date; a group with an item at or after it goes to test
    format: str = "plain"  # plain | sft (adds prompt, completion: pipeline/template.py)


@dataclass(frozen=True)
class SmokeConfig:
    """The smoke-train command (pipeline/train/); not part of `editcurate run`."""

    model: str = ""  # a local HF checkpoint folder; "" = the tiny byte-level model
    lr: float = 2e-4  # AdamW learning rate
    micro_batch: int = 1  # items per forward/backward
    grad_accum: int = 16  # micro-batches per optimizer step
    max_len: int = 1024  # tokens per item after truncation
    seed: int = 0  # model init, LoRA init and (without batch_order) the item order
    warmup: float = 0.1  # fraction of steps with a linear lr warmup
    clip: float = 1.0  # grad-norm clip, applied only after the finite check
    skip_budget: float = 0.01  # more skipped (non-finite) items than this fraction: fails
    lora_r: int = 16
    lora_alpha: int = 32
    exclude_bad: bool = True  # leave out zero-supervision and truncated-target items
    eval_items: int = 32  # items generated for edit similarity (greedy)
    max_new_tokens: int = 128  # generation length cap
    probe_batch: int = 0  # K > 0: probe K-item batches and bisect the non-finite ones
    device: str = "auto"  # auto (cuda when available) | cpu | cuda


@dataclass(frozen=True)
class RunConfig:
    name: str = "default"
    root: str = "data/runs"  # relative to the config file's folder when relative


@dataclass(frozen=True)
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    ingest: IngestConfig = field(default_factory=IngestConfig)
    filter: FilterConfig = field(default_factory=FilterConfig)
    dedup: DedupConfig = field(default_factory=DedupConfig)
    shapes: ShapesConfig = field(default_factory=ShapesConfig)
    export: ExportConfig = field(default_factory=ExportConfig)
    smoke: SmokeConfig = field(default_factory=SmokeConfig)
    # Folder that relative paths are resolved against (the config file's); not fingerprinted.
    base_dir: str = field(default=".", compare=False)

    def resolve(self, path: str) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else Path(os.path.normpath(Path(self.base_dir) / p))

    @property
    def run_dir(self) -> Path:
        return self.resolve(self.run.root) / self.run.name

    def section(self, name: str) -> dict[str, Any]:
        return dataclasses.asdict(getattr(self, name))

    def fingerprint(self, section: str | None = None) -> str:
        """sha256 of the canonical text of one section, or of the whole config."""
        data = self.section(section) if section else self.canonical()
        return hashlib.sha256(canonical_text(data).encode()).hexdigest()[:16]

    def canonical(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("base_dir")
        return d


def canonical_text(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Read a TOML config, apply `a.b=value` overrides (values parsed as TOML), validate."""
    data: dict[str, Any] = {}
    where = "<defaults>"
    base = Path.cwd()
    if path is not None:
        p = Path(path)
        where = str(p)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{p}: config file not found") from None
        except IsADirectoryError:
            raise ConfigError(f"{p}: is a folder, not a config file") from None
        except UnicodeDecodeError as e:
            raise ConfigError(f"{p}: not UTF-8 text (byte {e.start}): not a TOML config") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{p}: invalid TOML: {e}") from None
        base = p.resolve().parent
    for ov in overrides or []:
        try:
            _apply_override(data, ov)
        except ConfigError:
            raise
        except (KeyError, IndexError, ValueError, TypeError):
            raise ConfigError(f"override {ov!r}: no such key path in the config") from None
    cfg = _build(Config, data, where, "")
    return dataclasses.replace(cfg, base_dir=str(base))


def _apply_override(data: dict[str, Any], text: str) -> None:
    if "=" not in text:
        raise ConfigError(f"override {text!r}: expected KEY=VALUE, e.g. ingest.batch_size=5000")
    key, raw = text.split("=", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # a bare word: take it as a string
    parts = key.strip().split(".")
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        if isinstance(node, list):
            node = node[int(part)]
            continue
        if part not in node:
            node[part] = [] if nxt.isdigit() else {}
        node = node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def _build(cls: type, data: Any, where: str, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: [{prefix or 'top level'}] must be a table")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.name != "base_dir"}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key '{prefix}{unknown[0]}'; allowed: {', '.join(sorted(names))}"
        )
    kwargs = {}
    for name in names:
        if name in data:
            kwargs[name] = _coerce(hints[name], data[name], where, f"{prefix}{name}")
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.name not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise ConfigError(f"{where}: [{prefix.rstrip('.') or 'top level'}] needs {missing[0]!r}")
    obj = cls(**kwargs)
    _validate(obj, where, prefix)
    return obj


def _coerce(tp: Any, value: Any, where: str, key: str) -> Any:
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _build(tp, value, where, key + ".")
    if origin is list:
        (inner,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: {key} must be a list, got {type(value).__name__}")
        return [_coerce(inner, v, where, f"{key}.{i}") for i, v in enumerate(value)]
    if origin is dict:
        _, vt = typing.get_args(tp)
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: {key} must be a table, got {type(value).__name__}")
        return {str(k): _coerce(vt, v, where, f"{key}.{k}") for k, v in value.items()}
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        return _coerce(next(a for a in args if a is not type(None)), value, where, key)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: {key} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: {key} must be a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: {key} must be a string, got {value!r}")
        return value
    return value


def _validate(obj: Any, where: str, prefix: str) -> None:
    if isinstance(obj, RunConfig):
        n = obj.name
        if n in ("", ".", "..") or any(c in n for c in "/\\\0") or n != n.strip():
            raise ConfigError(
                f"{where}: run.name = {n!r}: must be a plain folder name inside run.root "
                "(no '/', '\\', '..', or surrounding spaces)"
            )
    if isinstance(obj, SourceConfig):
        if obj.kind not in SOURCE_KINDS:
            raise ConfigError(
                f"{where}: {prefix}kind = {obj.kind!r} is not a source kind; "
                f"use one of {', '.join(SOURCE_KINDS)}"
            )
        for table in ("fields", "transforms", "defaults"):
            for k in getattr(obj, table):
                if k not in ITEM_FIELDS:
                    raise ConfigError(
                        f"{where}: {prefix}{table}.{k}: not an item field; "
                        f"item fields: {', '.join(ITEM_FIELDS)}"
                    )
        if obj.kind == "table" and obj.format not in ("auto", "jsonl", "json", "csv", "parquet"):
            raise ConfigError(f"{where}: {prefix}format = {obj.format!r}: unknown table format")
    if isinstance(obj, FilterConfig) and obj.batch_size < 1:
        raise ConfigError(f"{where}: filter.batch_size must be >= 1")
    if isinstance(obj, IngestConfig):
        if obj.batch_size < 1:
            raise ConfigError(f"{where}: ingest.batch_size must be >= 1")
        names = [s.display_name() for s in obj.sources]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(
                f"{where}: two sources are both named {dup[0]!r}; give each a distinct `name`"
            )

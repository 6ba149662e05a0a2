"""The config's vocabulary: the values a key may take, named once for the models and the stages."""

from __future__ import annotations

from typing import Literal, get_args

from pipeline.schema import ITEM_SCHEMA
from pipeline.schema import TEXT_FIELDS as TEXT_FIELDS  # the item text (one home: schema)

SourceKind = Literal["table", "github", "codereviewer", "git", "hf"]
SOURCE_KINDS: tuple[str, ...] = get_args(SourceKind)
TABLE_FORMATS = ("auto", "jsonl", "json", "csv", "parquet")
# Named transforms of a mapped value (the functions are in pipeline/ingest/mapping.py).
TRANSFORM_NAMES = ("unrepr", "github_repo", "url_tail", "strip", "lower")
# Item fields a source may map, default or transform: the schema's, less those ingest sets.
ITEM_FIELDS = tuple(n for n in ITEM_SCHEMA.names if n not in ("id", "source", "source_ref"))
ShingleMode = Literal["tokens", "chars"]
# Keys a dedup keeper rank may use (pipeline/dedup/clusters.py RANK_KEYS); "-key" = descending.
RANK_KEY_NAMES = (
    "comment_len",
    "after_len",
    "lines_changed",
    "created_at",
    "path_depth",
    "human",
    "id",
)
ShapePolicy = Literal["annotate", "cap", "spread"]
ShapeScope = Literal["change", "repo", "corpus", "edit"]
SplitBy = Literal["ratio", "repo", "change", "time"]
ExportScope = Literal[ShapeScope, "none"]
ExportFormat = Literal["plain", "sft"]
Device = Literal["auto", "cpu", "cuda"]
SHINGLE_MODES: tuple[str, ...] = get_args(ShingleMode)
SHAPE_POLICIES: tuple[str, ...] = get_args(ShapePolicy)
SHAPE_SCOPES: tuple[str, ...] = get_args(ShapeScope)
SPLIT_BYS: tuple[str, ...] = get_args(SplitBy)
EXPORT_SCOPES: tuple[str, ...] = get_args(ExportScope)
EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)

"""The Arrow schema of an item and of the tables the stages write, and the item id.

One schema for every source, so that every later stage can rely on column names and types.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from typing import TypeVar

import orjson
import polars as pl
import pyarrow as pa

Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)
ID_HEX_CHARS = 24  # 96 bits: collision-free in practice far beyond 1e9 items
# An item's code-aware tokens, the one definition: dedup shingles on them, the filter and the
# report count them (Python `re` and polars' Rust regex agree on it)
TOKEN_PATTERN = r"\w+|[^\w\s]"

ITEM_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
        pa.field("source_ref", pa.string(), nullable=False),
        pa.field("repo", pa.string(), nullable=False),
        pa.field("change", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("language", pa.string(), nullable=False),
        pa.field("before", pa.string(), nullable=False),
        pa.field("after", pa.string(), nullable=False),
        pa.field("context", pa.string(), nullable=False),
        pa.field("comment", pa.string(), nullable=False),
        pa.field("author", pa.string(), nullable=True),
        pa.field("author_is_bot", pa.bool_(), nullable=False),
        pa.field("lines_removed", pa.int32(), nullable=False),
        pa.field("lines_added", pa.int32(), nullable=False),
        pa.field("created_at", pa.timestamp("us", tz="UTC"), nullable=True),
    ]
)
# What each column holds, one line each, for the dataset card's Fields table (export/card.py):
# the item's columns (ITEM_SCHEMA, above), then those the stages add on the way to export.
# Written once here; a test fails on an exported column without one.
COLUMN_DOCS = {
    "id": "content id: sha256 of repo, change, path, before, after and comment (24 hex digits)",
    "source": "the configured source the item was read from (ingest.sources name)",
    "source_ref": "where in the source: line, row or commit:path:hunk (#k: k-th item of a record)",
    "repo": "the repository, owner/name; empty when unknown",
    "change": "the commit or pull request the edit belongs to; empty when unknown",
    "path": "the file's path in the repository",
    "language": "the file's language (lower-case linguist name); empty when unknown",
    "before": "the code before the edit",
    "after": "the code after the edit",
    "context": "code around the edit, where the source has it; else empty",
    "comment": "the review comment that asked for the edit (git history: the commit subject)",
    "author": "who wrote the comment or commit; null when unknown",
    "author_is_bot": "true when the author is a bot (the source says so, or ingest.bot_patterns)",
    "lines_removed": "lines the edit removes (the source's count, else a line diff's)",
    "lines_added": "lines the edit adds (the source's count, else a line diff's)",
    "created_at": "when the comment or commit was made, UTC; null when unknown",
    # filter (filter/stage.py KEPT_SCHEMA)
    "flags": "names of the filter's flag rules that matched the item, in rule order",
    # shapes, policy annotate (shapes/group.py annotations); the per-scope ones below
    "shape_digit_only": "true when the edit changes only numbers, versions or hashes",
    # shapes, policy spread (shapes/stage.py)
    "batch_order": "training order that spreads a shape group's items over shapes.window",
    # export (export/stage.py): always, and with export.format = "sft"
    "export_group": "the item's export group (id, near duplicates, shape group ...): one split",
    "prompt": "the SFT prompt: path, review comment, context and the code before (template.py)",
    "completion": "the SFT target: the code after, with a trailing newline",
}
# Columns shapes' annotate policy adds once per scope, named <prefix><scope>.
SCOPED_COLUMN_DOCS = {
    "shape_group_": "the item's edit-shape group at scope {scope} (numbered per scope)",
    "shape_size_": "items in that shape group at scope {scope} (1: no other item has its shape)",
}


def column_doc(name: str) -> str:
    """A column's one-line description (COLUMN_DOCS, SCOPED_COLUMN_DOCS); "" if it has none."""
    if name in COLUMN_DOCS:
        return COLUMN_DOCS[name]
    for prefix, doc in SCOPED_COLUMN_DOCS.items():
        if name.startswith(prefix) and len(name) > len(prefix):
            return doc.format(scope=name.removeprefix(prefix))
    return ""


# Ingest's second output: every input record that gave no item, with why. `severity` tells a
# malformed record ("error") from a well-formed one that holds no review edit ("skip": a review
# comment without a suggestion, a binary file change ...).
# The item's text: its string fields, less the id and what ingest sets (source, source_ref).
# The one list: sources map them, rules match them, dedup may shingle them.
TEXT_FIELDS = tuple(
    f.name
    for f in ITEM_SCHEMA
    if f.type == pa.string() and f.name not in ("id", "source", "source_ref")
)
# Item text a secret could hide in: masked at ingest, before the first write (pipeline/secrets);
# source_ref too, as a git ref holds the file's path.
SECRET_FIELDS = ("source_ref", *TEXT_FIELDS)

ERROR_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("source_ref", pa.string(), nullable=False),
        pa.field("severity", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("raw", pa.string(), nullable=False),
    ]
)

ID_FIELDS = ("repo", "change", "path", "before", "after", "comment")

RAW_MAX_CHARS = 4096  # raw text kept in errors.parquet; enough to see what went wrong


def with_change_j(edges: Frame) -> Frame:
    """dedup's edges.parquet (a DataFrame or LazyFrame) with `change_j`: a run from before
    change sets had none, and every pair of it counts as the same change (1.0)."""
    if "change_j" in edges.collect_schema().names():
        return edges
    return edges.with_columns(change_j=pl.lit(1.0))


def item_id(repo: str, change: str, path: str, before: str, after: str, comment: str) -> str:
    """sha256 over the canonical JSON of the identifying fields: same content, same id anywhere."""
    canon = orjson.dumps([repo, change, path, before, after, comment])
    return hashlib.sha256(canon).hexdigest()[:ID_HEX_CHARS]


def record_key(source_ref: str) -> str:
    """The input record an item came from: a record giving several items suffixes `#k`."""
    return source_ref.split("#", 1)[0]


def truncate_raw(raw: str | bytes, limit: int = RAW_MAX_CHARS) -> str:
    if isinstance(raw, bytes):
        raw = raw[: limit * 4].decode("utf-8", errors="backslashreplace")
    if len(raw) > limit:
        return raw[:limit] + f"... [{len(raw) - limit} more chars]"
    return raw


# Extension -> language. Names follow GitHub linguist spelling, lower-cased.
_EXT_LANG = {
    ".py": "python",
    ".pyi": "python",
    ".ipynb": "jupyter",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".java": "java",
    ".kt": "kotlin",
    ".kts": "kotlin",
    ".scala": "scala",
    ".go": "go",
    ".rs": "rust",
    ".c": "c",
    ".h": "c",
    ".cc": "c++",
    ".cpp": "c++",
    ".cxx": "c++",
    ".hpp": "c++",
    ".hh": "c++",
    ".cs": "c#",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".m": "objective-c",
    ".sh": "shell",
    ".bash": "shell",
    ".zsh": "shell",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".json": "json",
    ".ini": "ini",
    ".cfg": "ini",
    ".xml": "xml",
    ".html": "html",
    ".htm": "html",
    ".css": "css",
    ".scss": "scss",
    ".md": "markdown",
    ".rst": "restructuredtext",
    ".txt": "text",
    ".sql": "sql",
    ".r": "r",
    ".lua": "lua",
    ".pl": "perl",
    ".dart": "dart",
    ".lock": "lockfile",
    ".gradle": "groovy",
    ".groovy": "groovy",
    ".tf": "hcl",
    ".proto": "protobuf",
    ".vue": "vue",
    ".svelte": "svelte",
    ".ex": "elixir",
    ".exs": "elixir",
    ".erl": "erlang",
    ".hs": "haskell",
    ".ml": "ocaml",
    ".jl": "julia",
    ".cu": "cuda",
    ".cmake": "cmake",
}
_NAME_LANG = {
    "dockerfile": "dockerfile",
    "makefile": "makefile",
    "cmakelists.txt": "cmake",
    "gemfile": "ruby",
    "rakefile": "ruby",
    "license": "text",
    "setup.cfg": "ini",
}
# Prose, not code: a "comment" line there is text (a Markdown heading, a doc's example output).
PROSE_LANGUAGES = ("", "markdown", "restructuredtext", "text")
# Languages whose line comments start with `#` (the rest: `//`), for the commented_code rule.
HASH_COMMENT_LANGUAGES = (
    "python",
    "shell",
    "yaml",
    "toml",
    "ruby",
    "perl",
    "r",
    "makefile",
    "cmake",
    "dockerfile",
    "elixir",
    "julia",
    "ini",
    "hcl",
    "jupyter",
)
# Aliases seen in source data (CodeReviewer's `lang`, NoFunEval's `pl`) -> our names.
_LANG_ALIASES = {
    "py": "python",
    "js": "javascript",
    "ts": "typescript",
    "cpp": "c++",
    "cxx": "c++",
    "csharp": "c#",
    "cs": "c#",
    "rb": "ruby",
    "golang": "go",
    "kt": "kotlin",
    "objc": "objective-c",
    "sh": "shell",
    "bash": "shell",
    "yml": "yaml",
}


@lru_cache(maxsize=65536)  # paths repeat a lot in a corpus
def language_from_path(path: str) -> str:
    """Language by file name, then extension; "" when unknown."""
    name = os.path.basename(path).lower()
    if name in _NAME_LANG:
        return _NAME_LANG[name]
    if name.startswith("dockerfile"):
        return "dockerfile"
    _, ext = os.path.splitext(name)
    return _EXT_LANG.get(ext, "")


def normalise_language(lang: str) -> str:
    lang = lang.strip().lower()
    return _LANG_ALIASES.get(lang, lang)


CHANGE_COLUMNS = ["repo", "change"]  # a change: its repository and its commit / pull request


def known(columns: list[str]) -> pl.Expr:
    """Every one of `columns` non-empty (a key with an empty part is no key: items of
    unknown change are not one change)."""
    return pl.all_horizontal((pl.col(c).fill_null("") != "") for c in columns)

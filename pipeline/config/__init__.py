"""One typed config for the whole pipeline: a TOML file plus `--set key=value` overrides.

Each section is a frozen pydantic model (models.py) validated when the file is loaded
(load.py), so a bad value anywhere fails before any stage runs, with one line naming the file
and the key. The canonical text of a section (sorted-key JSON of its values) is its
fingerprint, so a stage can tell whether what it was configured with has changed.
"""

from __future__ import annotations

from pipeline.config import toml_out
from pipeline.config.load import apply_override, load_config, parse_value, updated, validate
from pipeline.config.models import (
    SECTIONS,
    Config,
    ConfigError,
    DecontaminateConfig,
    DedupConfig,
    ExportConfig,
    FieldProblem,
    FilterConfig,
    IngestConfig,
    RunConfig,
    ShapesConfig,
    SmokeConfig,
    SourceConfig,
    canonical_text,
    iso_cutoff,
)
from pipeline.config.vocab import (
    EXPORT_FORMATS,
    EXPORT_SCOPES,
    ITEM_FIELDS,
    RANK_KEY_NAMES,
    SHAPE_POLICIES,
    SHAPE_SCOPES,
    SHINGLE_MODES,
    SOURCE_KINDS,
    SPLIT_BYS,
    TABLE_FORMATS,
    TEXT_FIELDS,
    TRANSFORM_NAMES,
)


def config_toml(cfg: Config, where: str = "") -> str:
    """The effective config, every default included, as TOML that loads back to it."""
    header = "the effective config" + (f" of {where}" if where else "")
    header += f"\nrelative paths are relative to {cfg.base_dir}"
    return toml_out.dumps(cfg.canonical(), header)


__all__ = [
    "EXPORT_FORMATS",
    "EXPORT_SCOPES",
    "SHAPE_POLICIES",
    "SHAPE_SCOPES",
    "SHINGLE_MODES",
    "SPLIT_BYS",
    "ITEM_FIELDS",
    "RANK_KEY_NAMES",
    "SECTIONS",
    "SOURCE_KINDS",
    "TABLE_FORMATS",
    "TEXT_FIELDS",
    "TRANSFORM_NAMES",
    "Config",
    "ConfigError",
    "DecontaminateConfig",
    "DedupConfig",
    "ExportConfig",
    "FieldProblem",
    "FilterConfig",
    "IngestConfig",
    "RunConfig",
    "ShapesConfig",
    "SmokeConfig",
    "SourceConfig",
    "apply_override",
    "canonical_text",
    "config_toml",
    "iso_cutoff",
    "load_config",
    "parse_value",
    "updated",
    "validate",
]

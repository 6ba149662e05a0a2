"""The [decontaminate] section: benchmark test sets whose items must not be trained on."""

from __future__ import annotations

from pydantic import Field, field_validator

from pipeline.config.base import Section, each_in, paths_listed
from pipeline.config.vocab import TEXT_FIELDS


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
        return each_in(v, TEXT_FIELDS, "a text field")

"""The filter stage: rules/*.yaml -> polars expressions -> kept.parquet / rejected.parquet.

rules.py loads and validates rule sets, apply.py compiles them to polars and splits a batch of
items, stage.py is the stage (prepare / run / print_summary) the CLI drives.
"""

from pipeline.filter.stage import FilterFailed, prepare, print_summary, run

__all__ = ["FilterFailed", "prepare", "print_summary", "run"]

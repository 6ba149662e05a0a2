"""The filter stage: rules/*.yaml -> polars expressions -> kept.parquet / rejected.parquet.

rules.py loads and validates rule sets, apply.py compiles them to polars and splits a batch of
items, stage.py is the stage's map step (one batch at a time) the runner drives.
"""

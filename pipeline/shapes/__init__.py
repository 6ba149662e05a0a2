"""The shapes stage: "same edit shape" groups (normalise.py, kernels.py, columns.py, group.py,
stage.py)."""

from pipeline.shapes.columns import key_frame, shape_columns
from pipeline.shapes.group import (
    ShapesResult,
    analyse,
    cap_groups,
    find_shapes,
    group_shapes,
    spread_order,
)
from pipeline.shapes.normalise import (
    HEX,
    NUM,
    REF,
    changed_lines,
    collapse_ws,
    edit_key_expr,
    edit_shape,
    nearest_context_line,
    normalise_line,
    normalise_text,
)
from pipeline.shapes.stage import SHAPES_SCHEMA, print_summary, step, write_outputs

__all__ = [
    "HEX",
    "NUM",
    "REF",
    "SHAPES_SCHEMA",
    "ShapesResult",
    "analyse",
    "cap_groups",
    "changed_lines",
    "collapse_ws",
    "edit_key_expr",
    "edit_shape",
    "find_shapes",
    "group_shapes",
    "key_frame",
    "nearest_context_line",
    "normalise_line",
    "normalise_text",
    "print_summary",
    "shape_columns",
    "spread_order",
    "step",
    "write_outputs",
]

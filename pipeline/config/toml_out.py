"""A small TOML writer for config data: strings, ints, floats, bools, lists of those, tables
and arrays of tables; enough for `--print-config`, whose output loads back as the same config.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def dumps(data: Mapping[str, Any], header: str = "") -> str:
    lines = [f"# {h}" for h in header.splitlines()]
    _table(lines, data, [])
    return "\n".join(lines).strip("\n") + "\n"


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, Mapping) for x in v)


def _table(lines: list[str], data: Mapping[str, Any], path: list[str]) -> None:
    """Plain keys of one table first, then its sub-tables and arrays of tables."""
    for k, v in data.items():
        if not isinstance(v, Mapping) and not _is_table_array(v):
            lines.append(f"{key(k)} = {value(v)}")
    for k, v in data.items():
        sub = [*path, key(k)]
        if isinstance(v, Mapping):
            lines += ["", f"[{'.'.join(sub)}]"]
            _table(lines, v, sub)
        elif _is_table_array(v):
            for item in v:
                lines += ["", f"[[{'.'.join(sub)}]]"]
                _table(lines, item, sub)


def key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else string(k)


def string(s: str) -> str:
    # JSON's escapes (\" \\ \n \t \uXXXX ...) are TOML basic-string escapes; DEL must be too.
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007F")


def value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        text = repr(v)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(v, str):
        return string(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{key(k)} = {value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML form for {type(v).__name__}")

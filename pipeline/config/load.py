"""Loading: a TOML file, `--set KEY=VALUE` overrides, validation, and one-line errors.

pydantic's ValidationError never reaches a user: its first error becomes one line naming the
file and the full key path (`edits.toml: export.ratios: ...`), "(and N more)" when there are
several; an unknown key names the closest valid one.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError

from pipeline.config.models import Config, ConfigError, FieldProblem
from pipeline.textfile import NotTextFile, read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

M = TypeVar("M", bound=BaseModel)


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    """Read a TOML config, apply `a.b=value` overrides (values parsed as TOML), validate."""
    data: dict[str, Any] = {}
    where = "<defaults>"
    base = Path.cwd()
    if path is not None:
        p = Path(path)
        where = str(p)
        try:
            data = read_toml(read_text(p))
        except (
            FileNotFoundError,
            IsADirectoryError,
            UnicodeDecodeError,
            tomllib.TOMLDecodeError,
            TooDeep,
            NotTextFile,
        ) as e:
            # other OS errors (permission denied) stay OSErrors: an environment failure, exit 3
            raise ConfigError(f"{p}: {_unreadable(e)}") from None
        base = p.resolve().parent
    set_by: dict[str, str] = {}
    for ov in overrides or []:
        set_by[apply_override(data, ov)] = ov
    return validate(Config, data, where, set_by=set_by).with_base_dir(base)


# Arrays and inline tables nested deeper than this are refused before parsing: a config needs
# two levels, and tomllib recurses per level, so 100k `[` would end in a RecursionError.
MAX_NESTING = 32
_TOKEN = re.compile(r"""\"\"\"|'''|["'#\[\]{}]""")
_SKIP = {  # from just after a string's or comment's opening to just after its end
    '"': re.compile(r'(?:\\.|[^"\\\n])*"'),
    "'": re.compile(r"[^'\n]*'"),
    '"""': re.compile(r'(?:\\.|[^\\])*?"""', re.S),
    "'''": re.compile(r".*?'''", re.S),
    "#": re.compile(r"[^\n]*"),
}


def nesting_line(text: str, limit: int = MAX_NESTING) -> int | None:
    """The line (1-based) where TOML `text` nests arrays or inline tables more than `limit`
    deep, or None. Strings and comments are skipped; a text tomllib would refuse anyway may
    be misread here, and it then fails as invalid TOML."""
    depth, at = 0, 0
    while m := _TOKEN.search(text, at):
        tok, at = m.group(), m.end()
        if tok in _SKIP:
            end = _SKIP[tok].match(text, at)
            if end is None:
                return None  # an unterminated string: tomllib says where
            at = end.end()
        elif tok in "[{":
            depth += 1
            if depth > limit:
                return text.count("\n", 0, m.start()) + 1
        else:
            depth = max(depth - 1, 0)
    return None


class TooDeep(ValueError):
    """TOML nested past MAX_NESTING: refused before parsing."""


def read_toml(text: str) -> dict[str, Any]:
    """tomllib.loads, after refusing nesting deeper than MAX_NESTING (TooDeep)."""
    line = nesting_line(text)
    if line is not None:
        raise TooDeep(f"arrays or inline tables nested more than {MAX_NESTING} deep (line {line})")
    return tomllib.loads(text)


def _unreadable(e: Exception) -> str:
    """Why a config file could not be read, in words."""
    if isinstance(e, FileNotFoundError):
        return "config file not found"
    if isinstance(e, IsADirectoryError):
        return "is a folder, not a config file"
    if isinstance(e, UnicodeDecodeError):
        return f"not UTF-8 text (byte {e.start}): not a TOML config"
    if isinstance(e, NotTextFile):
        return str(e)
    return f"invalid TOML: {e}"


def validate(
    cls: type[M], data: Any, where: str, prefix: str = "", set_by: Mapping[str, str] = {}
) -> M:
    """cls from plain data, or a ConfigError of one line: `where: key.path: problem`."""
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise ConfigError(error_line(e, cls, where, prefix, set_by)) from None


def updated(model: M, where: str, **changes: Any) -> M:
    """A copy of a section with some values changed, validated like a loaded one."""
    return validate(type(model), {**model.model_dump(), **changes}, where)


# ------------------------------------------------------------------------ overrides


def parse_value(raw: str) -> Any:
    """A `--set` value: TOML (`5`, `true`, `[0.8, 0.1, 0.1]`, `"x"`), else a bare string;
    TooDeep for one nested past MAX_NESTING."""
    try:
        return read_toml(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def apply_override(data: dict[str, Any], text: str) -> str:
    """Set one `KEY=VALUE` in the raw config data; returns the key. The key path is checked
    against the models, so a typo names the override and the closest valid key."""
    if "=" not in text:
        raise ConfigError(f"override {text!r}: expected KEY=VALUE, e.g. ingest.batch_size=5000")
    key, raw = text.split("=", 1)
    key = key.strip()
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(f"override {text!r}: {key!r} is not a key path like dedup.threshold")
    node: Any = data
    tp: Any = Config
    for i, part in enumerate(parts):
        here = ".".join(parts[: i + 1])
        slot: str | int
        if _is_model(tp):
            if part not in tp.model_fields:
                hint = did_you_mean(part, tp.model_fields)
                raise ConfigError(f"override {text!r}: unknown key {here!r}{hint}")
            slot, tp = part, tp.model_fields[part].annotation
        elif get_origin(tp) is list:
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(
                    f"override {text!r}: {here!r}: no such entry "
                    f"(the config gives {'.'.join(parts[:i])} {len(node)})"
                )
            slot, tp = int(part), get_args(tp)[0]
        elif get_origin(tp) is dict:
            slot, tp = part, get_args(tp)[1]
        else:
            raise ConfigError(
                f"override {text!r}: {'.'.join(parts[:i])} is a value, it has no key {part!r}"
            )
        if i == len(parts) - 1:
            try:
                node[slot] = parse_value(raw)
            except TooDeep as e:
                raise ConfigError(f"override {_short(text)}: the value has {e}") from None
            return key
        container = list if get_origin(tp) is list else dict
        if isinstance(node, dict) and slot not in node:
            node[slot] = container()
        node = node[slot]
        if not isinstance(node, container):
            raise ConfigError(
                f"override {text!r}: {here} in the config is {_short(node)}, not a "
                f"{'list' if container is list else 'table'}"
            )
    raise AssertionError(key)  # pragma: no cover


# ------------------------------------------------------------------------ error lines


_TYPES = {
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "finite_number": "must be a finite number",
}
_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}


def error_line(
    e: ValidationError,
    root: type[BaseModel],
    where: str,
    prefix: str = "",
    set_by: Mapping[str, str] = {},
) -> str:
    errs = e.errors(include_url=False)
    key, text = describe(errs[0], root, prefix)
    origin = next((ov for k, ov in set_by.items() if key == k or key.startswith(k + ".")), None)
    if origin and where.startswith("<"):  # no config file (<dict>, <defaults>): the override
        line = f"override {origin!r}: {text}"
    else:
        line = f"{where}: {text}" + (f" (set by --set {origin})" if origin else "")
    if len(errs) > 1:
        line += f" (and {len(errs) - 1} more)"
    return " ".join(line.split())


def describe(err: Mapping[str, Any], root: type[BaseModel], prefix: str = "") -> tuple[str, str]:
    """(full key path, `key.path: problem`) for one pydantic error."""
    loc = [str(x) for x in err["loc"]]
    typ, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    problem = ctx.get("error")
    if isinstance(problem, FieldProblem):
        loc += problem.key.split(".")
    key = prefix + ".".join(loc)
    if typ == "extra_forbidden":
        owner = _model_at(root, err["loc"][:-1])
        hint = did_you_mean(loc[-1], owner.model_fields if owner else ())
        return key, f"unknown key {key!r}{hint}"
    if typ == "missing":
        parent = prefix + ".".join(loc[:-1])
        return key, f"{parent or 'top level'}: needs {loc[-1]!r}"
    if typ == "literal_error":
        return key, f"{key}: {_short(value)} is not one of {ctx.get('expected', '?')}"
    if typ in _TYPES:
        what = _TYPES[typ]
        if typ == "list_type" and _is_model(_list_item(root, err["loc"])):
            what = f"must be an array of tables ([[{key}]])"
        return key, f"{key}: {what}, got {_short(value)}"
    if typ in _BOUNDS:
        name, op = _BOUNDS[typ]
        line = f"{key}: must be {op} {ctx.get(name)}, got {_short(value)}"
        owner = _model_at(root, err["loc"][:-1])
        field = owner.model_fields.get(str(err["loc"][-1])) if owner else None
        why = field.description if field is not None and typ == "less_than_equal" else None
        return key, f"{line} ({why})" if why else line
    if typ == "too_short" and "min_length" in ctx:
        return key, f"{key}: needs at least {ctx['min_length']} (got {_short(value)})"
    if typ in ("value_error", "assertion_error") and problem is not None:
        return key, f"{key}: {problem}"
    return key, f"{key}: {err.get('msg', typ)}"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    names = sorted(choices)
    close = difflib.get_close_matches(word, names, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f"; allowed: {', '.join(names)}" if names else ""


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _walk(root: type[BaseModel], loc: Iterable[Any]) -> Any:
    tp: Any = root
    for part in loc:
        if _is_model(tp) and isinstance(part, str) and part in tp.model_fields:
            tp = tp.model_fields[part].annotation
        elif get_origin(tp) in (list, dict):
            tp = get_args(tp)[-1]
        else:
            return None
    return tp


def _model_at(root: type[BaseModel], loc: Iterable[Any]) -> type[BaseModel] | None:
    tp = _walk(root, loc)
    return tp if _is_model(tp) else None


def _list_item(root: type[BaseModel], loc: Iterable[Any]) -> Any:
    tp = _walk(root, loc)
    return get_args(tp)[0] if get_origin(tp) is list else None


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."

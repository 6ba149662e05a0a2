"""Rules files: YAML data (safe_load, no aliases; nothing executed), includes, overrides,
validation.

A bad rules file fails at load time with one message naming the file, the rule and the problem:
an unknown type or key, a field that is not an item text field, a regex that is invalid, that
can backtrack catastrophically, or that polars (the Rust regex crate) cannot run (regex.py).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml

from pipeline.config import Config, canonical_text
from pipeline.filter.kinds import KINDS
from pipeline.filter.kinds.contract import Fail, Rule
from pipeline.filter.kinds.length import UNITS
from pipeline.filter.regex import check_combined, check_pattern
from pipeline.schema import TEXT_FIELDS
from pipeline.textfile import NotTextFile, read_text

# pipeline/rules: the repository's top-level rules/ (a link in a checkout, package data in a wheel)
RULES_DIR = Path(__file__).resolve().parents[1] / "rules"
ACTIONS = ("drop", "flag")
MAX_NESTING = 32  # lists and mappings in a rules file: the shipped ones need five


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the file, the rule and the problem."""


@dataclass(frozen=True)
class RuleSet:
    name: str
    files: tuple[str, ...]
    rules: tuple[Rule, ...]  # in order, disabled ones included (the summary lists them)

    @property
    def active(self) -> list[Rule]:
        return [r for r in self.rules if r.enabled]

    @property
    def fingerprint(self) -> str:
        """Content of the resolved rules (after includes and overrides), not file bytes."""
        text = canonical_text([r.canonical() for r in self.rules])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _fields(v: Any, fail) -> tuple[str, ...]:
    vals = [v] if isinstance(v, str) else v
    if not isinstance(vals, list) or not vals or not all(isinstance(x, str) for x in vals):
        fail("`field` must be a field name or a list of them")
    for f in vals:
        if f not in TEXT_FIELDS:
            fail(f"field {f!r} is not a text field; use one of {', '.join(TEXT_FIELDS)}")
    return tuple(vals)


def _languages(v: Any, fail, key: str) -> tuple[str, ...]:
    """A list of language names; "" is an unknown language."""
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
        fail(f'`{key}` must be a list of language names ("" for an unknown language)')
    return tuple(v)


def _named(p: Any, formats: Mapping[str, str], fail: Fail, key: str) -> Any:
    """A mapping's value `{format: <name>}`: the kind's pattern of that name (Kind.formats);
    any other value as written."""
    if not isinstance(p, dict) or not formats:
        return p
    name = p.get("format")
    if set(p) != {"format"} or not isinstance(name, str) or name not in formats:
        fail(f"`{key}`: {p!r} must be {{format: <name>}}, a name of {', '.join(formats)}")
    return formats[name]


def _patterns(
    v: Any, fail, key: str = "patterns", what: str = "regex", formats: Mapping[str, str] = {}
) -> tuple[tuple[str, str], ...]:
    """A list of regexes (each its own label) or a mapping label -> regex, or -> a pattern the
    kind names (`{format: <name>}`); globs alike."""
    if isinstance(v, dict):
        items = [(k, _named(p, formats, fail, key)) for k, p in v.items()]
    elif isinstance(v, list):
        items = [(p, p) for p in v]
    else:
        items = []
    if not items or not all(isinstance(k, str) and isinstance(p, str) and p for k, p in items):
        fail(f"`{key}` must be a non-empty list of {what}s or a mapping name -> {what}")
    return tuple(items)


def _bool(v: Any, fail, key: str) -> bool:
    if not isinstance(v, bool):
        fail(f"`{key}` must be true or false, got {v!r}")
    return v


def _int(v: Any, fail, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        fail(f"`{key}` must be a non-negative integer, got {v!r}")
    return v


# percents, 0..100 (int or float)
_SHARES = (
    "max_space_share",
    "min_symbol_share",
    "max_symbol_share",
    "min_separator_share",
    "max_shared_words",
    "min_share",
    "min_alike",
)
_COMMON = ("name", "type", "action", "enabled", "description")


def validate_rule(d: dict[str, Any], where: str) -> Rule:
    """One rule dict from YAML -> a Rule, or RulesError naming the file, the rule, the problem."""
    name = d.get("name")

    def fail(msg: str) -> NoReturn:
        raise RulesError(f"{where}: rule '{name}': {msg}")

    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise RulesError(f"{where}: rule name {name!r} must be lower_snake_case")
    typ = d.get("type")
    if not isinstance(typ, str) or typ not in KINDS:
        fail(f"unknown rule type {typ!r}; types: {', '.join(KINDS)}")
    spec = KINDS[typ].keys  # key -> (required, default); the validators above pick by key
    unknown = sorted(set(d) - set(_COMMON) - set(spec))
    if unknown:
        fail(
            f"unknown key '{unknown[0]}' for a {typ} rule; allowed: {', '.join([*_COMMON, *spec])}"
        )
    action = d.get("action", "drop")
    if action not in ACTIONS:
        fail(f"action {action!r} must be drop or flag")
    enabled = _bool(d.get("enabled", True), fail, "enabled")
    if not isinstance(d.get("description", ""), str):
        fail("`description` must be a string")
    params: dict[str, Any] = {}
    for key, (required, default) in spec.items():
        if key not in d:
            if required:
                fail(f"a {typ} rule needs `{key}`")
            params[key] = default
            continue
        v = d[key]
        if key == "field":
            params[key] = _fields(v, fail)
        elif key in ("patterns", "sample_patterns"):
            params[key] = _patterns(v, fail, key, formats=KINDS[typ].formats)
        elif key in ("globs", "except"):
            kind = "glob" if typ == "path" else "regex"
            params[key] = () if key == "except" and v == [] else _patterns(v, fail, key, kind)
        elif key in ("allow", "languages"):
            params[key] = _languages(v, fail, key)
        elif key == "what":
            if not isinstance(v, str) or len(v) > 80:
                fail("`what` names the lines in the reason: a text of at most 80 characters")
            params[key] = v
        elif key == "unit":
            if v not in UNITS:
                fail(f"unit {v!r} must be one of {', '.join(UNITS)}")
            params[key] = v
        elif key in (
            "min",
            "max",
            "min_line_chars",
            "min_lines",
            "min_words",
            "min_changes",
            "min_files",
        ):
            params[key] = _int(v, fail, key)
            if key != "min" and key != "max" and params[key] < 1:
                fail(f"`{key}` must be at least 1")
        elif key in _SHARES:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 100:
                fail(f"`{key}` is a percent, a number from 0 to 100; got {v!r}")
            params[key] = v
        else:
            params[key] = _bool(v, fail, key)
    KINDS[typ].check(params, fail)  # what spans keys; derived params (path globs' regexes)
    for label, pat in (
        *params.get("patterns", ()),
        *params.get("sample_patterns", ()),
        *params.get("except_patterns", ()),
    ):
        problem = check_pattern(pat, params.get("ignore_case", False))
        if problem:
            fail(f"pattern {label!r}: {problem}" if label != pat else problem)
    for key in ("patterns", "sample_patterns", "except_patterns"):
        problem = check_combined(
            [p for _, p in params.get(key, ())], params.get("ignore_case", False)
        )
        if problem:
            fail(problem)
    return Rule(name, typ, action, enabled, params, where)


_TOP_KEYS = ("name", "description", "include", "override", "rules")


def _resolve(ref: str, rel_to: Path) -> Path:
    p = Path(ref).expanduser()
    if not p.suffix:
        p = p.with_suffix(".yaml")
    return p if p.is_absolute() else rel_to / p


class _PlainLoader(yaml.SafeLoader):
    """safe_load without anchors and aliases: a rules file is plain data, and an alias bomb
    (9 levels of 9 aliases) would expand to billions of nodes in a message or a fingerprint."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed", mark)
        # composing recurses per level: 100k nested lists would end in a RecursionError
        if self.depth >= MAX_NESTING:
            mark = self.peek_event().start_mark
            msg = f"lists or mappings nested more than {MAX_NESTING} deep"
            raise yaml.composer.ComposerError(None, None, msg, mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = read_text(path)
    except FileNotFoundError:
        raise RulesError(f"{path}: rules file not found") from None
    except (OSError, UnicodeDecodeError, NotTextFile) as e:
        raise RulesError(f"{path}: cannot read rules file: {e}") from None
    try:
        data = yaml.load(text, Loader=_PlainLoader)  # SafeLoader, aliases refused
    except yaml.YAMLError as e:
        msg = " ".join(str(e).split())
        raise RulesError(f"{path}: invalid YAML (only plain data is allowed): {msg}") from None
    if data is None:  # likely the wrong file; `rules: []` says "filter nothing" on purpose
        raise RulesError(f"{path}: the rules file is empty; write `rules: []` to keep every item")
    if not isinstance(data, dict):
        raise RulesError(f"{path}: a rules file is a mapping with `rules:` (a list of rules)")
    unknown = sorted(set(data) - set(_TOP_KEYS))
    if unknown:
        raise RulesError(
            f"{path}: unknown top-level key '{unknown[0]}'; allowed: {', '.join(_TOP_KEYS)}"
        )
    return data


def _raw_rules(path: Path, stack: tuple[Path, ...]) -> list[tuple[dict[str, Any], str]]:
    """The file's rules in order, includes first, overrides merged in; not yet validated."""
    path = path.resolve()
    if path in stack:
        raise RulesError(f"{path}: include cycle: {' -> '.join(map(str, [*stack, path]))}")
    data = _read_yaml(path)
    includes = data.get("include") or []
    includes = [includes] if isinstance(includes, str) else includes
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise RulesError(f"{path}: `include` must be a rule set name or a list of them")
    out: list[tuple[dict[str, Any], str]] = []
    for inc in includes:
        target = _resolve(inc, path.parent)
        shipped = RULES_DIR / f"{inc}.yaml"  # a bare name no file beside this one holds: ours
        if not target.is_file() and re.fullmatch(r"[A-Za-z0-9_-]+", inc) and shipped.is_file():
            target = shipped
        if not target.is_file():
            raise RulesError(f"{path}: include {inc!r}: no rules file {target}")
        out += _raw_rules(target, (*stack, path))
    index = {d["name"]: i for i, (d, _) in enumerate(out)}
    overrides = data.get("override") or {}
    if not isinstance(overrides, dict):
        raise RulesError(f"{path}: `override` must map rule names to the keys to change")
    for name, changes in overrides.items():
        if name not in index:
            raise RulesError(
                f"{path}: override '{name}': no such rule in the included sets "
                f"({', '.join(index) or 'none included'})"
            )
        if not isinstance(changes, dict):
            raise RulesError(f"{path}: override '{name}': must be a mapping of keys to change")
        fixed = sorted({"name", "type"} & set(changes))
        if fixed:
            raise RulesError(
                f"{path}: override '{name}': cannot change `{fixed[0]}`; disable "
                f"the rule (enabled: false) and add a new one"
            )
        base, where = out[index[name]]
        out[index[name]] = ({**base, **changes}, f"{path} (override of {where})")
    rules = data.get("rules") or []
    if not isinstance(rules, list):
        raise RulesError(f"{path}: `rules` must be a list of rules")
    for k, d in enumerate(rules):
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            raise RulesError(f"{path}: rules[{k}]: each rule is a mapping with a `name`")
        if d["name"] in index:
            prev = out[index[d["name"]]][1]
            raise RulesError(
                f"{path}: rule '{d['name']}': already defined in {prev}; "
                f"use `override:` to change it"
            )
        index[d["name"]] = len(out)
        out.append((d, str(path)))
    return out


def load_rules(path: Path) -> RuleSet:
    """Read, resolve includes/overrides and validate a rules file; RulesError on any problem."""
    path = Path(path)
    raw = _raw_rules(path, ())
    files = tuple(dict.fromkeys(w.split(" (override", 1)[0] for _, w in raw)) or (str(path),)
    name = _read_yaml(path.resolve()).get("name") or path.stem
    return RuleSet(str(name), files, tuple(validate_rule(d, w) for d, w in raw))


def rules_path(cfg: Config) -> Path:
    """`filter.rules`: a set in rules/ by name, or a path (relative to the config file)."""
    ref = cfg.filter.rules
    if "/" in ref or "\\" in ref or ref.endswith((".yaml", ".yml")):
        return cfg.resolve(ref)
    p = RULES_DIR / f"{ref}.yaml"
    if not p.exists():
        have = ", ".join(sorted(q.stem for q in RULES_DIR.glob("*.yaml"))) or "none"
        raise RulesError(f"filter.rules = {ref!r}: no rule set {p} (available: {have})")
    return p

"""Rules files: YAML data (safe_load; nothing executed), includes, overrides, validation.

A bad rules file fails at load time with one message naming the file, the rule and the problem:
an unknown type or key, a field that is not an item text field, a regex that is invalid, that
can backtrack catastrophically, or that polars (the Rust regex crate) cannot run.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from pipeline.config import Config, canonical_text

try:  # Python 3.11+
    from re import _constants as sre_c
    from re import _parser as sre_parse
except ImportError:  # pragma: no cover - 3.10
    import sre_constants as sre_c  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

RULES_DIR = Path(__file__).resolve().parents[2] / "rules"
TEXT_FIELDS = (
    "repo",
    "change",
    "path",
    "language",
    "before",
    "after",
    "context",
    "comment",
    "author",
)
SECRET_FIELDS = ("before", "after", "context", "comment")
ACTIONS = ("drop", "flag")
UNITS = ("chars", "lines", "tokens", "line_chars")


class RulesError(ValueError):
    """A rules file that cannot be used; the message names the file, the rule and the problem."""


@dataclass(frozen=True)
class Rule:
    name: str
    type: str
    action: str
    enabled: bool
    params: dict[str, Any]  # normalised: fields/globs/allow as tuples, patterns as (label, re)
    where: str = field(default="", compare=False)  # the file that defined (or overrode) it

    def canonical(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "action": self.action,
            "enabled": self.enabled,
            **self.params,
        }


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


def _strlist(v: Any, fail, key: str) -> tuple[str, ...]:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
        fail(f"`{key}` must be a list of non-empty strings")
    return tuple(v)


def _patterns(v: Any, fail) -> tuple[tuple[str, str], ...]:
    """A list of regexes (each its own label) or a mapping label -> regex."""
    if isinstance(v, dict):
        items = list(v.items())
    elif isinstance(v, list):
        items = [(p, p) for p in v]
    else:
        items = []
    if not items or not all(isinstance(k, str) and isinstance(p, str) and p for k, p in items):
        fail("`patterns` must be a non-empty list of regexes or a mapping name -> regex")
    return tuple(items)


def _bool(v: Any, fail, key: str) -> bool:
    if not isinstance(v, bool):
        fail(f"`{key}` must be true or false, got {v!r}")
    return v


def _int(v: Any, fail, key: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        fail(f"`{key}` must be a non-negative integer, got {v!r}")
    return v


# type -> {key: (required, default)}; the validators above are picked by key.
_TYPES: dict[str, dict[str, tuple[bool, Any]]] = {
    "length": {
        "field": (True, None),
        "unit": (True, None),
        "min": (False, None),
        "max": (False, None),
    },
    "noop": {},
    "whitespace_only": {},
    "regex": {"field": (True, None), "patterns": (True, None), "ignore_case": (False, False)},
    "secret": {
        "field": (False, SECRET_FIELDS),
        "patterns": (True, None),
        "ignore_case": (False, False),
    },
    "bot_author": {
        "patterns": (False, ()),
        "ignore_case": (False, True),
        "use_author_is_bot": (False, True),
    },
    "path": {"globs": (True, None), "ignore_case": (False, False)},
    "language": {"allow": (True, None)},
}
_COMMON = ("name", "type", "action", "enabled", "description")


def validate_rule(d: dict[str, Any], where: str) -> Rule:
    """One rule dict from YAML -> a Rule, or RulesError naming the file, the rule, the problem."""
    name = d.get("name")

    def fail(msg: str):
        raise RulesError(f"{where}: rule '{name}': {msg}")

    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise RulesError(f"{where}: rule name {name!r} must be lower_snake_case")
    typ = d.get("type")
    if typ not in _TYPES:
        fail(f"unknown rule type {typ!r}; types: {', '.join(_TYPES)}")
    spec = _TYPES[typ]
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
        elif key == "patterns":
            params[key] = _patterns(v, fail)
        elif key in ("globs", "allow"):
            params[key] = _strlist(v, fail, key)
        elif key == "unit":
            if v not in UNITS:
                fail(f"unit {v!r} must be one of {', '.join(UNITS)}")
            params[key] = v
        elif key in ("min", "max"):
            params[key] = _int(v, fail, key)
        else:
            params[key] = _bool(v, fail, key)
    if typ == "length":
        lo, hi = params["min"], params["max"]
        if lo is None and hi is None:
            fail("a length rule needs `min`, `max` or both")
        if lo is not None and hi is not None and lo > hi:
            fail(f"min {lo} > max {hi}")
    if typ == "path":
        params["patterns"] = tuple((g, glob_to_regex(g)) for g in params.pop("globs"))
    if typ == "bot_author" and not params["patterns"] and not params["use_author_is_bot"]:
        fail("a bot_author rule needs `patterns` or `use_author_is_bot: true`")
    for label, pat in params.get("patterns", ()):
        problem = check_pattern(pat, params.get("ignore_case", False))
        if problem:
            fail(f"pattern {label!r}: {problem}" if label != pat else problem)
    if typ == "path":  # keep the globs (what a user wrote) as the canonical form
        params = {"globs": tuple(g for g, _ in params["patterns"]), **params}
    return Rule(name, typ, action, enabled, params, where)


def check_pattern(pattern: str, ignore_case: bool = False) -> str | None:
    """Why a regex cannot be used (invalid, backtracks catastrophically, not Rust), or None.

    Patterns must be in the subset that both Python `re` (the per-row reference) and the Rust
    regex crate (polars) accept.
    """
    full = ("(?i)" if ignore_case else "") + pattern
    try:
        tree = sre_parse.parse(full)
    except re.error as e:
        return f"invalid regex {pattern!r}: {e}"
    bad = _backtracking(tree)
    if bad:
        return f"regex {pattern!r} can backtrack catastrophically: {bad}"
    try:
        pl.Series([""], dtype=pl.String).str.contains(full)
    except pl.exceptions.PolarsError as e:
        lines = [ln.strip() for ln in str(e).splitlines()]
        why = next((ln for ln in lines if ln.startswith("error:")), lines[0] if lines else "")
        return (
            f"regex {pattern!r} is not supported by polars (Rust regex: no look-around, "
            f"no backreferences): {why}"
        )
    return None


_REPEATS = {sre_c.MAX_REPEAT, sre_c.MIN_REPEAT} | (
    {sre_c.POSSESSIVE_REPEAT} if hasattr(sre_c, "POSSESSIVE_REPEAT") else set()
)


def _children(op, av) -> list:
    if op in _REPEATS:
        return [av[2]]
    if op is sre_c.SUBPATTERN:
        return [av[-1]]
    if op is sre_c.BRANCH:
        return list(av[1])
    if op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
        return [av[1]]
    if getattr(sre_c, "ATOMIC_GROUP", None) is op:
        return [av]
    if op is sre_c.GROUPREF_EXISTS:
        return [b for b in av[1:] if b is not None]
    return []


def _has_unbounded(sub) -> bool:
    for op, av in sub:
        if op in _REPEATS and av[1] == sre_c.MAXREPEAT:
            return True
        if any(_has_unbounded(c) for c in _children(op, av)):
            return True
    return False


def _overlapping_branch(sub) -> bool:
    """A branch where one alternative's text is a prefix of another's, like (a|aa)."""
    for op, av in sub:
        if op is sre_c.BRANCH:
            alts = list(av[1])
            lits = [
                "".join(chr(c) for o, c in a) if all(o is sre_c.LITERAL for o, _ in a) else None
                for a in alts
            ]
            for i in range(len(alts)):
                for j in range(len(alts)):
                    if i == j:
                        continue
                    if lits[i] is not None and lits[j] is not None:
                        if lits[j].startswith(lits[i]):
                            return True
                    elif str(alts[i]) == str(alts[j]):
                        return True
        if op not in _REPEATS and any(_overlapping_branch(c) for c in _children(op, av)):
            return True
    return False


def _backtracking(sub) -> str | None:
    """Conservative: an unbounded repeat over another unbounded repeat or an overlapping branch.

    The Rust engine polars uses is linear-time anyway; the check keeps rules safe for any
    backtracking engine (the per-row reference uses Python `re`).
    """
    for op, av in sub:
        if op in _REPEATS and av[1] == sre_c.MAXREPEAT:
            if _has_unbounded(av[2]):
                return "an unbounded repeat inside another, like (a+)+; rewrite it without nesting"
            if _overlapping_branch(av[2]):
                return "a repeated alternation whose branches overlap, like (a|aa)+"
        for c in _children(op, av):
            bad = _backtracking(c)
            if bad:
                return bad
    return None


def glob_to_regex(glob: str) -> str:
    """Path glob -> regex. No `/`: any file of that name; trailing `/`: a folder anywhere.

    `*` is any run within one path part, `**` any run across parts, `?` one character.
    """
    out = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append(
            "[^/]*"
            if c == "*"
            else "[^/]"
            if c == "?"
            else "\\" + c
            if c in ".^$+(){}[]|\\-"
            else c
        )
        i += 1
    body = "".join(out)
    if glob.startswith("/"):
        return "^" + body[1:] + ("" if glob.endswith("/") else "$")
    return "(?:^|/)" + body + ("" if glob.endswith("/") else "$")


_TOP_KEYS = ("name", "description", "include", "override", "rules")


def _resolve(ref: str, rel_to: Path) -> Path:
    p = Path(ref).expanduser()
    if not p.suffix:
        p = p.with_suffix(".yaml")
    return p if p.is_absolute() else rel_to / p


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RulesError(f"{path}: rules file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RulesError(f"{path}: cannot read rules file: {e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        msg = " ".join(str(e).split())
        raise RulesError(f"{path}: invalid YAML (only plain data is allowed): {msg}") from None
    if data is None:
        return {}
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

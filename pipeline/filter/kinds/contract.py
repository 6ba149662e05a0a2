"""What a rule kind is: the Rule it is handed, its Kind record (keys, match, reason, reference,
check), and Row, the one-item view its reference reads in plain Python."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import ModuleType
from typing import Any, NoReturn

import polars as pl

from pipeline.filter.regex import REPO_NAME_RE, REPO_SLOT, repo_literal, with_flags


@dataclass(frozen=True)
class Rule:
    """One rule of a rule set, as loaded and checked (pipeline/filter/rules.py)."""

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


Fail = Callable[[str], NoReturn]
# what a rule matches with beyond its own keys: what its kind's `find` found over the stage's
# whole input (a mirror rule's folders, a moved rule's deletions), or a prepared column's name
Found = tuple[Any, ...]
FindFn = Callable[[pl.LazyFrame, dict[str, Any]], Found]


def _no_check(params: dict[str, Any], fail: Fail) -> None:
    return None


@dataclass(frozen=True)
class Kind:
    keys: dict[str, tuple[bool, Any]]  # key -> (required, default)
    hit: Callable[[Rule, Found], pl.Expr]  # True where the rule matches an item
    reason: Callable[[Rule, Found], pl.Expr]  # why, on the rejected rows
    reference: Callable[[Rule, Row, Found], bool]  # the same match, one item in plain Python
    # validates what spans keys and adds derived params (a path rule's globs as regexes)
    check: Callable[[dict[str, Any], Fail], None] = _no_check
    # findings computed in Python per batch before the rules run (`<reason> in <field>` per
    # row); where given, hit and reason read the column they fill (found: its name), and a
    # flag names each reason (labels: the reasons of one row, for the reference)
    prepare: Callable[[pl.DataFrame, Rule], pl.Series] | None = None
    labels: Callable[[Rule, Row], list[str]] | None = None
    # patterns defined elsewhere that a rule's patterns may name instead of spelling them
    # (`label: {format: <name>}`), so each is written once: a secret rule's token formats
    formats: Mapping[str, str] = field(default_factory=dict)
    # what the rule matches, found over the filter stage's whole input before its batches
    # (items: the input as a lazy frame; params: the rule's): for what one batch cannot tell,
    # such as another hunk of the same change. Whole within a repository and sorted: found
    # over each repository apart, the findings sorted together are the same (on Ray each
    # hash partition by repo is searched apart). find_columns: the item columns it reads
    find: FindFn | None = None
    find_columns: tuple[str, ...] = ()

    @classmethod
    def of(cls, module: ModuleType) -> Kind:
        """The kind a module declares: its KEYS and its functions by their field names."""
        given = {f.name: getattr(module, f.name) for f in fields(cls) if hasattr(module, f.name)}
        return cls(keys=module.KEYS, **{k: v for k, v in given.items() if k != "keys"})


class Row:
    """One item as the references read it (missing text is "")."""

    def __init__(self, row: dict[str, Any]):
        self.row = row
        self._name = re.search(REPO_NAME_RE.replace("$", r"\Z"), self.txt("repo"))

    def get(self, f: str) -> Any:
        return self.row.get(f)

    def txt(self, f: str) -> str:
        return self.row.get(f) or ""

    def _regex(self, p: str) -> str | None:
        """A pattern with its `{repo}` slots filled by the row's repository name (None: the
        row has no plain name, so such a glob cannot match)."""
        if REPO_SLOT not in p:
            return p
        return p.replace(REPO_SLOT, repo_literal(self._name.group(1))) if self._name else None

    def search(self, rule: Rule, f: str, key: str = "patterns") -> bool:
        return any(
            re.search(with_flags(x, bool(rule.params.get("ignore_case"))), self.txt(f))
            for _, p in rule.params[key]
            if (x := self._regex(p)) is not None
        )

    def blank(self, f: str) -> bool:
        return re.fullmatch(r"\s*", self.txt(f)) is not None

    def nows(self, f: str) -> str:
        return re.sub(r"\s+", "", self.txt(f))

    @property
    def noop(self) -> bool:
        return (
            self.txt("before") == self.txt("after")
            and self.row["lines_removed"] == self.row["lines_added"]
        )

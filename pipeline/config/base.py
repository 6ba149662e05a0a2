"""What every config section model shares: the base model, the error types, list checks.

Kept apart from models.py so that section models in other modules (decontaminate.py) can
build on it without importing models.py, which imports them.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from pipeline.errors import UsageError


class ConfigError(UsageError, ValueError):
    """A config that cannot be used; the message names the file and the key (exit 2)."""


class FieldProblem(ValueError):
    """Raised by a validator: `key` (relative to the model, dotted) is what the message is about."""

    def __init__(self, key: str, msg: str):
        super().__init__(msg)
        self.key = key


def each_in(values: list[str], allowed: tuple[str, ...], what: str) -> list[str]:
    """values, or FieldProblem at the first one not in allowed (its index is the key)."""
    for i, v in enumerate(values):
        if v not in allowed:
            raise FieldProblem(str(i), f"{v!r} is not {what}; use some of {', '.join(allowed)}")
    return values


def paths_listed(values: list[str], what: str) -> list[str]:
    """values, or FieldProblem at the first empty or repeated path."""
    seen: set[str] = set()
    for i, v in enumerate(values):
        if not v.strip():
            raise FieldProblem(str(i), f"an empty path; give {what}")
        if v in seen:
            raise FieldProblem(str(i), f"{v!r} is listed twice")
        seen.add(v)
    return values


class Section(BaseModel):
    """Frozen, no unknown keys, no silent coercion ("5" is not an integer, 1 not a bool)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
    # keys that change how the work is cut up, never its result: left out of the stage's
    # fingerprint, so changing them neither reruns the stage nor changes an output byte
    NOT_FINGERPRINTED: ClassVar[frozenset[str]] = frozenset()

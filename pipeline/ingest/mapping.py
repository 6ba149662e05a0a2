"""Field mapping: one input object (a JSON object, a CSV row, a dataset row) -> one item.

The config names, per item field, the input field to read (dotted for nested objects), an
optional named transform and a default. An item field that is not mapped reads the input field
of the same name when there is one, so a file already in our field names needs no mapping.
Transforms are a closed set of pure functions chosen by name: nothing in a config is executed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import islice
from typing import Any

import orjson

from pipeline.config import ConfigError, SourceConfig
from pipeline.ingest.base import RawItem, Record, RecordError
from pipeline.schema import TEXT_FIELDS
from pipeline.secrets.masking import mask, shown

# Fields where a number is a fine value (a PR number, a numeric repo id) and becomes text.
NUMBER_OK = {"repo", "change", "author", "path"}
MAPPABLE = (*TEXT_FIELDS, "author_is_bot", "lines_removed", "lines_added", "created_at")
# Optional fields outside the id: a value that cannot be read leaves the field null (the
# batcher then derives lines from the text, the bot flag from the author) and is counted per
# source as a field problem; the record stays an item. A text field of the wrong type is an
# error record: text is the item's content and id.
LENIENT = {"author_is_bot", "lines_removed", "lines_added", "created_at"}


class _Missing:
    """The type of _MISSING: a field the input does not have (None is a JSON null)."""


_MISSING = _Missing()
# Common input names read for an item field that has no input field of its own name, no
# mapping and no default, first present wins: mined history names its commit `commit` and
# its time `timestamp`, and without them every item of a source would share the change "" and
# have no time. Only names that mean the same thing; a value of a type the field cannot hold
# (a `pull_request` object) is passed over, never an error: nobody asked for that field.
KEYS_FROM = 8  # the first records whose keys are noted whatever the mapping (for messages)
ALIASES = {
    "change": (
        "commit",
        "sha",
        "commit_sha",
        "commit_id",
        "pr_number",
        "pull_number",
        "pr",
        "pull_request",
    ),
    "created_at": ("timestamp", "created", "date"),
}


@dataclass(frozen=True, slots=True)
class _Refused:
    reason: str  # why the record is an error record


@dataclass(frozen=True, slots=True)
class _Problem:
    reason: str  # the lenient field left null, and why ("created_at out of range")


# A RawItem field's value where the mapping leaves it unset
_UNSET = {f.name: f.default for f in dataclasses.fields(RawItem)}


class OutOfRange(ValueError):
    """A value of the right kind whose magnitude no field can hold (a time in year 10^22)."""


_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r", "0": "\0"}
_ESCAPE_RE = re.compile(r"\\(.)", re.S)


def unrepr(text: str) -> str:
    """Undo (repeated) Python-repr quoting: '\\\\"Fix leak\\\\n\\\\"' -> 'Fix leak'.

    NoFunEval stores commit messages repr'd twice. Quotes are peeled and backslash escapes
    decoded until the text stops changing; non-ASCII text is left as it is. Some upstream
    messages are cut short, so the closing quotes are missing: an unmatched opening quote is
    peeled too, but only where it is evidently a repr layer (`_truncated`), so a message that
    merely starts with a quote keeps it.
    """
    inner = False  # a peeled layer began with an escaped quote: the next layer's opening one
    for _ in range(8):
        s = text.strip()
        if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
            s = s[1:-1]
            inner = False
        elif s[:1] in ("'", '"') and (inner or _truncated(s)):
            s = s[1:]
            inner = _ESCAPED_QUOTE.match(s) is not None
        s = _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(0)), s)
        if s == text:
            break
        text = s
    return text.strip()


# After an opening quote: an escaped quote (a repr of a repr), or any escape unrepr decodes.
_ESCAPED_QUOTE = re.compile(r"\\+['\"]")
_ANY_ESCAPE = re.compile(r"\\[\\'\"ntr0]")


def _truncated(s: str) -> bool:
    """Whether `s`, starting with a quote it does not end with, is a repr cut short: what
    follows the quote is still escaped text (a message that quotes a word has no escapes)."""
    return _ESCAPED_QUOTE.match(s, 1) is not None or _ANY_ESCAPE.search(s, 1) is not None


_GH_URL = re.compile(r"github\.com/(?:repos/)?([^/\s]+/[^/\s#?]+)")


def github_repo(text: str) -> str:
    """'https://github.com/owner/name/commit/abc' -> 'owner/name' (API URLs too)."""
    m = _GH_URL.search(text)
    return m.group(1).removesuffix(".git") if m else text


def url_tail(text: str) -> str:
    """Last path segment of a URL: a commit sha or PR number."""
    return text.rstrip("/").split("#", 1)[0].rsplit("/", 1)[-1]


TRANSFORMS: dict[str, Callable[[str], str]] = {
    "unrepr": unrepr,
    "github_repo": github_repo,
    "url_tail": url_tail,
    "strip": str.strip,
    "lower": str.lower,
}


def check_transforms(spec: SourceConfig) -> None:
    for k, name in spec.transforms.items():
        if name not in TRANSFORMS:
            source = mask(spec.display_name())[0]
            raise ValueError(
                f"source {source!r}: transforms.{k} = {name!r} is unknown; "
                f"known: {', '.join(sorted(TRANSFORMS))}"
            )


def lookup(obj: Any, dotted: str) -> Any:
    """obj["user"]["login"] for "user.login"; an exact key with dots wins."""
    if isinstance(obj, dict) and dotted in obj:
        return obj[dotted]
    cur = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def input_field(spec: SourceConfig, name: str) -> str:
    return spec.fields.get(name, name)


def mapped_columns(spec: SourceConfig) -> dict[str, str]:
    """Item field -> input column, for a check against a table's header."""
    return {name: input_field(spec, name) for name in MAPPABLE}


class UnmappedField(ConfigError):
    """A field mapped in `[ingest.sources.fields]` that no record of the source has: a typo in
    the config, not damage in the data (one missing from some records follows `required`)."""

    def __init__(self, item: str, src: str, seen: list[str]):
        # a record's keys are data: a key can be a token, or a terminal escape sequence
        fields_seen = ", ".join(map(shown, seen[:20])) + (", ..." if len(seen) > 20 else "")
        src = mask(src)[0]
        super().__init__(
            f"fields.{item} = {src!r}: no record has a field {src!r} (fields seen: {fields_seen})"
        )


class Mapper:
    """A field mapping compiled once per source: the per-record work is dict lookups only."""

    def __init__(self, spec: SourceConfig):
        check_transforms(spec)
        self.spec = spec
        # Explicitly mapped fields no record has had yet, and what the records did have: the
        # check costs one truthiness test per record once every mapped field has been seen.
        self.unseen = dict(spec.fields)
        self.objects = 0
        self.keys_seen: dict[str, None] = {}
        self.plan = [
            (
                name,
                input_field(spec, name),
                name in spec.required and name not in spec.defaults,
                spec.defaults.get(name, _MISSING),
                name in spec.defaults,
                TRANSFORMS[spec.transforms[name]] if name in spec.transforms else None,
                name in TEXT_FIELDS,
                ALIASES.get(name, ())
                if name not in spec.fields and name not in spec.defaults
                else (),
            )
            for name in MAPPABLE
        ]

    def __call__(self, obj: Any, ref: str) -> Record | RecordError:
        """Map one input object to a Record with one item, or say exactly what is wrong."""
        if not isinstance(obj, dict):
            return RecordError(ref, _raw(obj), f"not an object: got {type(obj).__name__}")
        self.objects += 1
        if self.unseen or self.objects <= KEYS_FROM:
            self._note_fields(obj)
        values: dict[str, Any] = {}
        problems: list[str] = []
        for entry in self.plan:
            v = self._field(entry, obj)
            if type(v) is _Refused:
                return RecordError(ref, _raw(obj), v.reason)
            if type(v) is _Problem:
                problems.append(v.reason)
            elif v is not _MISSING:
                values[entry[0]] = v
        return Record(ref, [RawItem(**values)], problems)

    def _field(self, entry: tuple, obj: dict[str, Any]) -> Any:
        """One item field of `obj` by its plan entry: the value, _MISSING (left unset), or why
        not: _Refused (the record is an error) or _Problem (a lenient field left null)."""
        name, src, required, default, has_default, tf, is_text, aliases = entry
        v = obj.get(src, _MISSING)
        if v is _MISSING and "." in src:
            v = lookup(obj, src)
        if aliases and (v is _MISSING or v is None):
            v, src = _alias(obj, aliases, is_text, src)
        if is_text and type(v) is str and (v or not has_default):
            return tf(v) if tf else v  # the common case, kept cheap
        if v is _MISSING or v is None or (v == "" and has_default):
            if required:
                how = f" (input field {src!r})" if src != name else ""
                return _Refused(f"missing field: {name}{how}")
            if default is _MISSING:
                return _MISSING
            v = default
        try:
            return _convert(name, v, self.spec)
        except (TypeError, ValueError, OverflowError) as e:
            if name in LENIENT and not required:
                how = "out of range" if isinstance(e, OutOfRange) else "unparseable"
                return _Problem(f"{name} {how}")
            return _Refused(f"wrong type: {name} (input field {src!r}) {e}")

    def columns(self, objs: list[dict[str, Any]]) -> dict[str, list[Any]] | None:
        """The items of `objs` (objects, one item each) field by field, every RawItem field:
        what __call__ gives each, or None when one of them is an error or has a problem
        (then __call__ maps them one by one, and says so). A text field that every object has
        as a string is taken whole, one that none has is one value; others go value by value."""
        out: dict[str, list[Any]] = {}
        for entry in self.plan:
            name, src, _, _, has_default, tf, is_text, aliases = entry
            vals = [o.get(src, _MISSING) for o in objs]
            types = set(map(type, vals))
            if is_text and types == {str} and (not has_default or all(vals)):
                out[name] = list(map(tf, vals)) if tf else vals
                continue
            if (
                "." not in src
                and types <= {_Missing, type(None)}
                and not any(a in o for a in aliases for o in objs)
            ):  # no object has the field or an alias of it: one value for all
                v = self._field(entry, {})
                if type(v) is _Refused or type(v) is _Problem:
                    return None
                out[name] = [_UNSET[name] if v is _MISSING else v] * len(objs)
                continue
            got = [self._field(entry, o) for o in objs]
            if {_Refused, _Problem} & set(map(type, got)):
                return None
            unset = _UNSET[name]
            out[name] = [unset if v is _MISSING else v for v in got]
        for o in objs:  # as __call__ counts and notes each
            self.objects += 1
            if self.unseen or self.objects <= KEYS_FROM:
                self._note_fields(o)
        return out

    def _note_fields(self, obj: dict[str, Any]) -> None:
        for name, src in list(self.unseen.items()):
            if src in obj or ("." in src and lookup(obj, src) is not _MISSING):
                del self.unseen[name]
        if len(self.keys_seen) < 64:
            self.keys_seen.update(dict.fromkeys(str(k) for k in islice(obj, 64)))

    def check_mapped(self) -> None:
        """After the last record: raise UnmappedField for a mapped field no record had."""
        if self.objects and self.unseen:
            item, src = next(iter(self.unseen.items()))
            raise UnmappedField(item, src, list(self.keys_seen))


def _alias(
    obj: dict[str, Any], aliases: tuple[str, ...], is_text: bool, src: str
) -> tuple[Any, str]:
    """(value, input field) of the first alias with a usable value; (_MISSING, src) if none."""
    for a in aliases:
        v = obj.get(a)
        if v is None or v == "":
            continue
        if is_text and (isinstance(v, bool) or not isinstance(v, (str, int))):
            continue
        return v, a
    return _MISSING, src


def map_object(obj: Any, spec: SourceConfig, ref: str) -> Record | RecordError:
    """One-off mapping of one object (readers build a Mapper once instead)."""
    return Mapper(spec)(obj, ref)


def _convert(name: str, v: Any, spec: SourceConfig) -> Any:
    if name in TEXT_FIELDS:
        if isinstance(v, list) and all(isinstance(x, str) for x in v) and name not in NUMBER_OK:
            v = "\n".join(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and name in NUMBER_OK:
            v = str(v)
        elif not isinstance(v, str):
            raise TypeError(f"is {type(v).__name__}, expected string")
        t = spec.transforms.get(name)
        return TRANSFORMS[t](v) if t else v
    if name == "author_is_bot":
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip().lower() in ("true", "false", "1", "0", "yes", "no"):
            return v.strip().lower() in ("true", "1", "yes")
        if isinstance(v, int) and v in (0, 1):
            return bool(v)
        raise TypeError(f"is {_short(v)}, expected true/false")
    if name in ("lines_removed", "lines_added"):
        if isinstance(v, bool):
            raise TypeError("is bool, expected integer")
        if isinstance(v, int) or (isinstance(v, str) and v.strip().isdigit()):
            n = int(v)
            if 0 <= n < 2**31:
                return n
            raise OutOfRange(f"is {_short(v)}, expected a non-negative integer below 2**31")
        if isinstance(v, float) and (v != v or abs(v) >= 2**31):
            raise OutOfRange(f"is {_short(v)}, expected a non-negative integer below 2**31")
        raise TypeError(f"is {_short(v)}, expected a non-negative integer")
    if name == "created_at":
        return parse_time(v)
    raise AssertionError(name)


def parse_time(v: Any) -> datetime | None:
    """Unix seconds (or milliseconds), or ISO 8601, as UTC; naive times are taken as UTC.

    Raises OutOfRange for a time outside years 1..9999 (1e30, a 400-digit integer, an
    infinity), ValueError for NaN or text that is not a time, TypeError for other types.
    """
    if isinstance(v, bool):
        raise TypeError("is bool, expected a time")
    if isinstance(v, (int, float)):
        if v != v:
            raise ValueError("is NaN, expected a time")
        try:
            secs = v / 1000 if abs(v) > 1e11 else v
            return datetime.fromtimestamp(secs, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise OutOfRange(f"{_short(v)} is out of range for a time") from None
    if isinstance(v, datetime):
        return _utc(v)
    if isinstance(v, str):
        s = v.strip()
        if not s:
            return None
        if re.fullmatch(r"-?\d+(\.\d+)?", s):
            return parse_time(float(s))
        try:
            t = datetime.fromisoformat(s.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{s[:40]!r} is not a unix time or ISO 8601 date") from None
        return _utc(t)
    raise TypeError(f"is {type(v).__name__}, expected a time")


def _utc(t: datetime) -> datetime:
    if t.tzinfo is None:
        return t.replace(tzinfo=timezone.utc)
    try:
        return t.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise OutOfRange(f"{t.isoformat()[:40]} has no UTC time in years 1..9999") from None


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _raw(obj: Any) -> str:
    try:
        return orjson.dumps(obj, default=str).decode()
    except TypeError:
        try:
            return repr(obj)[:4096]
        except (RecursionError, ValueError):  # a very deep object, a huge int
            return "<unprintable record>"

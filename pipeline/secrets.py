"""Secrets found and masked before the first write: `[REDACTED:<rule>]` keeps the kind.

Precise by default, never silently damaging code: only a high-confidence credential is masked
(and its item dropped by the filter); a guess is never masked, it flags the item instead.
Each rule has a tier (`pipeline.secret_rules`):
- HIGH, masked everywhere: private-key blocks, provider tokens with their own format or prefix
  (AWS AKIA..., GitHub ghp_/github_pat_, GitLab glpat-, Slack xox., Stripe sk_live_, Google
  AIza, Hugging Face hf_, npm, PyPI, OpenAI, SendGrid ...), AWS secret keys (named, 40
  random characters).
- SAMPLE, masked outside test fixtures and documentation (`sample_path`): JWTs and literal
  passwords in URLs. In a test or a doc they are examples (jwt.io's token in a JWT parser's
  tests), so an item whose path is one keeps them: `mask_columns` reads the batch's `path`.
- WEAK, never masked (`rules()` leaves them out): a credential word assigned a literal
  (`password = "..."`), a high-entropy assigned literal, detect-secrets' keyword detectors.
  `suspects` finds them, for the filter's `weak_secret` rule to flag the item with a reason
  (`password_assignment`, `high_entropy_literal` ...). Not in test fixtures or docs, comments or
  docstrings, not unquoted in source code (an expression), not for placeholders or examples.

Rules (`pipeline/secret_rules.py`) come from two places:
- the maintained detector set of Yelp's detect-secrets (Apache-2.0, pinned in pyproject): the
  `denylist` regexes of its RegexBasedDetector plugins (AWS, GitHub, GitLab, Slack, Stripe,
  OpenAI, PyPI, npm, Twilio, SendGrid, Azure, Artifactory, Discord, Telegram, basic-auth URLs
  ...), read as data from the installed package; a pattern's first group, when it holds 8 or
  more characters, is the secret (so `://user:[REDACTED]@host` keeps its shape), else the
  whole match (`(ghp|gho)_...` names a prefix), run on to the token's end. Left out: its
  IP-address detector (not a secret), and its private-key and JWT patterns, which match a
  header alone; ours below need the key body / all three JWT parts. Plus TOKEN_FORMATS, the
  token formats it lacks (fine-grained GitHub tokens, Google API keys, Hugging Face tokens).
- ours: private-key blocks (header, body, to the END line or the end of the text; a body and
  END line whose header was cut off, as in a diff's context), JWTs, `password / secret / token
  / api_key = <literal>` assignments (env, YAML, JSON, code), and high-entropy literals in any
  assignment; a literal may be triple-quoted or cut off at the end of its line.

Text whose quotes are escaped (`api_key = \\"k9...\\"`, a JSON line's raw text) is also read
with the backslashes before its quotes taken out, so every rule that needs a quote finds it.

Not secrets: values that are placeholders as a whole (`${X}`, `{token}`, `<x>`, `%(x)s`, `***`,
`changeme`, `your-api-key-here`, `TODO`), code (a call, an attribute, a subscript), tokenizer
special tokens (`"<|endoftext|>"`), git SHAs and other pure-hex digests, SRI hashes
(`sha512-...`), lock-file digests (`sha256:...`).

Speed: each rule has a prefilter regex (a superset); `mask_columns` runs the prefilters
vectorised over a whole Arrow batch (as Rust regexes that match wherever Python's do:
`rust_superset`) and calls the Python rules only on the rows they flag.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from typing import cast

import polars as pl
import pyarrow as pa

from pipeline.secret_rules import (
    CONTENT_FIELDS,
    KEYWORDS,
    SAMPLE,
    SAMPLE_PATH,
    TOKEN_FORMATS,
    WEAK,
    Comments,
    Rule,
    assignment_reason,
    code_path,
    detect_secrets_rules,
    entropy,
    key_tail_start,
    own_rules,
    placeholder,
    rust_ok,
    rust_superset,
    sample_path,
    strip_lookarounds,
    token_format_rules,
)

__all__ = [
    "CONTENT_FIELDS",
    "KEYWORDS",
    "MARK",
    "TOKEN_FORMATS",
    "Rule",
    "detect_secrets_rules",
    "entropy",
    "find",
    "flagged",
    "mask",
    "mask_columns",
    "mask_head",
    "placeholder",
    "rules",
    "rust_ok",
    "rust_superset",
    "sample_path",
    "shown",
    "strip_lookarounds",
    "suspect_column",
    "suspects",
    "weak_rules",
]

MARK = "[REDACTED:{}]"
HEAD_MARGIN = 16_384  # mask_head reads this far past its cut (longer than any token)


@lru_cache(maxsize=1)
def _all_rules() -> tuple[Rule, ...]:
    """Specific detectors first: where two find the same secret, the first names it."""
    own = own_rules()
    return (*own[:3], *token_format_rules(), *detect_secrets_rules(), *own[3:])


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """The rules that mask: HIGH and SAMPLE tiers."""
    return tuple(r for r in _all_rules() if r.tier != WEAK)


@lru_cache(maxsize=1)
def weak_rules() -> tuple[Rule, ...]:
    """The rules that only flag (WEAK tier): never masked."""
    return tuple(r for r in _all_rules() if r.tier == WEAK)


@lru_cache(maxsize=1)
def _samples() -> frozenset[int]:
    """The indices (in rules()) of SAMPLE rules: not secrets in test fixtures and docs."""
    return frozenset(k for k, r in enumerate(rules()) if r.tier == SAMPLE)


@lru_cache(maxsize=1)
def _prefilter() -> re.Pattern[str]:
    """One Python regex matching wherever any rule might."""
    return re.compile("|".join(f"(?:{r.prefilter})" for r in rules()))


@lru_cache(maxsize=2)
def _rust_prefilters(weak: bool = False) -> tuple[str, ...]:
    return tuple(rust_superset(r.prefilter) for r in (weak_rules() if weak else rules()))


# Backslashes before a quote: `\"` in a JSON line's raw text, in a string in code.
_ESCAPED_QUOTE = re.compile(r"""\\+(?=["'])""")
_RUST_ESCAPED_QUOTE = r"""\\+(["'])"""


def flagged(col: pl.Series, weak: bool = False) -> dict[int, list[int]]:
    """row -> the rules (of rules(), or weak_rules()) whose prefilter matches it (or its text
    with quotes unescaped), vectorised (one Rust scan per rule)."""
    df = pl.DataFrame({"t": col.fill_null("")})
    pres = _rust_prefilters(weak)
    exprs = [pl.col("t").str.contains(p).alias(str(k)) for k, p in enumerate(pres)]
    hits = df.select(exprs)
    any_hit = hits.select(pl.any_horizontal(pl.all())).to_series().arg_true()
    out: dict[int, list[int]] = {}
    for row, flags in zip(any_hit.to_list(), hits[any_hit].iter_rows(), strict=True):
        out[row] = [k for k, f in enumerate(flags) if f]
    escaped = df["t"].str.contains(_RUST_ESCAPED_QUOTE).arg_true()
    if len(escaped):
        view = df[escaped].select(pl.col("t").str.replace_all(_RUST_ESCAPED_QUOTE, "$1"))
        for row, flags in zip(escaped.to_list(), view.select(exprs).iter_rows(), strict=True):
            more = {k for k, f in enumerate(flags) if f}
            if more:
                out[row] = sorted(more.union(out.get(row, [])))
    return out


# ------------------------------------------------------------------------ masking

_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_-]*")


def _span(r: Rule, m: re.Match[str]) -> tuple[int, int]:
    if r.group == "quoted_or_bare":
        g = "quoted" if m.group("quoted") is not None else "bare"
        return m.span(g)
    if r.group == "key_tail":  # an END line alone is a mention: an empty span, no finding
        s = key_tail_start(m)
        return (m.end() if s is None else s), m.end()
    if r.group == 1:  # detect-secrets: group 1 is the secret when it holds one, else a prefix
        s, e = m.span(1)
        s, e = (s, e) if s >= 0 and e - s >= 8 else m.span(0)
    else:
        s, e = m.span(r.group)
    if r.whole_token and e == m.end():  # a pattern of fixed length stops inside a longer token
        e = _TOKEN_TAIL.match(m.string, e).end()  # type: ignore[union-attr]
    return s, e


def _quotes(r: Rule) -> bool:
    """Whether the rule's pattern has a quote in it: only such rules can find more once quotes
    are unescaped."""
    return re.search("[\"']", r.pattern.pattern) is not None


Finding = tuple[int, int, int, str]  # start, -end, rule index, name (a WEAK rule: the reason)


def _found(
    text: str,
    only: list[int] | None,
    quoting: bool = False,
    rule_set: tuple[Rule, ...] | None = None,
    skip: frozenset[int] = frozenset(),
) -> list[Finding]:
    """(start, -end, rule index, rule name) of every finding, overlaps included; quoting:
    of the rules with a quote in their pattern only; rule_set: rules() unless given; skip:
    rule indices not to run."""
    rs = rules() if rule_set is None else rule_set
    if only is None and rule_set is None and not _prefilter().search(text):
        return []
    found = []
    for k in range(len(rs)) if only is None else only:
        r = rs[k]
        if k in skip or (quoting and not _quotes(r)):
            continue
        if only is None and not re.search(r.prefilter, text):
            continue
        for m in r.pattern.finditer(text):
            if r.check is None or r.check(m):
                s, e = _span(r, m)
                if e > s:
                    name = r.name
                    if r.tier == WEAK:
                        name = (
                            assignment_reason(m)
                            if r.group == "quoted_or_bare"
                            else _WEAK_NAMES.get(r.name, r.name)
                        )
                    found.append((s, -e, k, name))
    return found


_WEAK_NAMES = {"high_entropy_assignment": "high_entropy_literal"}


def _unescaped(text: str) -> tuple[str, list[int], list[int]] | None:
    """The text with the backslashes before its quotes taken out, and where: the view index
    of each quote that lost some, and how many were taken out up to it (None: none were)."""
    at_view, removed, parts, at, n = [], [], [], 0, 0
    for m in _ESCAPED_QUOTE.finditer(text):
        parts.append(text[at : m.start()])
        n += m.end() - m.start()
        at_view.append(m.end() - n)
        removed.append(n)
        at = m.end()
    if not at_view:
        return None
    parts.append(text[at:])
    return "".join(parts), at_view, removed


def _all_found(
    text: str,
    only: list[int] | None,
    rule_set: tuple[Rule, ...] | None = None,
    skip: frozenset[int] = frozenset(),
) -> list[Finding]:
    """_found on the text and on its view with quotes unescaped (positions in the text)."""
    found = _found(text, only, False, rule_set, skip)
    view = _unescaped(text) if "\\" in text else None
    if view is not None:
        v, at_view, removed = view

        def orig(i: int) -> int:
            k = bisect_right(at_view, i) - 1
            return i + (removed[k] if k >= 0 else 0)

        found += [
            (orig(s), -(orig(-ne - 1) + 1), k, n)
            for s, ne, k, n in _found(v, only, True, rule_set, skip)
        ]
    return found


def _leftmost(found: list[Finding]) -> list[tuple[int, int, str]]:
    found.sort()
    out: list[tuple[int, int, str]] = []
    for s, neg_e, _, name in found:
        e = -neg_e
        if out and s < out[-1][1]:
            continue  # inside an earlier, wider finding
        out.append((s, e, name))
    return out


def find(
    text: str, only: list[int] | None = None, path: str | None = None
) -> list[tuple[int, int, str]]:
    """(start, end, rule) of every secret in text, leftmost first, without overlaps.

    only: the indices of the rules to try (their prefilters already matched); path: the
    item's file, where it is a test fixture or documentation SAMPLE rules do not apply."""
    if not text:
        return []
    skip = _samples() if sample_path(path) else frozenset()
    return _leftmost(_all_found(text, only, None, skip))


def suspects(
    text: str, path: str | None = None, only: list[int] | None = None
) -> list[tuple[int, int, str]]:
    """(start, end, reason) of every WEAK finding: possible secrets, never masked. path: the
    file the text is from (None: not a file's text, as a commit message). None in a test
    fixture or documentation, in a comment or docstring, where a masking rule finds a secret
    (it is masked), nor an unquoted value in source code (an expression). only: the indices
    (in weak_rules()) of the rules to try (their prefilters already matched)."""
    if not text or sample_path(path):
        return []
    found = _leftmost(_all_found(text, only, weak_rules()))
    if not found:
        return []
    code = code_path(path)
    strong = find(text, path=path)
    comments = Comments(text)
    out = []
    for s, e, reason in found:
        if any(s < se and ss < e for ss, se, _ in strong) or s in comments:
            continue
        if code and text[s - 1 : s] not in ('"', "'"):
            continue  # unquoted in source code: an expression
        out.append((s, e, reason))
    return out


def _replaced(text: str, hits: list[tuple[int, int, str]], end: int) -> tuple[str, list[str]]:
    """text[:end] with each finding that starts before `end` replaced by its mark (whole,
    also where it runs on past `end`)."""
    parts, at, fired = [], 0, []
    for s, e, name in hits:
        if s >= end:
            break
        parts += [text[at:s], MARK.format(name)]
        fired.append(name)
        at = e
    parts.append(text[at:end])
    return "".join(parts), fired


def mask(
    text: str, only: list[int] | None = None, path: str | None = None
) -> tuple[str, list[str]]:
    """(text with every secret replaced by [REDACTED:<rule>], the rules that fired); path:
    the item's file (SAMPLE rules do not apply in test fixtures and documentation)."""
    hits = find(text, only, path)
    return _replaced(text, hits, len(text)) if hits else (text, [])


def mask_head(text: str, limit: int) -> tuple[str, list[str]]:
    """mask(text[:limit]), the secrets found in text[:limit + HEAD_MARGIN]: one the cut goes
    through is found whole and masked, never shown in part (nor missed, cut too short)."""
    return _replaced(text, find(text[: limit + HEAD_MARGIN]), min(limit, len(text)))


def shown(text: str) -> str:
    """Text from the data as a message shows it: secrets masked, on one line, control
    characters escaped (`\\x1b`, never a terminal escape sequence: console.visible)."""
    from pipeline.console import visible  # here: ingest workers mask without the console

    return visible(mask(text)[0], one_line=True)


def mask_columns(
    batch: pa.RecordBatch, columns: tuple[str, ...]
) -> tuple[pa.RecordBatch, dict[str, int]]:
    """The batch with secrets masked in `columns` (string), and secrets masked per rule.

    The prefilters run vectorised over the row's columns joined (one scan per rule, the
    regexes compiled once a batch); Python looks only at the rows they flag. A row whose
    `path` (when the batch has one) is a test fixture or documentation keeps the SAMPLE
    findings (JWTs, passwords in URLs) of its file's text (CONTENT_FIELDS): examples there."""
    fired: dict[str, int] = {}
    if batch.num_rows == 0:
        return batch, fired
    cols = [batch.schema.get_field_index(c) for c in columns]
    frame = pl.DataFrame(
        [cast(pl.Series, pl.from_arrow(batch.column(i))).alias(str(i)) for i in cols]
    )
    joined = frame.select(
        pl.concat_str([pl.col(str(i)).fill_null("") for i in cols], separator="\n")
    ).to_series()
    which = flagged(joined)
    if not which:
        return batch, fired
    rows = list(which)
    samples: dict[int, list[int]] = {}  # row -> its rules but SAMPLE ones: a test's or doc's
    if "path" in batch.schema.names:
        paths = batch.column(batch.schema.get_field_index("path"))
        for k in rows:
            if sample_path(paths[k].as_py()):
                samples[k] = [i for i in which[k] if i not in _samples()]
    arrays = list(batch.columns)
    for i in cols:
        col = frame[str(i)]
        content = batch.schema.field(i).name in CONTENT_FIELDS
        fixed = {}
        for k, v in zip(rows, col.gather(rows).to_list(), strict=True):
            only = samples.get(k, which[k]) if content else which[k]
            new, names = mask(v, only) if v else (v, [])
            for n in names:
                fired[n] = fired.get(n, 0) + 1
            if names:
                fixed[k] = new
        if fixed:
            col = col.clone().scatter(list(fixed), list(fixed.values()))
            arrays[i] = col.to_arrow().cast(batch.schema.field(i).type)
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema), fired


# ------------------------------------------------------------------------ weak: flags


def suspect_column(frame: pl.DataFrame, fields: tuple[str, ...]) -> pl.Series:
    """Per row, `<reason> in <field>` for each reason `suspects` finds in each field (once a
    field, in field order): the filter's `weak_secret` rule. The item's path counts for its
    file's text (CONTENT_FIELDS) only. The prefilters run vectorised (on the text, and on its
    view with quotes unescaped), in a file's text only where its path is neither a test fixture
    nor documentation; Python looks only at the rows they flag."""
    n = frame.height
    rows: list[int] = []
    found_in: list[str] = []
    if n:
        path = frame["path"] if "path" in frame.columns else pl.Series([None] * n, dtype=pl.String)
        sample = path.fill_null("").str.contains(SAMPLE_PATH).to_list()
        for f in fields:
            t = frame[f]
            content = f in CONTENT_FIELDS
            for k, only in flagged(t, weak=True).items():
                if content and sample[k]:
                    continue
                found = suspects(t[k], path[k] if content else None, only)
                for r in dict.fromkeys(r for _, _, r in found):
                    rows.append(k)
                    found_in.append(f"{r} in {f}")
    hits = (
        pl.DataFrame({"row": rows, "v": found_in}, schema={"row": pl.UInt32, "v": pl.String})
        .group_by("row", maintain_order=True)
        .agg("v")
    )
    every = pl.DataFrame({"row": pl.arange(0, n, dtype=pl.UInt32, eager=True)})
    col = every.join(hits, on="row", how="left", maintain_order="left")["v"]
    return col.fill_null(pl.lit([], dtype=pl.List(pl.String)))

"""Finding secrets in text: the rule set in the order findings are named, the prefilters run
vectorised over a column (`flagged`), `find` (the secrets the masking rules find, leftmost,
without overlaps) and `suspects` (WEAK findings, never masked), and `suspect_column`, the
filter's `weak_secret` findings for a whole batch. Every regex here runs on RE2
(pipeline.linear): linear in the text.

A scan may be given a Budget: the work it may do, counted (never timed, so what passes it does
not depend on the machine): each rule's scan of a text costs the text's length, each match
MATCH_COST more and its own length (the match's checks run in Python); past the budget the scan
stops with OverBudget."""

from __future__ import annotations

from bisect import bisect_right
from functools import lru_cache

import polars as pl

from pipeline import linear
from pipeline.linear import Match, Regex
from pipeline.secrets.detectors import detect_secrets_rules
from pipeline.secrets.encodings import TRIGGERS, encoded_found, encoding_rules
from pipeline.secrets.places import CONTENT_FIELDS, SAMPLE_PATH, Comments, code_path, sample_path
from pipeline.secrets.rules import (
    NEXT,
    SAMPLE,
    WEAK,
    Rule,
    assignment_reason,
    key_tail_start,
    own_rules,
    token_format_rules,
)
from pipeline.secrets.rust import rust_superset
from pipeline.secrets.screen import Screen, passed, screen


@lru_cache(maxsize=1)
def _all_rules() -> tuple[Rule, ...]:
    """Specific detectors first: where two find the same secret, the first names it."""
    own = own_rules()
    return (*own[:3], *token_format_rules(), *detect_secrets_rules(), *own[3:], *encoding_rules())


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """The rules that mask: HIGH and SAMPLE tiers."""
    return tuple(r for r in _all_rules() if r.tier != WEAK)


@lru_cache(maxsize=1)
def weak_rules() -> tuple[Rule, ...]:
    """The rules that only flag (WEAK tier): never masked."""
    return tuple(r for r in _all_rules() if r.tier == WEAK)


@lru_cache(maxsize=1)
def sample_rules() -> frozenset[int]:
    """The indices (in rules()) of SAMPLE rules: not secrets in test fixtures and docs."""
    return frozenset(k for k, r in enumerate(rules()) if r.tier == SAMPLE)


@lru_cache(maxsize=1)
def _prefilter() -> Regex:
    """One regex matching wherever any rule might (the views' triggers find nothing)."""
    return linear.compile("|".join(f"(?:{r.prefilter})" for r in rules() if r.name not in TRIGGERS))


@lru_cache(maxsize=256)
def _rule_prefilter(prefilter: str) -> Regex:
    return linear.compile(prefilter)


@lru_cache(maxsize=2)
def _rust_prefilters(weak: bool = False) -> tuple[str, ...]:
    return tuple(rust_superset(r.prefilter) for r in (weak_rules() if weak else rules()))


# Backslashes before a quote: `\"` in a JSON line's raw text, in a string in code (the quote
# is taken too: RE2 has no look-ahead, and a look-ahead after a run was quadratic in Python).
_ESCAPED_QUOTE = linear.compile(r"""\\+["']""")
_RUST_ESCAPED_QUOTE = r"""\\+(["'])"""


def flagged(col: pl.Series, weak: bool = False) -> dict[int, list[int]]:
    """row -> the rules (of rules(), or weak_rules()) whose prefilter matches it (or its text
    with quotes unescaped), vectorised: a rule with a literal screen (screen.py) is scanned
    only on the rows holding one of its strings (all such rules' strings found in one pass),
    any other rule on every row (one Rust scan each)."""
    df = pl.DataFrame({"t": col.fill_null("")})
    pres = _rust_prefilters(weak)
    screens = _screens(weak)
    out: dict[int, list[int]] = {}
    full = [k for k, sc in enumerate(screens) if sc is None]
    _note(out, df, pres, full, None)
    screened = [k for k, sc in enumerate(screens) if sc is not None]
    rows = passed(df["t"], [sc for sc in screens if sc is not None]).arg_true()
    if len(rows):
        _note(out, df[rows], pres, screened, rows.to_list())
    escaped = df["t"].str.contains(_RUST_ESCAPED_QUOTE).arg_true()
    if len(escaped):
        view = df[escaped].select(pl.col("t").str.replace_all(_RUST_ESCAPED_QUOTE, "$1"))
        _note(out, view, pres, list(range(len(pres))), escaped.to_list())
    return {row: sorted(set(ks)) for row, ks in sorted(out.items())}


def _note(
    out: dict[int, list[int]],
    df: pl.DataFrame,
    pres: tuple[str, ...],
    which: list[int],
    rows: list[int] | None,
) -> None:
    """Add to `out` the rules of `which` whose prefilter matches a row of `df` (row k of df is
    row rows[k] of the column; rows None: the same)."""
    if not which or df.height == 0:
        return
    hits = df.select([pl.col("t").str.contains(pres[k]).alias(str(k)) for k in which])
    any_hit = hits.select(pl.any_horizontal(pl.all())).to_series().arg_true()
    for k, flags in zip(any_hit.to_list(), hits[any_hit].iter_rows(), strict=True):
        row = k if rows is None else rows[k]
        out.setdefault(row, []).extend(r for r, f in zip(which, flags, strict=True) if f)


@lru_cache(maxsize=2)
def _screens(weak: bool = False) -> tuple[Screen | None, ...]:
    return tuple(screen(r.prefilter) for r in (weak_rules() if weak else rules()))


# ------------------------------------------------------------------------ the budget

# What one match costs, in characters scanned: its checks and span run in Python, about what
# RE2 takes to scan 4,096 characters (a text dense with matches costs 100-350 ns a character)
MATCH_COST = 4096


class OverBudget(Exception):
    """A scan that would do more work than its Budget allows."""


class Budget:
    """The work a scan may still do (characters scanned, MATCH_COST a match)."""

    __slots__ = ("limit", "spent")

    def __init__(self, limit: int):
        self.limit = limit
        self.spent = 0

    def spend(self, n: int) -> None:
        self.spent += n
        if self.spent > self.limit:
            raise OverBudget(f"more than {self.limit:,} units of secret-scan work")


# ------------------------------------------------------------------------ finding

_TOKEN_RUN = linear.compile(r"[A-Za-z0-9_-]+")


class _Tokens:
    """Where each run of token characters of a text ends, found once (a whole-token rule runs
    each of its matches on to its run's end: one scan, not one per match)."""

    def __init__(self, text: str):
        self.text = text
        self.runs: tuple[list[int], list[int]] | None = None

    def end(self, at: int) -> int:
        """The end of the token run at `at` (`at` itself where none is there)."""
        if self.runs is None:
            spans = [m.span() for m in _TOKEN_RUN.finditer(self.text)]
            self.runs = [s for s, _ in spans], [e for _, e in spans]
        starts, ends = self.runs
        k = bisect_right(starts, at) - 1
        return ends[k] if k >= 0 and ends[k] > at else at


def _span(r: Rule, m: Match, tokens: _Tokens) -> tuple[int, int]:
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
    end = m.end()
    if r.ahead and m.group(NEXT) is not None:  # the character after the match, not the secret
        end = m.start(NEXT)
        e = min(e, end)
    if r.whole_token and e == end:  # a pattern of fixed length stops inside a longer token
        e = tokens.end(e)
    return s, e


def _quotes(r: Rule) -> bool:
    """Whether the rule's pattern has a quote in it: only such rules can find more once quotes
    are unescaped."""
    return '"' in r.pattern.pattern or "'" in r.pattern.pattern


Finding = tuple[int, int, int, str]  # start, -end, rule index, name (a WEAK rule: the reason)


def _found(
    text: str,
    only: list[int] | None,
    quoting: bool = False,
    rule_set: tuple[Rule, ...] | None = None,
    skip: frozenset[int] = frozenset(),
    budget: Budget | None = None,
) -> list[Finding]:
    """(start, -end, rule index, rule name) of every finding, overlaps included; quoting:
    of the rules with a quote in their pattern only; rule_set: rules() unless given; skip:
    rule indices not to run; budget: the work the scan may do (OverBudget past it)."""
    rs = rules() if rule_set is None else rule_set
    if only is None and rule_set is None and not _prefilter().search(text):
        return []
    found = []
    tokens = _Tokens(text)
    for k in range(len(rs)) if only is None else only:
        r = rs[k]
        if k in skip or (quoting and not _quotes(r)):
            continue
        if only is None and not _rule_prefilter(r.prefilter).search(text):
            continue
        if budget is not None:
            budget.spend(len(text))
        for m in r.pattern.finditer(text):
            if budget is not None:
                budget.spend(MATCH_COST + m.end() - m.start())
            if r.check is None or r.check(m):
                s, e = _span(r, m, tokens)
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
        quote = m.end() - 1
        parts.append(text[at : m.start()])
        n += quote - m.start()
        at_view.append(quote - n)
        removed.append(n)
        at = quote
    if not at_view:
        return None
    parts.append(text[at:])
    return "".join(parts), at_view, removed


def _all_found(
    text: str,
    only: list[int] | None,
    rule_set: tuple[Rule, ...] | None = None,
    skip: frozenset[int] = frozenset(),
    budget: Budget | None = None,
    views: bool = True,
) -> list[Finding]:
    """_found on the text and on its view with quotes unescaped, and (views) the findings of
    its encodings' views (pipeline.secrets.encodings); positions in the text."""
    found = _found(text, only, False, rule_set, skip, budget)
    if budget is not None and "\\" in text:
        budget.spend(len(text))
    view = _unescaped(text) if "\\" in text else None
    if view is not None:
        v, at_view, removed = view

        def orig(i: int) -> int:
            k = bisect_right(at_view, i) - 1
            return i + (removed[k] if k >= 0 else 0)

        found += [
            (orig(s), -(orig(-ne - 1) + 1), k, n)
            for s, ne, k, n in _found(v, only, True, rule_set, skip, budget)
        ]
    if views:

        def run(seen: str, blob: bool) -> list[Finding]:  # a decoded blob: HIGH rules only
            high = (skip | sample_rules()) if blob else skip
            return _all_found(seen, None, rule_set, high, budget, False)

        rs = rules() if rule_set is None else rule_set
        flags = None if only is None else {rs[k].name for k in only}
        found += encoded_found(text, rule_set is not None, run, flags)
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
    text: str,
    only: list[int] | None = None,
    path: str | None = None,
    budget: Budget | None = None,
) -> list[tuple[int, int, str]]:
    """(start, end, rule) of every secret in text, leftmost first, without overlaps.

    only: the indices of the rules to try (their prefilters already matched); path: the
    item's file, where it is a test fixture or documentation SAMPLE rules do not apply;
    budget: the work the scan may do (OverBudget past it)."""
    if not text:
        return []
    skip = sample_rules() if sample_path(path) else frozenset()
    return _leftmost(_all_found(text, only, None, skip, budget))


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

"""Rules -> polars expressions -> kept / rejected, with counts (reference.py: the per-row oracle).

Each active rule becomes one boolean expression, evaluated over a whole batch at once. Rules
run in order: an item matched by several drop rules is rejected under the first (`rule`,
`reason`) and lists all of them (`rules`). Reasons are computed on the rejected rows only and
never quote matched text; secrets are masked in every output column a secret rule scans.
A `secret` rule's `sample_patterns` apply outside test fixtures and docs only; a `weak_secret`
rule (pipeline.secrets.suspects, in Python on the rows its prefilter flags) never masks, and
its flag names the reason: `<rule>:<reason>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from pipeline.filter.mirrors import Mirror
from pipeline.filter.reference import reference_decide
from pipeline.filter.regex import (
    BLANK_RE,
    COMMENT_NOTE_RE,
    DOTTED_VERSION_RE,
    FORMAT_STRIP_RE,
    HASH_CODE_RE,
    IMPORT_KEYWORD_RE,
    IMPORT_LINE_RE,
    MINIFIED_SEPARATORS,
    MINIFIED_SPACE_RE,
    MINIFIED_SYMBOL_RE,
    NONBLANK_LINE_RE,
    REPO_NAME_CHARS,
    REPO_NAME_RE,
    REPO_SLOT,
    SLASH_CODE_RE,
    TOKEN_RE,
    WORD_RE,
    combine,
    repo_literal,
    with_flags,
)
from pipeline.filter.rules import Rule, RuleSet
from pipeline.schema import HASH_COMMENT_LANGUAGES, ITEM_SCHEMA, PROSE_LANGUAGES
from pipeline.secrets import CONTENT_FIELDS, SAMPLE_PATH, suspect_column
from pipeline.shapes.normalise import normalise_text, normalise_text_expr, vectorised

ITEM_COLS = ITEM_SCHEMA.names
__all__ = ["FilterResult", "apply_rules", "reference_decide"]


def _text(f: str) -> pl.Expr:
    return pl.col(f).fill_null("")


def _measure(rule: Rule) -> pl.Expr:
    unit, fields = rule.params["unit"], rule.params["field"]
    parts = []
    for f in fields:
        c = _text(f)
        if unit == "chars":
            e = c.str.len_chars()
        elif unit == "lines":  # as count_lines: "" is 0 lines, "a" and "a\n" are 1
            e = (
                pl.when(c == "")
                .then(0)
                .otherwise(
                    c.str.count_matches("\n", literal=True)
                    + (~c.str.ends_with("\n")).cast(pl.UInt32)
                )
            )
        elif unit == "tokens":
            e = c.str.count_matches(TOKEN_RE)
        else:  # line_chars: the longest line
            e = c.str.split("\n").list.eval(pl.element().str.len_chars()).list.max()
        parts.append(e.cast(pl.Int64))
    if len(parts) == 1:
        return parts[0]
    return pl.max_horizontal(parts) if unit == "line_chars" else pl.sum_horizontal(parts)


def _rx(rule: Rule, pat: str) -> str:
    return with_flags(pat, bool(rule.params.get("ignore_case")))


def _repo_hits(s: pl.Series, rx: str) -> pl.Series:
    """Rows of struct column s (t: text, r: repo) whose text matches glob regex rx with its
    `{repo}` slots filled by the row's repository name. The column is scanned once with any
    plain name in the slots; only the rows that pass are matched again, one regex per name
    (a regex per row costs 160 us: 8 s of 50,000 items)."""
    text, repo = s.struct.field("t"), s.struct.field("r")
    out = np.zeros(len(s), dtype=bool)
    rows = np.flatnonzero(text.str.contains(rx.replace(REPO_SLOT, REPO_NAME_CHARS)).to_numpy())
    if len(rows):
        names = repo.gather(rows).str.extract(REPO_NAME_RE, 1)
        cand = pl.DataFrame({"row": rows, "t": text.gather(rows), "name": names})
        for (name,), g in cand.drop_nulls("name").group_by("name", maintain_order=True):
            hit = g["t"].str.contains(rx.replace(REPO_SLOT, repo_literal(str(name))))
            out[g["row"].to_numpy()[hit.to_numpy()]] = True
    return pl.Series(out)


def _matches(rule: Rule, f: str, pat: str) -> pl.Expr:
    """One pattern of the rule on one field (a `{repo}` glob per repository: _repo_hits)."""
    if REPO_SLOT in pat:
        rx = _rx(rule, pat)
        return pl.struct(_text(f).alias("t"), _text("repo").alias("r")).map_batches(
            lambda s: _repo_hits(s, rx), return_dtype=pl.Boolean
        )
    return _text(f).str.contains(_rx(rule, pat))


def _any_pattern(rule: Rule, f: str, key: str = "patterns") -> pl.Expr:
    """One combined regex per field: a single scan over the column (`{repo}` globs apart)."""
    pats = [p for _, p in rule.params[key] if REPO_SLOT not in p]
    hits = [_matches(rule, f, p) for _, p in rule.params[key] if REPO_SLOT in p]
    if pats:
        hits.insert(0, _text(f).str.contains(combine(pats, bool(rule.params.get("ignore_case")))))
    return hits[0] if len(hits) == 1 else pl.any_horizontal(hits)


def _in_sample() -> pl.Expr:
    """The item's file is a test fixture or documentation (pipeline.secret_rules.SAMPLE_PATH)."""
    return _text("path").str.contains(SAMPLE_PATH)


def _not_sample(f: str) -> pl.Expr:
    """Where a sample pattern applies in field f: everywhere but in the text of a test
    fixture's or a doc's file (CONTENT_FIELDS)."""
    return ~_in_sample() if f in CONTENT_FIELDS else pl.lit(True)


def _secret_hit(rule: Rule, f: str) -> pl.Expr:
    """A secret rule's patterns, or its sample_patterns outside test fixtures and docs."""
    hit = _any_pattern(rule, f)
    if rule.params["sample_patterns"]:
        hit = hit | (_not_sample(f) & _any_pattern(rule, f, "sample_patterns"))
    return hit


def _why(rule_index: int) -> str:
    """The column holding a weak_secret rule's findings (`<reason> in <field>`)."""
    return f"__why_{rule_index}"


def _blank(f: str) -> pl.Expr:
    return _text(f).str.contains(BLANK_RE)


def _path_hit(rule: Rule) -> pl.Expr:
    """A glob matches the path, no `except` glob does, and (before_blank) the item only adds."""
    hit = _any_pattern(rule, "path")
    if rule.params["except_patterns"]:
        hit = hit & ~_any_pattern(rule, "path", "except_patterns")
    if rule.params["before_blank"]:
        hit = hit & _blank("before")
    return hit


def _format_only() -> pl.Expr:
    """Equal once formatting is removed, or import lines that only changed order.

    The import test's regexes and word lists run only on hunks in an import block (others
    see ""): it is the costly part, and few hunks need it.
    """

    def norm(f: str) -> pl.Expr:
        return _text(f).str.replace_all(FORMAT_STRIP_RE, "").str.replace_all("'", '"', literal=True)

    in_imports = pl.any_horizontal(
        [_text(f).str.contains(IMPORT_KEYWORD_RE) for f in ("before", "after", "context")]
    )

    def only_if(cond: pl.Expr, f: str) -> pl.Expr:
        return pl.when(cond).then(_text(f)).otherwise(pl.lit(""))

    def imports_only(f: str) -> pl.Expr:
        return only_if(in_imports, f).str.replace_all(IMPORT_LINE_RE, "").str.contains(BLANK_RE)

    candidate = in_imports & imports_only("before") & imports_only("after")

    def words(f: str) -> pl.Expr:
        return only_if(candidate, f).str.extract_all(r"\w+").list.sort()

    reordered = candidate & (words("before") == words("after"))
    return ((norm("before") == norm("after")) | reordered) & ~_same_but_whitespace()


def _minified_lines(rule: Rule, f: str) -> pl.Expr:
    """The field has a line at least min_line_chars long of which at most max_space_share
    percent are spaces or tabs, min_symbol_share to max_symbol_share percent symbols, and at
    least min_separator_share percent ; and as many }. Only the long lines (few) are counted."""
    p = rule.params
    e = pl.element()
    n = e.str.len_chars().cast(pl.Int64)

    def pct(x: pl.Expr) -> pl.Expr:
        return x.cast(pl.Int64) * 100

    symbols = pct(e.str.count_matches(MINIFIED_SYMBOL_RE))
    dense = (pct(e.str.count_matches(MINIFIED_SPACE_RE)) <= p["max_space_share"] * n) & (
        symbols >= p["min_symbol_share"] * n
    )
    dense = dense & (symbols <= p["max_symbol_share"] * n)
    for sep in MINIFIED_SEPARATORS:
        dense = dense & (
            pct(e.str.count_matches(sep, literal=True)) >= p["min_separator_share"] * n
        )
    long = _text(f).str.split("\n").list.eval(e.filter(e.str.len_chars() >= p["min_line_chars"]))
    return long.list.eval(dense).list.any()


def _side_words(rule: Rule) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """unrelated_sides: (candidate, words both sides share, words of either side). Words are
    extracted only where both sides have min_lines non-blank lines (the costly part)."""
    p = rule.params
    enough = pl.all_horizontal(
        [
            _text(f).str.count_matches(NONBLANK_LINE_RE) >= p["min_lines"]
            for f in ("before", "after")
        ]
    )

    def words(f: str) -> pl.Expr:
        return (
            pl.when(enough)
            .then(_text(f))
            .otherwise(pl.lit(""))
            .str.extract_all(WORD_RE)
            .list.unique()
        )

    wb, wa = words("before"), words("after")
    cand = enough & (wb.list.len() >= p["min_words"]) & (wa.list.len() >= p["min_words"])
    shared = wb.list.set_intersection(wa).list.len().cast(pl.Int64)
    return cand, shared, wb.list.set_union(wa).list.len().cast(pl.Int64)


def _unrelated_sides(rule: Rule) -> pl.Expr:
    cand, shared, union = _side_words(rule)
    return cand & (shared * 100 < rule.params["max_shared_words"] * union)


def _commented_code(rule: Rule) -> pl.Expr:
    """In code (not prose), most non-blank added lines are line comments holding code (the
    item's language's marker; not a TODO/FIXME/NOTE), and no `except` regex matches the
    comment (a commit that says it disables or comments out code)."""
    e = pl.element()
    after = _text("after")
    language = pl.col("language").fill_null("")
    cand = after.str.contains(r"(?m)^[ \t]*(?://|#)") & ~language.is_in(list(PROSE_LANGUAGES))
    lines = (
        pl.when(cand)
        .then(after)
        .otherwise(pl.lit(""))
        .str.split("\n")
        .list.eval(e.filter(e.str.contains(r"\S")))
    )

    def n_code(code: str) -> pl.Expr:
        is_code = e.str.contains(code) & ~e.str.contains(COMMENT_NOTE_RE)
        return lines.list.eval(is_code.cast(pl.Int64)).list.sum()

    hash_lang = language.is_in(list(HASH_COMMENT_LANGUAGES))
    code = pl.when(hash_lang).then(n_code(HASH_CODE_RE)).otherwise(n_code(SLASH_CODE_RE))
    hit = cand & (code * 2 > lines.list.len().cast(pl.Int64))
    if rule.params["except_patterns"]:
        hit = hit & ~_any_pattern(rule, "comment", "except_patterns")
    return hit


def _versions_only(rule: Rule) -> pl.Expr:
    """Before and after differ, both hold a dotted version, and they are equal once numbers,
    versions and hashes are folded (shapes' normalise_text; its Python on the rare strings
    where polars' regex could differ)."""
    language = pl.col("language").fill_null("")
    cand = language.is_in(list(rule.params["languages"])) & (_text("before") != _text("after"))
    cand = cand & pl.all_horizontal(
        [_text(f).str.contains(DOTTED_VERSION_RE) for f in ("before", "after")]
    )

    def key(f: str) -> pl.Expr:
        return (
            pl.when(cand)
            .then(_text(f))
            .otherwise(pl.lit(""))
            .map_batches(
                lambda s: vectorised(s, normalise_text_expr, normalise_text),
                return_dtype=pl.String,
            )
        )

    return cand & (key("before") == key("after"))


def _under(m: Mirror) -> pl.Expr:
    return (pl.col("repo") == m.repo) & _text("path").str.starts_with(m.folder + "/")


def _same_but_whitespace() -> pl.Expr:
    """Equal once all whitespace is removed (no-ops included)."""
    ws = r"\s+"
    return _text("before").str.replace_all(ws, "") == _text("after").str.replace_all(ws, "")


def _noop() -> pl.Expr:
    return (_text("before") == _text("after")) & (pl.col("lines_removed") == pl.col("lines_added"))


def _hit(rule: Rule, mirrors: tuple[Mirror, ...]) -> pl.Expr:
    """The rule's boolean expression: True where it matches an item (a mirror rule: the
    mirror folders found for it over the whole input)."""
    t, p = rule.type, rule.params
    if t == "mirror":
        return pl.any_horizontal([_under(m) for m in mirrors]) if mirrors else pl.lit(False)
    if t == "length":
        v = _measure(rule)
        conds = []
        if p["min"] is not None:
            conds.append(v < p["min"])
        if p["max"] is not None:
            conds.append(v > p["max"])
        return pl.any_horizontal(conds)
    if t == "noop":
        return _noop()
    if t == "whitespace_only":
        return _same_but_whitespace() & ~_noop()
    if t == "format_only":
        return _format_only()
    if t == "blank":
        return pl.all_horizontal([_blank(f) for f in p["field"]])
    if t == "minified":
        return pl.any_horizontal([_minified_lines(rule, f) for f in p["field"]])
    if t == "unrelated_sides":
        return _unrelated_sides(rule)
    if t == "commented_code":
        return _commented_code(rule)
    if t == "versions_only":
        return _versions_only(rule)
    if t == "regex":
        hit = pl.any_horizontal([_any_pattern(rule, f) for f in p["field"]])
        if p["except_patterns"]:
            hit = hit & ~pl.any_horizontal(
                [_any_pattern(rule, f, "except_patterns") for f in p["field"]]
            )
        return hit
    if t == "secret":
        return pl.any_horizontal([_secret_hit(rule, f) for f in p["field"]])
    if t == "path":
        return _path_hit(rule)
    if t == "bot_author":
        conds = [pl.col("author_is_bot")] if p["use_author_is_bot"] else []
        if p["patterns"]:
            conds.append(_any_pattern(rule, "author"))
        return pl.any_horizontal(conds)
    if t == "language":
        return ~pl.col("language").is_in(list(p["allow"]))
    raise AssertionError(t)  # validate_rule admits only the types above


def _when_chain(cases: list[tuple[pl.Expr, pl.Expr]], default: pl.Expr) -> pl.Expr:
    expr: Any = None  # a when/then chain
    for cond, val in cases:
        expr = pl.when(cond).then(val) if expr is None else expr.when(cond).then(val)
    return default if expr is None else expr.otherwise(default)


def _reason(rule: Rule, mirrors: tuple[Mirror, ...]) -> pl.Expr:
    """Why the rule matched, in words; evaluated on the rejected rows only."""
    t, p = rule.type, rule.params
    lit = pl.lit
    if t == "mirror":
        return _when_chain([(_under(m), lit(m.reason())) for m in mirrors], lit(rule.name))
    if t == "length":
        v = _measure(rule)
        what = "+".join(p["field"])
        unit = "chars in its longest line" if p["unit"] == "line_chars" else p["unit"]
        cases = []
        if p["max"] is not None:
            cases.append((v > p["max"], pl.format(f"{what}: {{}} {unit} > max {p['max']}", v)))
        if p["min"] is not None:
            cases.append((v < p["min"], pl.format(f"{what}: {{}} {unit} < min {p['min']}", v)))
        return _when_chain(cases, lit(rule.name))
    if t == "noop":
        return lit("before == after and as many lines removed as added")
    if t == "whitespace_only":
        return lit("before and after differ only in whitespace")
    if t == "format_only":
        return lit(
            "before and after differ only in formatting (commas, quote style) or import order"
        )
    if t == "blank":
        are = "are" if len(p["field"]) > 1 else "is"
        return lit(f"{' and '.join(p['field'])} {are} blank (empty or whitespace only)")
    if t in ("regex", "secret", "path"):
        fields = ("path",) if t == "path" else p["field"]
        added = " and before is blank (text added whole)" if p.get("before_blank") else ""
        cases = [
            (
                _matches(rule, f, pat),
                lit(f"{label} in {f}" if t == "secret" else f"{f} matches {label!r}{added}"),
            )
            for f in fields
            for label, pat in p["patterns"]
        ]
        cases += [
            (_not_sample(f) & _text(f).str.contains(_rx(rule, pat)), lit(f"{label} in {f}"))
            for f in fields
            for label, pat in p.get("sample_patterns", ())
        ]
        return _when_chain(cases, lit(rule.name))
    if t == "bot_author":
        cases = []
        if p["use_author_is_bot"]:
            cases.append(
                (
                    pl.col("author_is_bot"),
                    pl.format("author '{}' is a bot (author_is_bot)", _text("author")),
                )
            )
        cases += [
            (
                _text("author").str.contains(_rx(rule, pat)),
                pl.format(f"author '{{}}' matches {label!r}", _text("author")),
            )
            for label, pat in p["patterns"]
        ]
        return _when_chain(cases, lit(rule.name))
    if t == "language":
        return pl.format("language '{}' is not in the allow-list", pl.col("language"))
    if t == "minified":
        what = (
            f"a line of {p['min_line_chars']}+ chars, at most {p['max_space_share']}% spaces, "
            f"{p['min_symbol_share']}-{p['max_symbol_share']}% symbols and ; and }} each at "
            f"least {p['min_separator_share']}% (minified code)"
        )
        cases = [(_minified_lines(rule, f), lit(f"{f} has {what}")) for f in p["field"]]
        return _when_chain(cases, lit(rule.name))
    if t == "unrelated_sides":
        _, shared, union = _side_words(rule)
        return pl.format(
            f"before and after share {{}} of their {{}} words (under {p['max_shared_words']}%): "
            "a block replaced by an unrelated one, not an edit of it",
            shared,
            union,
        )
    if t == "versions_only":
        return pl.format(
            "a {} edit that only changes version numbers",
            pl.when(pl.col("language").fill_null("") == "")
            .then(pl.lit("(no language)"))
            .otherwise(pl.col("language")),
        )
    if t == "commented_code":
        return lit(
            "most lines the edit adds are commented-out code, and the comment does not say it "
            "disables code"
        )
    raise AssertionError(t)


def _mask(rule_set: list[Rule]) -> list[pl.Expr]:
    """Every secret pattern replaced in every field its rule scans (a sample pattern outside
    test fixtures and docs only)."""
    by_field: dict[str, list[tuple[str, str, bool]]] = {}
    for r in rule_set:
        for f in r.params["field"]:
            pats = by_field.setdefault(f, [])
            pats += [(lb, _rx(r, p), False) for lb, p in r.params["patterns"]]
            pats += [(lb, _rx(r, p), True) for lb, p in r.params["sample_patterns"]]
    out = []
    for f, pats in by_field.items():
        e = pl.col(f)
        for label, pat, sample in pats:
            masked = e.str.replace_all(pat, f"[REDACTED:{label}]")
            e = pl.when(_not_sample(f)).then(masked).otherwise(e) if sample else masked
        out.append(e.alias(f))
    return out


# ---------------------------------------------------------------- applying


@dataclass
class FilterResult:
    kept: pl.DataFrame  # item columns + flags
    rejected: pl.DataFrame  # item columns + rule, reason, rules, flags
    hits: dict[str, int]  # rule -> items it matched (all of them, first or not)
    dropped: dict[str, int]  # rule -> items rejected under it (first match)
    flagged: dict[str, int]  # rule -> kept items carrying the flag
    overlaps: dict[tuple[str, str], int]  # pair of drop rules -> items both matched
    masked: int  # items whose text had a secret masked


def _names(hits: list[tuple[str, str]], why: dict[str, str] | None = None) -> pl.Expr:
    """The names of the rules whose hit column is true, as a list (in rule order); a rule
    with a column in `why` (weak_secret) gives `<name>:<reason>` for each of its reasons.

    Joined and split (names and reasons are snake_case, so "," is safe): 10x faster than
    concat_list.
    """
    empty = pl.lit([], dtype=pl.List(pl.String))
    if not hits:
        return empty
    why = why or {}

    def label(n: str, h: str) -> pl.Expr:
        if h not in why:
            return pl.lit(n)
        reasons = pl.col(why[h]).list.eval(pl.element().str.split(" in ").list.first())
        return (
            reasons.list.unique(maintain_order=True)
            .list.eval(f"{n}:" + pl.element())
            .list.join(",")
        )

    s = pl.concat_str(
        [pl.when(pl.col(h)).then(label(n, h)) for n, h in hits], separator=",", ignore_nulls=True
    )
    return pl.when(s == "").then(empty).otherwise(s.str.split(","))


def _mask_rows(df: pl.DataFrame, masks: list[pl.Expr]) -> pl.DataFrame:
    """Mask only the rows that hold a secret (few), keeping row order."""
    if not df["__secret"].any():
        return df
    df = df.with_row_index("__row")
    hit = df.filter(pl.col("__secret")).with_columns(masks)
    return pl.concat([df.filter(~pl.col("__secret")), hit]).sort("__row").drop("__row")


def apply_rules(
    items: pl.DataFrame, rules: RuleSet, mirrors: Mapping[str, tuple[Mirror, ...]] | None = None
) -> FilterResult:
    """Split items into kept and rejected by the active rules, with counts. Order is kept.
    `mirrors`: a mirror rule's name -> the mirror folders found for it (none: it matches
    nothing)."""
    active = rules.active
    found = {r.name: (mirrors or {}).get(r.name, ()) for r in active}
    hc = [(r, f"__hit_{i}") for i, r in enumerate(active)]  # rule, its hit column
    why = {c: _why(i) for i, (r, c) in enumerate(hc) if r.type == "weak_secret"}
    if why:  # weak secrets: found in Python, on the rows the prefilter flags
        items = items.with_columns(
            [suspect_column(items, r.params["field"]).alias(why[c]) for r, c in hc if c in why]
        )
    df = items.with_columns(
        [
            (pl.col(why[c]).list.len() > 0 if c in why else _hit(r, found[r.name]))
            .fill_null(False)
            .alias(c)
            for r, c in hc
        ]
    )
    drop = [(r.name, c) for r, c in hc if r.action == "drop"]
    flag = [(r.name, c) for r, c in hc if r.action == "flag"]
    secret = [c for r, c in hc if r.type == "secret"]
    first = (
        pl.coalesce([pl.when(pl.col(c)).then(pl.lit(n)) for n, c in drop])
        if drop
        else pl.lit(None, dtype=pl.String)
    )
    df = df.with_columns(
        first.alias("rule"),
        _names(drop).alias("rules"),
        _names(flag, why).alias("flags"),
        (pl.any_horizontal([pl.col(c) for c in secret]) if secret else pl.lit(False)).alias(
            "__secret"
        ),
    )
    counts = df.select(
        *[pl.col(c).sum().alias(r.name) for r, c in hc],
        *[(pl.col(c) & pl.col("rule").is_null()).sum().alias("__kept_" + n) for n, c in flag],
        pl.col("__secret").sum().alias("__masked"),
    ).row(0, named=True)
    dropped = dict(df.group_by("rule").len().drop_nulls("rule").iter_rows())
    overlaps: dict[tuple[str, str], int] = {}
    multi = df.filter(pl.col("rules").list.len() >= 2)
    if multi.height:
        pairs = [(a, b) for i, a in enumerate(drop) for b in drop[i + 1 :]]
        got = multi.select(
            [(pl.col(a[1]) & pl.col(b[1])).sum().alias(f"{k}") for k, (a, b) in enumerate(pairs)]
        ).row(0)
        overlaps = {(a[0], b[0]): n for (a, b), n in zip(pairs, got, strict=True) if n}
    kept = df.filter(pl.col("rule").is_null())
    rej = df.filter(pl.col("rule").is_not_null())
    by_rule = {r.name: r for r in active}
    col = {r.name: c for r, c in hc}

    def reason_of(n: str) -> pl.Expr:
        c = col[n]
        return pl.col(why[c]).list.join("; ") if c in why else _reason(by_rule[n], found[n])

    reason = _when_chain(  # before masking: a secret's reason names the pattern that matched
        [(pl.col("rule") == n, reason_of(n)) for n in dropped], pl.col("rule")
    )
    rej = rej.with_columns(reason.alias("reason"))
    if counts["__masked"]:
        masks = _mask([r for r in active if r.type == "secret"])
        kept, rej = _mask_rows(kept, masks), _mask_rows(rej, masks)
    kept = kept.select([*ITEM_COLS, "flags"])
    rej = rej.select([*ITEM_COLS, "rule", "reason", "rules", "flags"])
    return FilterResult(
        kept=kept,
        rejected=rej,
        hits={r.name: counts[r.name] for r in active},
        dropped={n: dropped.get(n, 0) for n, _ in drop},
        flagged={n: counts["__kept_" + n] for n, _ in flag},
        overlaps=overlaps,
        masked=counts["__masked"],
    )

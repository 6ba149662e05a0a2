"""Normalisers: what makes two edits "the same edit" once digits, versions and hashes go.

Two normalisations, both with one regex vocabulary that Python `re` and polars (Rust regex)
run identically (no look-around), so the per-line reference and the vectorised column agree:

- `edit_shape`: the lines the before -> after line diff removes and adds, each normalised
  (whitespace collapsed, hex runs -> HEX, numbers and whole version tokens, operator and
  suffix included, -> NUM). A digit-only edit (a version or SHA bump) also names what it
  bumps by REF, `uses: actions/cache@v3` -> `uses: REF@NUM`, `"husky": "^7.0.4"` ->
  `"REF": "NUM"` (REF_RULES: @, JSON / YAML keys, TOML keys, Go modules, Maven properties),
  as a `rev:` bump never names its hook: such bumps are one shape whatever they bump, and a
  hunk bumping two dependencies is one shape with any other two-dependency hunk.
- `edit_key_expr`: the whole before and after, normalised the same way with all whitespace
  collapsed: the corpus-wide "same normalised edit" that export keeps in one split.

The Python functions are the per-item reference and the tests' oracle; the stage computes the
same column-wise (columns.py: compiled scans over lines of ASCII text, polars expressions
through `vectorised`, and the reference only where the engines may differ).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from functools import lru_cache

import polars as pl

from pipeline import linear

NUM, HEX, REF = "⟨N⟩", "⟨H⟩", "⟨R⟩"  # input holding these characters may merge with numbers

# A hex run of 7+ characters holding at least one digit (so words like "defaced" stay),
# spelled out by the position of its first digit instead of a look-ahead.
HEX_RX = (
    r"\b(?:"
    + "|".join(f"[a-fA-F]{{{k}}}[0-9][0-9a-fA-F]{{{6 - k},}}" for k in range(7))
    + r"|[a-fA-F]{7,}[0-9][0-9a-fA-F]*)\b"
)
# A version token folds whole into NUM: its range operator, a leading `v`, dotted parts and
# wildcards, pre-release and build suffixes (`^2.0.0`, `~1.6.3`, `>=2.0`, `"=0.3.0-alpha.1"`,
# `v1.3.0-rc.1+incompatible`, `3.0.0beta2`, `1.2.3-SNAPSHOT`, `4.1.0.Final`, `1.10.x`, `2.*`,
# `1.0a1.dev0`), so one dependency's bumps are one shape however each spells its version. What
# code spells alike stays apart:
# - an operator folds only when it touches the version (`if x >= 3` keeps its `>=`); a
#   comparison (`== != >= <= ~=`, and `< = ~` after a non-word character: `"=1.2"`,
#   `,<2.0`, `"~1.6.3"` but never `i=0.5`) only before a dotted version (`x>=3` keeps its
#   `>=`, prose's `~25 GB` its `~`); a lone `>` after a non-word character only before a
#   version of three parts (`">1.2.3"`, where HTML's `class="pct">91.5%` keeps its `>`); a
#   lone `^` after a non-word character before any version (`"^4"`, but never `x^2`);
# - a suffix is a listed word, ending at a word boundary or in digits (`1.0-betamax` is no
#   version); after `-`, a word that is also a common identifier (`alpha`, `beta`, `dev`,
#   `next`...) needs digits after it or a version of three parts: `(1-alpha)*x`, `1.0-beta` in
#   code stay, `1.0.0-beta`, `1.4.0-beta9`, `2.0.0-beta.2`, `1.0-SNAPSHOT` fold; after `+`,
#   only `build<digits>` and `incompatible`; bare numbers and hashes after `-` only after a
#   version of three parts (`1.0.0-0`, Go's `v0.0.0-<date>-<hash>`, never `a = 1-2`);
# - a digit run inside a word (`float32`, `utf8`, `h2`, `x86_64`, `python3.6`) is digits and
#   dotted digits only, as before: no operator, suffix or wildcard.
# No look-around (polars' regex has none): each rule is spelled with \b / \B and alternation,
# and scan.py spells the same rules as a byte scan, leftmost-first like the regex.
CMP_OPS = ("~=", "==", "!=", ">=", "<=")  # comparisons, anywhere; then `\B[<=~]`, `\B>`
SAFE_WORDS = ("SNAPSHOT", "RELEASE", "Final", "FINAL", "GA", "RC", "CR", "rc", "canary", "nightly")
# "preview" before "pre": alternation is ordered
IDENT_WORDS: tuple[str, ...] = ("alpha", "beta", "preview", "pre", "post", "dev", "next")
IDENT_WORDS += ("snapshot", "final", "release")


def _num_rx() -> str:
    """NUM_RX, spelled from the vocabulary above (scan.py scans the same, in this order)."""
    cmp_ = "(?:" + "|".join(re.escape(o) for o in CMP_OPS) + r"|\B[<=~])"
    gt, rng = r"\B>", r"\B\^"
    part = r"\.(?:[0-9]+|[xX]\b|\*\B)"  # 1.10.x, 2.*
    tail = "(?:[.-]?[0-9]+|[.-]" + HEX + ")+"  # -rc.1, beta2, -dev.<date>
    safe = "(?:" + "|".join(SAFE_WORDS) + ")"
    ident = "(?:" + "|".join(IDENT_WORDS) + ")"
    end = f"(?:{tail}|\\b)"

    def suffix(full: bool) -> str:
        """One suffix; `full`: after a version of three parts."""
        alts = [
            "(?:a|b)[0-9]+",  # 1.0a1, 2.0b3
            ("[-.]?" if full else r"\.?") + "M[0-9]+",  # 2.0M8, 5.0.0-M1
            f"[-.]?{safe}{end}",
            f"\\.?{ident}{end}",
            f"-{ident}{end if full else tail}",
            r"\+build" + tail,
            r"\+incompatible\b",
            # numbered pre-releases, Go pseudo-versions: 1.0.0-0, v0.0.0-<date>-<hash>
            *([f"-(?:[0-9]+|{HEX})(?:[.-]?[0-9]+|[.-]{HEX})*"] if full else []),
        ]
        return "(?:" + "|".join(alts) + ")*"

    return "|".join(
        [
            f"(?:(?:{cmp_}|{gt}|{rng})v?|\\bv|\\b)[0-9]+(?:{part}){{2,}}{suffix(True)}",
            f"{cmp_}v?[0-9]+(?:{part})+{suffix(False)}",
            f"(?:{rng}v?|\\bv|\\b)[0-9]+(?:{part})*{suffix(False)}",
            r"[0-9]+(?:\.[0-9]+)*",  # digits inside a word
        ]
    )


NUM_RX = _num_rx()
# What a digit-only bump pins at its version, by the syntax that pins it: (regex, polars
# replacement, the group that is the name). Each regex runs over a whole normalised shape
# (lines "-..." / "+...") in turn; names may hold NUM or HEX (`es6-promise`). A key that is
# the word `version` names no dependency (a release bump, `"version": "1.2.0"`): it stays.
_TOKEN = "(?:[\\w{}]|⟨[NH]⟩)"


def _name_but(word: str, punct: str) -> str:
    """A name of word characters, `punct` and NUM / HEX, any but `word`. No look-ahead: the
    names that stop short of it, differ from it at some character, or run on past it."""
    tok = _TOKEN.format(punct)
    alts = [re.escape(word[:i]) for i in range(1, len(word))]
    alts += [
        re.escape(word[:i]) + f"(?:[^\\W{word[i]}]|[{punct}]|⟨[NH]⟩){tok}*"
        for i in range(len(word))
    ]
    return "(?:" + "|".join([*alts, re.escape(word) + f"{tok}+"]) + ")"


_NAME = _TOKEN.format(".-") + "+"
REF_RULES: tuple[tuple[str, str, int], ...] = (
    # an action, a package, an image at `@version`: `uses: actions/checkout@v4`
    (f"({_NAME}(?:/{_NAME})*)@({NUM}|{HEX})", REF + "@${2}", 1),
    # a JSON / YAML / JS key whose value is a version: `"husky": "^7.0.4"`
    (
        f"([\"'])({_name_but('version', '.@/-')})([\"']: ?[\"']{NUM}[\"'])",
        "${1}" + REF + "${3}",
        2,
    ),
    # a TOML (Cargo, pyproject) key at the line's start: `serde = "1.0"`,
    # `clap = { version = "4.1", ... }`
    (
        f'(?m)^([-+]"?)({_name_but("version", ".-")})("? ?= ?(?:"{NUM}"|\'{NUM}\''
        f'|\\{{ ?version ?= ?"{NUM}"))',
        "${1}" + REF + "${3}",
        2,
    ),
    # a Go module path: `require github.com/x/y v1.2.3`
    (
        f"(?m)^([-+](?:require )?)({_TOKEN.format('-')}+(?:\\.{_TOKEN.format('-')}+)+"
        f"(?:/{_NAME})+)( {NUM})",
        "${1}" + REF + "${3}",
        2,
    ),
    # a Maven version property: `<truth.version>0.25</truth.version>`
    (
        f"<({_NAME})\\.version>{NUM}</{_NAME}\\.version>",
        f"<{REF}.version>{NUM}</{REF}.version>",
        1,
    ),
)
WS_RX = r"\s+"

_HEX, _NUM, _WS = (re.compile(x) for x in (HEX_RX, NUM_RX, WS_RX))
# the rules for Python, on RE2 (pipeline.linear: Python's classes, linear time; in `re` the @
# rule took 20 s on a 24k-character line); `${k}` is `\g<k>` (a group that took no part is "")
_REFS = [(linear.compile(rx), re.sub(r"\$\{(\d+)\}", r"\\g<\1>", to), k) for rx, to, k in REF_RULES]
_COUNTS = ("lines_removed", "lines_added")
# A character outside printable ASCII, its whitespace and the tokens' brackets: there Python's
# `\s` (which takes \x1c-\x1f) and `\w`/`\b` (Unicode letters and marks) may differ from
# polars' Rust regex, so such strings take the Python reference.
UNSAFE_RX = r"[^\t-\r -~⟨⟩]"


def collapse_ws(line: str) -> str:
    """Whitespace runs become one space; leading and trailing whitespace goes."""
    return _WS.sub(" ", line).strip()


@lru_cache(maxsize=1 << 18)
def normalise_line(line: str) -> str:
    """One line with whitespace collapsed, hex runs -> HEX, numbers and versions -> NUM.

    Punctuation and identifiers stay: normalising more would make unrelated lines equal.
    """
    return _NUM.sub(NUM, _HEX.sub(HEX, collapse_ws(line)))


def normalise_text(text: str) -> str:
    """A whole side of an edit as edit_key_expr normalises it (the per-row reference)."""
    return collapse_ws(_NUM.sub(NUM, _HEX.sub(HEX, text)))


def edit_key_expr(col: str) -> pl.Expr:
    """normalise_text over a column, in polars: no Python per row."""
    return normalise_text_expr(pl.col(col).fill_null(""))


def normalise_text_expr(e: pl.Expr) -> pl.Expr:
    """normalise_text in polars."""
    e = e.str.replace_all(HEX_RX, HEX).str.replace_all(NUM_RX, NUM)
    return e.str.replace_all(WS_RX, " ").str.strip_chars(" ")


def normalise_line_expr(e: pl.Expr) -> pl.Expr:
    """normalise_line in polars."""
    e = e.str.replace_all(WS_RX, " ").str.strip_chars(" ")
    return e.str.replace_all(HEX_RX, HEX).str.replace_all(NUM_RX, NUM)


def vectorised(
    s: pl.Series, expr: Callable[[pl.Expr], pl.Expr], ref: Callable[[str], str]
) -> pl.Series:
    """expr over the string column s; `ref`, its Python reference, on the strings holding an
    UNSAFE_RX character (few in code: they cost a Python call each)."""
    frame = pl.DataFrame({"x": s})
    out = frame.select(expr(pl.col("x")).alias("x"), pl.col("x").str.contains(UNSAFE_RX).alias("u"))
    odd = out["u"].arg_true()
    if odd.len() == 0:
        return out["x"]
    return out["x"].scatter(odd, [ref(x) for x in s.gather(odd).to_list()])


def refs(line: str) -> list[str]:
    """The names pinned at a version in a normalised line, rule by rule (`actions/cache` in
    `...@NUM`, `husky` in `"husky": "NUM"`)."""
    return [m.group(k) for rx, _, k in _REFS for m in rx.finditer(line)]


def ref_names(shape: str) -> str:
    """The pinned names of a digit-only shape's lines, sorted, space-separated."""
    return " ".join(sorted({r for x in shape.split("\n") for r in refs(x)}))


def ref_names_expr(e: pl.Expr) -> pl.Expr:
    """ref_names in polars (a match never spans lines: "\n" is in no class of REF_RULES)."""
    names = pl.concat_list(
        e.str.extract_all(rx).list.eval(pl.element().str.extract(rx, k)) for rx, _, k in REF_RULES
    )
    return names.list.unique().list.sort().list.join(" ")


def ref_sub(shape: str) -> str:
    """A digit-only shape with its pinned names replaced by REF, rule after rule."""
    for rx, to, _ in _REFS:
        shape = rx.sub(to, shape)
    return shape


def ref_sub_expr(e: pl.Expr) -> pl.Expr:
    """ref_sub in polars."""
    for rx, to, _ in REF_RULES:
        e = e.str.replace_all(rx, to)
    return e


def _lines(text: str, blank: bool = False) -> list[str]:
    """Lines of an edit side; "" is no line, or one blank line when `blank` (the item counts
    a removed or added line: lines are joined without a trailing newline)."""
    return text.split("\n") if text or blank else []


def changed_lines(
    before: str, after: str, blank_before: bool = False, blank_after: bool = False
) -> tuple[list[str], list[str]]:
    """(removed, added) raw lines of the before -> after line diff (difflib), no positions."""
    a, b = _lines(before, blank_before), _lines(after, blank_after)
    removed: list[str] = []
    added: list[str] = []
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return removed, added


def edit_shape(
    before: str, after: str, lines_removed: int = 0, lines_added: int = 0
) -> tuple[str, bool]:
    """(shape_text, digit_only) of one edit; the line counts tell "" from one blank line.

    digit_only: the normalised before equals the normalised after, yet the text differs
    beyond whitespace, so the edit changes only numbers or hashes (a version bump); its
    shape names pinned references by REF.
    """
    shape, digit, _ = edit_shape_refs(before, after, lines_removed, lines_added)
    return shape, digit


def edit_shape_refs(
    before: str, after: str, lines_removed: int = 0, lines_added: int = 0
) -> tuple[str, bool, str]:
    """edit_shape, plus the references a digit-only shape stopped naming ("" if none)."""
    removed, added = changed_lines(before, after, lines_removed > 0, lines_added > 0)
    lines = [f"-{normalise_line(x)}" for x in removed] + [f"+{normalise_line(x)}" for x in added]
    na = [normalise_line(x) for x in _lines(before)]
    nb = [normalise_line(x) for x in _lines(after)]
    differs = [collapse_ws(x) for x in _lines(before)] != [collapse_ws(x) for x in _lines(after)]
    digit = differs and na == nb
    shape = "\n".join(lines)
    if digit:
        return ref_sub(shape), digit, ref_names(shape)
    return shape, digit, ""


def nearest_context_line(context: str) -> str:
    """The normalised context line nearest above the edit: the last non-blank line before the
    first `...` separator (ingest writes context as lines before, `...`, lines after)."""
    above = context.split("\n...\n", 1)[0] if "\n...\n" in context else context
    if above.startswith("...\n") or above == "...":
        return ""
    for line in reversed(above.split("\n")):
        if line.strip():
            return normalise_line(line)
    return ""


def nearest_context_expr(e: pl.Expr) -> pl.Expr:
    """nearest_context_line in polars."""
    above = e.str.split("\n...\n").list.first()
    last = above.str.split("\n").list.eval(pl.element().filter(pl.element().str.contains(r"\S")))
    line = normalise_line_expr(last.list.last().fill_null(""))
    cut = above.str.starts_with("...\n") | (above == "...")
    return pl.when(cut).then(pl.lit("")).otherwise(line)

"""Normalisers: what makes two edits "the same edit" once digits, versions and hashes go.

Two normalisations, both with one regex vocabulary that Python `re` and polars (Rust regex)
run identically (no look-around), so the per-line reference and the vectorised column agree:

- `edit_shape`: the lines the before -> after line diff removes and adds, each normalised
  (whitespace collapsed, hex runs -> HEX, numbers and versions -> NUM). A digit-only edit
  (a version or SHA bump) also names what it bumps by REF, `uses: actions/cache@v3` ->
  `uses: REF@NUM`, as a `rev:` bump never names its hook: such bumps are one shape whatever
  they bump.
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

NUM, HEX, REF = "⟨N⟩", "⟨H⟩", "⟨R⟩"  # input holding these characters may merge with numbers

# A hex run of 7+ characters holding at least one digit (so words like "defaced" stay),
# spelled out by the position of its first digit instead of a look-ahead.
HEX_RX = (
    r"\b(?:"
    + "|".join(f"[a-fA-F]{{{k}}}[0-9][0-9a-fA-F]{{{6 - k},}}" for k in range(7))
    + r"|[a-fA-F]{7,}[0-9][0-9a-fA-F]*)\b"
)
# A digit run or dotted version, optional leading `v`, optional pre-release suffix:
# v4.5.0, 6.1.0, 1.2.3rc1, 2.0.0-beta.2, 1.0a1.
NUM_RX = (
    r"(?:\bv)?[0-9]+(?:\.[0-9]+)*"
    r"(?:(?:a|b|rc)[0-9]+|[-.](?:rc|alpha|beta|dev|pre|post)(?:\.?[0-9]+)?)?"
)
# What a pinned reference names before `@version`: an action, a package, an image.
REF_RX = r"[\w.-]+(?:/[\w.-]+)*@(" + NUM + "|" + HEX + ")"
WS_RX = r"\s+"

_HEX, _NUM, _REF, _WS = (re.compile(x) for x in (HEX_RX, NUM_RX, REF_RX, WS_RX))
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
    c = pl.col(col).fill_null("")
    c = c.str.replace_all(HEX_RX, HEX).str.replace_all(NUM_RX, NUM)
    return c.str.replace_all(WS_RX, " ").str.strip_chars(" ")


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
    """The names pinned at a version in a normalised line (`actions/cache` in `...@NUM`)."""
    return [m.group(0).rsplit("@", 1)[0] for m in _REF.finditer(line)]


def ref_names(shape: str) -> str:
    """The pinned names of a digit-only shape's lines, sorted, space-separated."""
    return " ".join(sorted({r for x in shape.split("\n") for r in refs(x)}))


def ref_names_expr(e: pl.Expr) -> pl.Expr:
    """ref_names in polars (a match never spans lines: "\n" is in no class of REF_RX)."""
    names = e.str.extract_all(REF_RX).list.eval(pl.element().str.replace(f"@(?:{NUM}|{HEX})$", ""))
    return names.list.unique().list.sort().list.join(" ")


def ref_sub(shape: str) -> str:
    """A digit-only shape with its pinned names replaced by REF."""
    return _REF.sub(REF + r"@\1", shape)


def ref_sub_expr(e: pl.Expr) -> pl.Expr:
    """ref_sub in polars."""
    return e.str.replace_all(REF_RX, REF + "@${1}")


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

r"""Rendering the figures: report.md and report.html from one set of figures (jinja2).

Everything from the data is escaped for where it lands. HTML: autoescape is on for every
template of the html environment, whatever the file's extension. Markdown: text is
backslash-escaped, table cells also get `|` escaped, inline code and fenced blocks use a run of
backticks longer than any in the text, so no item can close them early. Both: every value
written (`finalize`, after the filters) has its control characters escaped as `\x1b`,
`\u202e` (pipeline.console.visible; only newline and tab are kept, and no table cell keeps
those), so no ESC, NUL or BEL from an item reaches either file.
"""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup

from pipeline.console import visible

TEMPLATES = Path(__file__).parent / "templates"
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")
_TICKS = re.compile(r"`+")


def _longest_ticks(text: str) -> int:
    return max((len(m) for m in _TICKS.findall(text)), default=0)


def md_text(v: object) -> str:
    """Inline Markdown text: one line, every character Markdown could act on escaped."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(v).split()))


def md_cell(v: object) -> str:
    """A Markdown table cell: md_text (which escapes `|` too) on one line."""
    return md_text(v)


def md_code(v: object) -> str:
    """Inline code that the text cannot close: a backtick run longer than any in it."""
    s = " ".join(str(v).split())
    if not s:
        return "(empty)"
    ticks = "`" * (_longest_ticks(s) + 1)
    pad = " " if s[0] == "`" or s[-1] == "`" else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def md_cell_code(v: object) -> str:
    """Inline code inside a table cell: GFM splits cells before code spans, so `|` is escaped."""
    return md_code(v).replace("|", "\\|")


def md_fence(v: object, lang: str = "") -> str:
    """A fenced block that no line of the text can close (fence longer than any tick run)."""
    s = str(v).rstrip("\n")
    fence = "`" * max(3, _longest_ticks(s) + 1)
    return f"{fence}{lang}\n{s}\n{fence}"


def shown(v: object) -> object:
    """What a template writes for a value: text with its control characters escaped (Markup
    stays Markup: the escapes hold no character HTML acts on); other values as they are."""
    if isinstance(v, Markup):  # a CRLF line end is a line end, not a control to show
        return Markup(visible(str(v).replace("\r\n", "\n")))
    return visible(v.replace("\r\n", "\n")) if isinstance(v, str) else v


def env(html: bool) -> Environment:
    """The jinja2 environment: html = autoescape on for every template (not by extension);
    every value is `shown` (control characters escaped) before it is escaped for the format."""
    e = Environment(
        loader=FileSystemLoader(TEMPLATES),
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=html,
        keep_trailing_newline=True,
        finalize=shown,
    )
    e.filters.update(cell=md_cell, md=md_text, code=md_code, ccode=md_cell_code, fence=md_fence)
    return e


def render_md(fig: dict) -> str:
    return env(False).get_template("report.md.j2").render(r=fig)


def render_html(fig: dict, images: dict[str, str]) -> str:
    return env(True).get_template("report.html.j2").render(r=fig, images=images)

"""Data never reaches a parser (issue 28, item 5): a repository, language or path holding
matplotlib mathtext (`$\\x$`, `$$`, `\\frac`) is drawn as written in the report's plots, and a
field holding the SFT template's own headers never makes a prompt with a second header."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from pipeline import template
from pipeline.cli import app
from pipeline.report import plots
from pipeline.template import render

MATH = [r"o/$\x$", "$$", r"\frac{a}{b}", r"$\frac{1}{0}$", "$x^2$", r"a\$b$", "$"]


@pytest.mark.parametrize("label", MATH)
def test_every_plot_draws_mathtext_as_written(tmp_path, label):
    assert plots.bars([label, "b"], [2, 1], tmp_path / "b.png", label, label) == "b.png"
    assert plots.hist([1, 2, 2], tmp_path / "h.png", label, label, ylabel=label) == "h.png"
    assert plots.curve([0, 1], {label: [1, 2]}, tmp_path / "c.png", label, label) == "c.png"
    assert all((tmp_path / f).stat().st_size for f in ("b.png", "h.png", "c.png"))


def test_plain_draws_each_dollar_literally():
    import matplotlib.text

    for label in MATH:
        shown, is_math = matplotlib.text.Text(text=plots.plain(label))._preprocess_math(
            plots.plain(label)
        )
        assert (shown, is_math) == (label, False)


def test_a_report_over_mathtext_names_is_written(tmp_path):
    rows = []
    for i, (repo, lang, path) in enumerate(
        [
            (r"o/$\x$", "$$", r"src/$\x$.py"),
            ("$$", r"\frac", r"$a$/b.$\x$"),
            (r"o/\frac{a}{b}", r"$\x$", "c.$$"),
        ]
    ):
        for k in range(2):  # two items a repo, so the bars have more than one value
            rows.append(
                {
                    "repo": repo,
                    "language": lang,
                    "path": path,
                    "comment": f"fix {i} {k} $\\x$",
                    "before": f"x = {i * 10 + k}\ny = {k}\n",
                    "after": f"x = {i * 10 + k + 1}\ny = {k} + {i}\n",
                }
            )
    src = tmp_path / "m.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["run", str(src), "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    report = tmp_path / "run" / "report"
    assert (report / "report.html").stat().st_size
    for name in ("by_repo", "by_language", "by_file_type"):
        assert (report / "plots" / f"{name}.png").stat().st_size, name


# ------------------------------------------------------------------------ the SFT template

FIELDS = ("path", "comment", "context", "before")
# the prompt's section headers, each at the start of a line (pipeline/template.py)
HEADERS = ("File:", "Review comment:", "Context:", "Code before:", "Code after:")


def _headers(prompt: str) -> dict[str, int]:
    """How many lines of the prompt start with each header (any line break splits lines)."""
    lines = prompt.splitlines()
    return {h: sum(ln.startswith(h) for ln in lines) for h in HEADERS}


def _item(**over: str) -> dict[str, str]:
    base = {"path": "a.py", "comment": "rename x", "context": "", "before": "x = 1", "after": "y"}
    return {**base, **over}


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("header", HEADERS)
@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n", "\u2028", "\x0c"])
def test_a_field_holding_a_header_never_makes_a_second_one(field, header, brk):
    for value in (
        f"x{brk}{header}{brk}y",
        f"x{brk}{header} more",
        f"x{brk}\\{header}",  # already looks escaped: stays apart from the real header
        f"{header}",
    ):
        item = _item(**{field: value})
        prompt, completion = render(*item.values())
        counts = _headers(prompt)
        for h in HEADERS:
            want = 0 if h == "Context:" and not item["context"] else 1
            assert counts[h] == want, (field, value, h, prompt)
        assert completion == item["after"] + "\n"
        # the field as the prompt shows it, unescaped, is the field as given
        assert template.unescape_field(_shown(prompt, field, item)) == value


def _shown(prompt: str, field: str, item: dict[str, str]) -> str:
    """The text the prompt holds for `field` (between its header and the next one)."""
    starts = {"path": "File: ", "comment": "Review comment:\n", "context": "Context:\n"}
    start = starts.get(field, "Code before:\n")
    after = {
        "path": "\nReview comment:\n",
        "comment": "\nContext:\n" if item["context"] else "\nCode before:\n",
        "context": "\nCode before:\n",
        "before": "\nCode after:\n",
    }[field]
    head, _, rest = prompt.partition(start)
    assert head
    return rest[: rest.rindex(after)] if field != "before" else rest[: -len(after)]


def test_the_template_names_its_headers():
    assert template.HEADERS == HEADERS
    assert _headers(render(*_item(context="ctx").values())[0]) == dict.fromkeys(HEADERS, 1)


def test_the_after_text_and_plain_fields_are_left_as_written():
    item = _item(after="Code after:\nz", comment="see File: x and Code after: y")
    prompt, completion = render(*item.values())
    assert completion == "Code after:\nz\n"  # the completion is not in the prompt
    assert "see File: x and Code after: y" in prompt  # not at a line start: not a header
    plain = _item(before="def f():\n    return 1\n", comment="use\nfoo")
    assert render(*plain.values())[0].count("\\") == 0

"""Control characters from the data never reach a terminal or a report raw.

A small corpus whose repo, change, path, language and comment hold an ESC sequence (clear the
screen, colour, retitle the window with BEL), NUL, CR and a right-to-left override is read from
a file whose own name holds an ESC sequence, and run through every stage. What `run` prints
(the ingest table names the source), what `why` prints (text and JSON) and report.md /
report.html must show each such character escaped (`\\x1b`, `\\u202e`) and hold none raw.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.console import json_text, make_console, visible
from pipeline.report.render import env

ANSI = "\x1b[2J\x1b[31mRED\x1b]0;title\x07"
HOSTILE = [ANSI, "a\x00nul\rcr\x08bs", "\u202egnp.exe", "c1\x9b31m"]
# every control character but newline and tab: C0, DEL, C1, the bidi overrides
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
SOURCE_NAME = "in\x1b[31mred\x07.jsonl"


def _rows() -> list[dict]:
    rows = []
    for i, h in enumerate(HOSTILE):
        base = {
            "repo": f"o/r{i}{h}",
            "change": f"{i}{h}",
            "path": f"src/{h}/f{i}.py",
            "language": f"py{h}",
            "comment": f"fix {h} please",
            "before": f"def f{i}():\n    return {i}  # {h}\n",
            "after": f"def f{i}():\n    return {i + 1}  # {h}\n",
        }
        near = {**base, "after": base["after"] + "\n", "comment": f"dup {h}"}  # a dedup pair
        lock = {**base, "path": f"{h}/package-lock.json"}  # a filter rule example
        rows += [base, near, lock]
    return rows


def _invoke(*args: object, code: int = 0):
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == code, f"exit {res.exit_code}: {res.output}\n{res.exception!r}"
    return res


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, str]:
    """(the run folder, what `run` printed)."""
    tmp = tmp_path_factory.mktemp("hostile")
    src = tmp / SOURCE_NAME
    src.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    res = _invoke("run", src, "--out", tmp / "run")
    return tmp / "run", res.output


def _ids(run: Path, needle: str) -> list[str]:
    items = pl.read_parquet(run / "ingest" / "items.parquet")
    return items.filter(pl.col("repo").str.contains(needle, literal=True))["id"].to_list()


def test_visible_escapes_every_control_character_and_nothing_else():
    assert visible(ANSI) == r"\x1b[2J\x1b[31mRED\x1b]0;title\x07"
    assert visible("a\x00b\r\x7f\x85\u202ez é ✓") == r"a\x00b\r\x7f\x85\u202ez é ✓"
    assert visible("two\n\tlines") == "two\n\tlines"
    assert visible("two\n\tlines", one_line=True) == r"two\n\tlines"
    text = json_text({"k": "\x1b\x9b\u202eé"})
    assert not RAW.search(text) and json.loads(text) == {"k": "\x1b\x9b\u202eé"}


def test_every_console_escapes_strings_texts_and_markup(capsys):
    from rich.table import Table
    from rich.text import Text

    out = make_console(file=None, force_terminal=False, width=200)
    t = Table()
    t.add_column("name")
    t.add_row(f"[bold]x[/] {ANSI}")
    out.print(t)
    out.print(Text(f"text {ANSI}"))
    printed = capsys.readouterr().out
    assert not RAW.search(printed)
    assert r"x \x1b[2J\x1b[31mRED\x1b]0;title\x07" in printed  # the table cell, escaped
    assert r"text \x1b[2J" in printed


def test_the_ingest_table_and_every_line_of_run_show_names_escaped(hostile):
    _, output = hostile
    assert not RAW.search(output), repr(RAW.search(output))
    assert r"in\x1b[31mred\x07.jsonl" in output  # the source name, in the ingest table


def test_why_prints_every_field_escaped(hostile):
    run, _ = hostile
    for needle in ("\x1b", "\x00", "\u202e", "\x9b"):
        (item, *_) = _ids(run, needle)
        out = _invoke("why", run, item).stdout
        assert not RAW.search(out), (needle, out)
        want = visible(needle)
        for field in ("  repo   ", "  path   ", "  comment "):
            line = next(x for x in out.splitlines() if x.startswith(field))
            assert want in line, (field, line)
        data = json.loads(_invoke("why", "--json", run, item).stdout)
        assert needle in data[0]["item"]["repo"]  # JSON keeps the value, escaped as \\uXXXX
    (item, *_) = _ids(run, "\x1b")
    out = _invoke("why", run, item).stdout
    assert r"  repo   o/r0\x1b[2J\x1b[31mRED\x1b]0;title\x07   change 0\x1b[2J" in out
    assert r"(py\x1b[2j" in out  # the language (ingest lowercases it)


def test_why_escapes_an_unknown_query():
    res = _invoke("why", ".", "\x1b[2Jabcdefgh\nnext", code=1)
    assert not RAW.search(res.stdout)
    assert r"\x1b[2Jabcdefgh\nnext  unknown id" in res.stdout


@pytest.mark.parametrize("name", ["report.md", "report.html"])
def test_reports_hold_no_control_character_but_newline_and_tab(hostile, name):
    run, _ = hostile
    text = (run / "report" / name).read_text(encoding="utf-8")
    assert not RAW.search(text), repr(text[RAW.search(text).start() - 80 :][:160])
    assert r"o/r0\x1b[2J\x1b[31mRED\x1b]0;title\x07" in text  # rule examples and clusters
    assert r"\u202egnp.exe" in text
    if name == "report.md":
        rows = [ln for ln in text.splitlines() if ln.startswith("|")]
        assert rows and not any("\t" in ln for ln in rows)
        assert any(r"\x1b" in ln for ln in rows)  # the cluster table's repo and path cells


def test_report_filters_escape_control_characters_for_both_formats():
    for html in (True, False):
        e = env(html)
        out = e.from_string("{{ x }}|{{ x | md }}|{{ x | code }}|{{ x | tojson }}").render(x=ANSI)
        assert "\x1b" not in out and "\x07" not in out
        assert r"\x1b[2J" in out
    fence = env(False).from_string('{{ x | fence("diff") }}').render(x="+a\x1b[2J\n-b\tc")
    assert fence == "```diff\n+a\\x1b[2J\n-b\tc\n```"


def test_the_live_progress_bar_escapes_its_description(monkeypatch):
    import io

    import pipeline.console as pc

    buf = io.StringIO()
    monkeypatch.setattr(pc, "console", make_console(file=buf, force_terminal=True, width=120))
    with pc.progress() as bar:
        task = bar.add_task(f"ingest {ANSI}", total=2)
        bar.advance(task)
        bar.refresh()
    out = buf.getvalue()
    assert r"ingest \x1b[2J\x1b[31mRED\x1b]0;title\x07" in out
    assert "\x1b[2J" not in out and "\x07" not in out


def test_the_live_progress_bar_escapes_a_status(monkeypatch):
    import io

    import pipeline.console as pc

    buf = io.StringIO()
    monkeypatch.setattr(pc, "console", make_console(file=buf, force_terminal=True, width=200))
    with pc.progress() as bar:
        task = bar.add_task("steps", total=2)
        bar.update(task, advance=1, status=f"loss {ANSI}")
        bar.refresh()
    out = buf.getvalue()
    assert r"loss \x1b[2J\x1b[31mRED\x1b]0;title\x07" in out
    assert "\x1b[2J" not in out and "\x07" not in out


def test_a_crlf_line_end_in_a_report_is_a_line_end():
    """Windows line ends are not control characters to show: `\\r\\n` is written `\\n`, a
    lone CR still escaped."""
    from pipeline.report.render import env

    out = env(False).from_string("{{ x|fence }}").render(x="a = 1\r\nb = 2\r\nc\rd")
    assert out == "```\na = 1\nb = 2\nc\\rd\n```"

"""What every end-to-end hostile case checks, and the hostile text it plants.

A run is sound when: the exit code is the documented one, a failure is one `error:` line with
no traceback, `editcurate verify` accounts for every record, no planted secret is in any output
(Parquet string and list<string> columns read as data, the HF dataset's Arrow files, every
json/md/html/csv/txt file: compression would hide a string from grep), report.html holds no
live markup from the data, and report.md's code fences all close where the report closes them.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
from typer.testing import CliRunner

from pipeline.cli import app
from tests.test_secrets import JWT, KEY_BODY, PLANTED

# secret value -> a text holding it (as test_secrets.PLANTED), plus one-line forms for fields
# that hold one line (a path, an author, a repo): a key block whose newlines became spaces.
SECRETS: dict[str, str] = {s: text for s, (text, _) in PLANTED.items()}
ONE_LINE: dict[str, str] = {s: " ".join(t.split()) for s, t in SECRETS.items()}
# secrets without '/', for fields a reader splits at '/' (a repo's owner in a PR URL)
NO_SLASH: dict[str, str] = {
    "AKIAZ7QX3M4N5P6R7S8T": "AKIAZ7QX3M4N5P6R7S8T",
    "ghp_Zx81bQ7kPp2LmN3vR9sT4wY6uA0cE5gHk1Lm": "ghp_Zx81bQ7kPp2LmN3vR9sT4wY6uA0cE5gHk1Lm",
    "xoxb-2748392011-4820138471234-Zx81bQ7kPp2LmN3vR9sT4wY6": (
        "xoxb-2748392011-4820138471234-Zx81bQ7kPp2LmN3vR9sT4wY6"
    ),
    JWT: JWT,
}
__all__ = ["JWT", "KEY_BODY"]

# Markup for Rich, HTML and Markdown, planted in every text field.
RICH = "[bold]x[/] [link=file:///etc/passwd]y[/link]"
HTML = "<script>alert(1)</script> <img src=x onerror=alert(1)>"
MD = "``` | ~~~ <!-- *a* _b_"
MARKUP = f"{RICH} {HTML} {MD}"
MARKUP_LINES = f"{RICH}\n```\n{HTML}\n~~~~\n| a | b |\n{MD}"


def cli(*args: Any) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def one_error_line(res: Any) -> str:
    lines = [ln for ln in res.output.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, res.output
    assert "Traceback" not in res.output, res.output
    return lines[0]


def verify_passes(run: Path) -> None:
    res = cli("verify", run)
    assert res.exit_code == 0, res.output
    assert "verify passed" in res.output and "Traceback" not in res.output


# ------------------------------------------------------------------ every string written


def _strings(col: pa.ChunkedArray | pa.Array) -> list[str]:
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return [v for v in col.to_pylist() if v is not None]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        vt = t.value_type
        if pa.types.is_string(vt) or pa.types.is_large_string(vt):
            return [x for v in col.to_pylist() if v for x in v if x is not None]
    return []


def output_texts(run: Path) -> dict[str, str]:
    """file (run-relative) -> every string it holds, for every output of the run."""
    out: dict[str, str] = {}
    for p in sorted(run.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(run).as_posix()
        if p.suffix == ".parquet":
            t = pl.read_parquet(p).to_arrow()
            out[rel] = "\n".join(s for c in t.columns for s in _strings(c))
        elif p.suffix == ".arrow":  # datasets.save_to_disk: Arrow IPC streams
            with pa.memory_map(str(p)) as f:
                t = pa.ipc.open_stream(f).read_all()
            out[rel] = "\n".join(s for c in t.columns for s in _strings(c))
        elif p.suffix in (".json", ".md", ".html", ".csv", ".txt", ".tsv", ".yaml"):
            out[rel] = p.read_text(encoding="utf-8", errors="replace")
    return out


def assert_no_secret(run: Path, secrets: Any = None) -> None:
    texts = output_texts(run)
    assert any(k.endswith(".parquet") for k in texts), sorted(texts)
    for name, text in texts.items():
        for s in secrets or SECRETS:
            assert s not in text, f"{s[:24]}... in {name}"


# ------------------------------------------------------------------ report.html / report.md


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.script = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script += data


def assert_html_safe(html: str) -> None:
    """No element or attribute the data could have planted: no event handler, no script
    running alert, no <img src=x>; the data's markup shows as text."""
    p = _Tags()
    p.feed(html)
    for tag, attrs in p.tags:
        names = [a for a, _ in attrs]
        assert not any(a.startswith("on") for a in names), (tag, attrs)
        assert not (tag == "img" and dict(attrs).get("src") == "x"), (tag, attrs)
        assert not any(
            a == "href" and (v or "").startswith(("file:", "javascript:")) for a, v in attrs
        ), (tag, attrs)
    assert "alert(1)" not in p.script


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def unbalanced_fences(md: str) -> list[str]:
    """Problems with the fenced blocks of a Markdown text (CommonMark rules): a block still
    open at the end, an opening fence with no language that only a broken fence explains."""
    problems, fence, start = [], "", 0
    for n, line in enumerate(md.split("\n"), 1):
        m = _FENCE.match(line)
        if not m:
            continue
        f, info = m.group(1), m.group(2)
        if not fence:
            if f[0] == "`" and "`" in info:
                continue  # not a fence: inline code
            fence, start = f, n
        elif f[0] == fence[0] and len(f) >= len(fence) and not info.strip():
            fence = ""
    if fence:
        problems.append(f"fence opened on line {start} never closes")
    return problems


def assert_md_safe(md: str, headings: tuple[str, ...] = ()) -> None:
    """Fences balanced; every section heading is a heading (a broken fence would swallow the
    ones after it); no raw HTML from the data outside code."""
    from markdown_it import MarkdownIt

    assert unbalanced_fences(md) == []
    tokens = MarkdownIt("commonmark").enable("table").parse(md)
    heads = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    for h in headings:
        assert any(h in x for x in heads), (h, heads)
    raw = [t.content for t in tokens if t.type == "html_block"]
    raw += [c.content for t in tokens for c in t.children or [] if c.type == "html_inline"]
    for r in raw:
        assert re.fullmatch(r'\s*(?:<a id="[\w-]+"></a>|</?a[^>]*>)\s*', r), r


REPORT_HEADINGS = ("Header and funnel", "Filter drop rules", "Distributions", "Dedup", "Shapes")


def assert_sound_run(res: Any, run: Path, secrets: Any = None) -> None:
    """A finished run: exit 0, no traceback, verify passes, no secret anywhere, the report
    safe in both media."""
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    verify_passes(run)
    assert_no_secret(run, secrets)
    assert_html_safe((run / "report" / "report.html").read_text())
    assert_md_safe((run / "report" / "report.md").read_text(), REPORT_HEADINGS)
    card = run / "export" / "README.md"
    if card.exists():
        assert_md_safe(card.read_text())
    json.loads((run / "report" / "report.json").read_text())


def write_config(tmp: Path, sources: str, extra: str = "", name: str = "t") -> Path:
    p = tmp / "editcurate.toml"
    p.write_text(f'[run]\nname = "{name}"\nroot = "runs"\n\n{sources}\n{extra}')
    return p


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)

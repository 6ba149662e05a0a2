"""One rich console (stderr, so stdout stays clean for piping), progress, and `visible`.

Data never reaches the terminal raw: `visible` escapes control characters (C0, DEL, C1 and
the bidi overrides: an ESC sequence could clear the screen or retitle the window, U+202E
reverse the line) as `\\x1b` / `\\u202e`. Every console made here (`make_console`) applies it
to each string it renders, markup or not, and, as a last resort, to every segment of text
it writes, so a name from the data printed anywhere shows as written, escaped.

On a terminal, progress is a live bar; otherwise (CI, a log file, a pipe) it is a log line
per task every LOG_EVERY seconds and when the task ends, so long runs show they are alive.
A task may carry a `status` field (free text, e.g. "loss 1.23, skipped 0"), shown after its
count in both.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import (
    Console,
    ConsoleOptions,
    ConsoleRenderable,
    RenderableType,
    RenderHook,
    RenderResult,
)
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.segment import Segment
from rich.text import Text

# C0 (bar \t and \n), DEL, C1, and the bidi controls that reorder how a line shows
CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)
_ONE_LINE = re.compile("[\t\n]")


def _escape(m: re.Match[str]) -> str:
    return m.group().encode("unicode_escape").decode("ascii")


def visible(s: object, one_line: bool = False) -> str:
    r"""`s` as text with every control character escaped (`\x1b`, `\x00`, `\u202e`); tabs and
    newlines are kept, unless `one_line` (then they are `\t`, `\n` too)."""
    text = CONTROL.sub(_escape, str(s))
    return _ONE_LINE.sub(_escape, text) if one_line else text


def json_text(data: Any, **kwargs: Any) -> str:
    r"""`json.dumps(data, ensure_ascii=False)` with every control character written `\uXXXX`
    (JSON escapes C0 itself, not DEL, C1 or the bidi controls)."""
    text = json.dumps(data, ensure_ascii=False, **kwargs)
    return CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class _Visible:
    """A renderable whose text segments are escaped (control segments, rich's own cursor
    moves, pass): the net under every print, whatever the renderable."""

    def __init__(self, inner: RenderableType):
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for seg in console.render(self.inner, options):
            if seg.control or not CONTROL.search(seg.text):
                yield seg
            else:
                yield Segment(visible(seg.text), seg.style)


class _VisibleHook(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Visible(r) for r in renderables]


class SafeConsole(Console):
    """A Console that escapes control characters in every string it renders (before markup
    is parsed, so tables measure the escaped text) and in every text segment it writes."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.push_render_hook(_VisibleHook())

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(visible(text), **kwargs)


def make_console(**kwargs: Any) -> Console:
    """A console that never writes a control character from the data (see SafeConsole)."""
    return SafeConsole(**kwargs)


console = make_console(stderr=True)
LOG_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal


class _Description(ProgressColumn):
    """The task's description (markup, as rich's TextColumn reads it), control characters
    escaped: the live bar is drawn past the console's render hook."""

    def render(self, task: Task) -> Text:
        return Text.from_markup(f"[bold]{visible(task.description, one_line=True)}")


class _Status(ProgressColumn):
    """The task's `status` field, if it has one, as plain text (escaped, one line)."""

    def render(self, task: Task) -> Text:
        return Text(visible(task.fields.get("status", ""), one_line=True))


def progress() -> Any:
    if not console.is_terminal:
        return LineProgress()
    return Progress(
        _Description(),
        BarColumn(),
        MofNCompleteColumn(),
        _Status(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


@dataclass
class _Task:
    description: str
    total: float | None
    completed: float = 0.0
    started: float = 0.0
    logged: float = 0.0
    status: str = ""


class LineProgress:
    """The part of rich's Progress the stages use, as periodic plain log lines (every `every`
    seconds; LOG_EVERY unless given)."""

    def __init__(self, every: float | None = None):
        self.every = LOG_EVERY if every is None else every
        self.tasks: list[_Task] = []

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if t is None:
            for task in self.tasks:
                if task.logged and task.completed:
                    self._log(task, final=True)

    def add_task(self, description: str, total: float | None = None, **kw: Any) -> int:
        now = time.monotonic()
        self.tasks.append(_Task(description, total, started=now, status=kw.get("status", "")))
        return len(self.tasks) - 1

    def advance(self, task_id: int, advance: float = 1) -> None:
        task = self.tasks[task_id]
        task.completed += advance
        self._maybe_log(task)

    def update(self, task_id: int, **kw: Any) -> None:
        task = self.tasks[task_id]
        if "total" in kw:
            task.total = kw["total"]
        if "completed" in kw:
            task.completed = kw["completed"]
        if "advance" in kw:
            task.completed += kw["advance"]
        if "description" in kw:
            task.description = kw["description"]
        if "status" in kw:
            task.status = kw["status"]
        self._maybe_log(task)

    def _maybe_log(self, task: _Task) -> None:
        now = time.monotonic()
        if now - (task.logged or task.started) >= self.every:
            self._log(task)

    def _log(self, task: _Task, final: bool = False) -> None:
        task.logged = time.monotonic()
        done = f"{task.completed:,.0f}"
        if task.total:
            done += f"/{task.total:,.0f} ({100 * task.completed / task.total:.0f}%)"
        if task.status:
            done += f", {task.status}"
        took = task.logged - task.started
        console.print(Text(f"{task.description}: {done}, {took:.0f}s" + (" done" if final else "")))

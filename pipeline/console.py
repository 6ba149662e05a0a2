"""One rich console (stderr, so stdout stays clean for piping) and progress.

On a terminal, progress is a live bar; otherwise (CI, a log file, a pipe) it is a log line
per task every LOG_EVERY seconds and when the task ends, so long runs show they are alive.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

console = Console(stderr=True)
LOG_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal


def progress() -> Any:
    if not console.is_terminal:
        return LineProgress()
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
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


class LineProgress:
    """The part of rich's Progress the stages use, as periodic plain log lines."""

    def __init__(self, every: float = LOG_EVERY):
        self.every = every
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

    def add_task(self, description: str, total: float | None = None, **_: Any) -> int:
        now = time.monotonic()
        self.tasks.append(_Task(description, total, started=now, logged=0.0))
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
        took = task.logged - task.started
        console.print(Text(f"{task.description}: {done}, {took:.0f}s" + (" done" if final else "")))

"""What smoke-train says while it works (issue 27: nothing looks hung), on stderr.

A line as each long phase starts (what it does, how many units: steps, items, blocks), then its
units on the console's progress (pipeline/console.py): a live bar on a terminal; otherwise a
line every LOG_EVERY seconds and one when the phase ends, if it logged. The training steps
carry their loss and the items skipped so far. `quiet`: nothing.

Only this module prints: the loop, the probe, the bisection and generation take plain
callbacks (a `Tick` after each unit), fed figures they already have on the host, so progress
reads nothing more from the device and changes no output.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from types import TracebackType
from typing import Any

from rich.text import Text

from pipeline import console as _console

Tick = Callable[..., None]  # after each unit of a phase: tick(n=1, status="")
PREFIX = "smoke-train"


def _nothing(n: int = 1, status: str = "") -> None:
    pass


def count(n: int, one: str, many: str = "") -> str:
    """ "1 step", "40 steps", "2 micro-batches" (`many` where "s" is not the plural)."""
    return f"{n} {one if n == 1 else many or one + 's'}"


class Reporter:
    """One phase at a time: `phase` says what it does and opens its bar (closing the last
    one), `done` closes it; leaving the `with` closes whatever is open."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self._open = ExitStack()

    def __enter__(self) -> Reporter:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._open.__exit__(t, e, tb)
        self._open = ExitStack()

    def say(self, text: str) -> None:
        if not self.quiet:
            _console.console.print(Text(f"{PREFIX}: {text}"), soft_wrap=True)

    def phase(self, what: str, total: int = 0, label: str = "") -> Tick:
        """Say `what`; with units (`total` > 0), count them on a bar named `label`."""
        self.done()
        self.say(what)
        if self.quiet or total <= 0:
            return _nothing
        bar = self._open.enter_context(_console.progress())
        task = bar.add_task(f"{PREFIX}: {label or what}", total=total)

        def tick(n: int = 1, status: str = "") -> None:
            bar.update(task, advance=n, **({"status": status} if status else {}))

        return tick

    def done(self) -> None:
        """The phase ended: its bar goes (its last line, where it logged one)."""
        self._open.close()
        self._open = ExitStack()

    def steps(self, total: int, what: str) -> Callable[[int, int, dict[str, Any]], None]:
        """The training phase: `train`'s on_step, each window's loss and the items skipped so
        far beside the count."""
        tick = self.phase(what, total, "training steps")
        skipped = [0]

        def on_step(done: int, of: int, row: dict[str, Any]) -> None:
            skipped[0] += row["skipped"]
            tick(status=f"loss {row['loss']:.4g}, skipped {skipped[0]}")

        return on_step


QUIET = Reporter(quiet=True)

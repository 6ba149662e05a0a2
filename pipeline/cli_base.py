"""What every `editcurate` command shares: one-line errors, the debug switch, the options.

Every failure is one line on stderr (data is never read as Rich markup, and its control
characters are escaped) and an exit code from pipeline/errors.py. Path arguments and options
are not checked by click (its check is a boxed, multi-line usage error, exit 2): the command
reads them and an unreadable path is one line naming it, exit 3, as it is from a config.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer
from rich.text import Text
from typer.core import TyperGroup

from pipeline import storage
from pipeline.console import console, visible
from pipeline.errors import USAGE, exit_code, one_line
from pipeline.storage import Location

_DEBUG = {"on": False}  # set by the top-level callback on every invocation


def set_debug(on: bool) -> None:
    _DEBUG["on"] = on


def debug() -> bool:
    return _DEBUG["on"] or os.environ.get("EDITCURATE_DEBUG", "") not in ("", "0")


def error_line(msg: str) -> None:
    """`error: msg` on stderr; msg is data, never markup, its control characters escaped."""
    console.print(
        Text.assemble(("error: ", "bold red"), visible(msg, one_line=True)), soft_wrap=True
    )


def fail(msg: str, code: int = USAGE) -> NoReturn:
    error_line(msg)
    raise typer.Exit(code)


class Group(TyperGroup):
    """Turns any exception a command raises into one line and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            error_line("interrupted")
            raise typer.Exit(130) from None
        except Exception as e:
            # typer's own exits, aborts and usage errors (its vendored click) pass through
            if debug() or type(e).__module__.split(".")[0] in ("typer", "click"):
                raise
            error_line(one_line(e))
            raise typer.Exit(exit_code(e)) from None


StageConfigOpt = Annotated[
    Optional[Path],  # noqa: UP045 - typer needs Optional here
    typer.Option(
        "--config", "-c", help="TOML config file (else: the run folder's own).", readable=False
    ),
]
OptRunDir = Annotated[
    Optional[str],  # noqa: UP045 (strings: a Path would make s3://b/x s3:/b/x)
    typer.Argument(
        help="A run folder made by `editcurate run`: its stored config (with --set on top).",
        readable=False,
        show_default=False,
    ),
]
OptConfigOpt = Annotated[
    Optional[Path],  # noqa: UP045 - typer needs Optional here
    typer.Option(
        "--config", "-c", help="TOML config file (else: the paths given).", readable=False
    ),
]
SetOpt = Annotated[
    Optional[list[str]],  # noqa: UP045 - typer needs Optional here
    typer.Option("--set", "-s", help="Override a config key: --set ingest.batch_size=5000"),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Re-run even if inputs are unchanged.")]
PrintOpt = Annotated[
    bool,
    typer.Option(
        "--print-config", help="Print the effective config (every default) as TOML and exit."
    ),
]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print a machine-readable summary on stdout.")
]
PathsArg = Annotated[
    Optional[list[str]],  # noqa: UP045 (strings: a Path would make s3://b/x s3:/b/x)
    typer.Argument(
        help="Input files or folders (JSONL, JSON, CSV, Parquet, a git repo, "
        "a saved dataset), or URLs of objects (s3://bucket/edits.jsonl.gz); no config needed.",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    Optional[str],  # noqa: UP045 - typer needs Optional here
    typer.Option("--format", help="plain, or sft (adds prompt/completion); default: config."),
]
BaseOpt = Annotated[
    Optional[float],  # noqa: UP045 - typer needs Optional here
    typer.Option(help="Lowest threshold swept (default: dedup.edge_floor)."),
]
LabelsOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(help="CSV of labelled pairs: id_a,id_b,is_duplicate.", readable=False),
]
NgramOpt = Annotated[
    Optional[list[int]],  # noqa: UP045
    typer.Option(help="Also re-score the pairs at this shingle size (repeatable)."),
]
RunDir = Annotated[
    str,  # a local folder or a URL (s3://bucket/runs/edits): cli.run_folder reads it
    typer.Argument(help="A run folder, e.g. data/runs/sample, or s3://bucket/runs/sample"),
]
SEED_LIMIT = 1 << 32  # numpy's generators take 0 <= seed < 2**32


def check_report_options(scope: str, batch: int, seed: int) -> None:
    """`report`'s own options, checked before anything is read (exit 2, naming the option)."""
    if batch < 1:
        fail(f"report --batch: must be >= 1, got {batch}")
    if not 0 <= seed < SEED_LIMIT:
        fail(f"report --seed: must be >= 0 and < {SEED_LIMIT}, got {seed}")


def run_folder(s: str) -> Location:
    """A run folder named on the command line: a local path, or a URL (s3://bucket/runs/x)
    read with the standard credentials (the AWS_* variables)."""
    return storage.location(s)

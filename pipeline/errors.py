"""What went wrong, as an exit code and one line: the vocabulary the CLI and the API share.

0 success; 1 the data or a check failed; 2 usage or config; 3 I/O or environment. A failure
the code did not foresee is still one line (exit 1, "internal error"); `--debug` shows the
traceback.
"""

from __future__ import annotations

OK, DATA, USAGE, IO = 0, 1, 2, 3


class EditcurateError(Exception):
    """A failure a user can act on; the message is one line naming the file, row or key."""

    exit_code = DATA


class DataError(EditcurateError):
    """The data failed: every record of an ingest failed, or a check found a problem."""

    exit_code = DATA


class UsageError(EditcurateError):
    """The command or config cannot be used as given."""

    exit_code = USAGE


class EnvError(EditcurateError):
    """The environment stopped us: a file that cannot be read or written, a busy run folder."""

    exit_code = IO


def exit_code(e: BaseException) -> int:
    """The exit code for an exception: its own, or 3 for OS and memory errors, else 1."""
    code = getattr(e, "exit_code", None)
    if isinstance(code, int):
        return code
    if isinstance(e, (OSError, MemoryError)):
        return IO
    return DATA


def one_line(e: BaseException) -> str:
    """The exception as one line: `path: reason` for OS errors, the message otherwise."""
    if isinstance(e, OSError) and e.strerror:
        where = e.filename if e.filename is not None else ""
        text = f"{where}: {e.strerror}" if where else e.strerror
    elif (
        isinstance(e, EditcurateError)
        or type(e).__name__.endswith(("Failed", "Error"))
        and (type(e).__module__.startswith("pipeline"))
    ):
        text = str(e)
    elif isinstance(e, MemoryError):
        text = "out of memory"
    else:
        text = f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)"
    return " ".join(text.split()) or type(e).__name__

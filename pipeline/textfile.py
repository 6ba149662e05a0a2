"""Small text files a user names besides the data: a config, a rules file, a labels CSV.

Each is opened as a source file is (pipeline.ingest.opening.open_regular): only a regular file,
checked on the open descriptor, with O_NONBLOCK so that opening a FIFO does not wait for a
writer; and a text is read up to a bound, so `--config /dev/zero`, a FIFO or a runaway file
is one line at once instead of a hang or a process that fills memory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_TEXT_BYTES = 64 * 1024 * 1024  # a config or rules file is KBs; this is far past any


class NotTextFile(ValueError):
    """The path is no regular file, or its text is over the bound: str(e) says which."""


def special(mode: int) -> str:
    """What a FIFO, a device or a socket is, in words; "" for any other kind of file."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return ""


def _kind(mode: int) -> str:
    return "a folder" if stat.S_ISDIR(mode) else special(mode) or "not a regular file"


def check_regular(path: Path) -> None:
    """NotTextFile unless `path` is a regular file (a symlink to one included); OSError
    (FileNotFoundError, PermissionError ...) as opening it raises."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if not stat.S_ISREG(mode):
        raise NotTextFile(f"is {_kind(mode)}, not a regular file; it is not read")


def read_text(path: Path, limit: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of regular file `path`, of at most `limit` bytes. NotTextFile for any
    other kind of file or a longer one; OSError and UnicodeDecodeError as reading raises."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotTextFile(f"is {_kind(mode)}, not a regular file; it is not read")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        data = f.read(limit + 1)
    if len(data) > limit:
        raise NotTextFile(f"is over {limit} bytes: not a config or rules file")
    return data.decode("utf-8")

"""Opening a source file: refuse what is not a regular file, undo gzip, decode a BOM.

Every file reader (JSON, CSV, the independent counters) opens its input through
`open_source`, so they all see the same bytes: the file decompressed when it starts with the
gzip magic bytes (several members are read one after the other), without a UTF-8 BOM, and
transcoded to UTF-8 when a UTF-16 or UTF-32 BOM says the text is in one of those, or, with no
BOM, when the NUL bytes of its first KiB say it is UTF-16 (`utf16_guess`: text in UTF-16 has
a NUL in every other byte wherever it is ASCII, which JSON and CSV punctuation is). A byte
sequence the encoding cannot decode (an unpaired surrogate, an odd last byte) becomes bytes
that are not valid UTF-8, so the record holding it is an error, not the file.

A FIFO, a device, a socket or a folder where a file is expected is refused before anything
is opened for reading (`/dev/zero` would never end, a FIFO would wait for a writer forever).
An object in storage (pipeline/storage.py) is a file or a prefix of them (a folder), and is
read through its filesystem; every other check here is the same for it.
"""

from __future__ import annotations

import codecs
import errno
import gzip
import io
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar, cast

import pyarrow.parquet as pq

from pipeline import storage
from pipeline.ingest.base import SourceUnreadable
from pipeline.storage import Location
from pipeline.textfile import special

if TYPE_CHECKING:
    from upath import UPath

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 20  # bytes read at a time
READ_ERRORS = (OSError, EOFError, zlib.error, gzip.BadGzipFile)  # I/O, truncated/corrupt gzip
# Longest first: the UTF-32-LE BOM starts with the UTF-16-LE one.
BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32-LE"),
    (b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32-BE"),
    (b"\xef\xbb\xbf", "", "UTF-8"),
    (b"\xff\xfe", "utf-16-le", "UTF-16-LE"),
    (b"\xfe\xff", "utf-16-be", "UTF-16-BE"),
)
_BAD = "\udcff"  # what an undecodable code unit becomes: encodes to bytes that are not UTF-8
SNIFF = 1024  # bytes of a file without a BOM looked at for UTF-16


def _mark_undecodable(e: UnicodeError) -> tuple[str, int]:
    return _BAD, e.end  # type: ignore[attr-defined]


codecs.register_error("editcurate.undecodable", _mark_undecodable)


# --- what kind of path --------------------------------------------------------------------


def check_source_path(path: Location, expect: str) -> None:
    """Raise SourceUnreadable (one line naming `path`) unless it can be read as `expect`:
    "file" (one regular file), "folder" (a folder) or "any" (either).

    Nothing is opened for reading except a regular file, and that only to check permission,
    so a FIFO or a device cannot block or stream forever here.
    """
    if storage.is_remote(path):
        _check_object(path, expect)
        return
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            target = os.readlink(path)
            raise SourceUnreadable(
                f"{path}: a broken symlink (to {target}); no such file"
            ) from None
        raise SourceUnreadable(f"{path}: no such file or folder") from None
    except OSError as e:
        raise SourceUnreadable(f"{path}: {(e.strerror or str(e)).lower()}") from None
    kind = special(st.st_mode)
    if kind:
        raise SourceUnreadable(f"{path}: is {kind}, not a regular file; it is not read")
    is_dir = stat.S_ISDIR(st.st_mode)
    if is_dir and expect == "file":
        raise SourceUnreadable(f"{path}: is a folder; this source reads one file")
    if not is_dir and expect == "folder":
        raise SourceUnreadable(f"{path}: not a folder; this source reads a folder")
    if is_dir:
        if not os.access(path, os.R_OK | os.X_OK):
            raise SourceUnreadable(f"{path}: permission denied")
        return
    open_regular(path).close()


def _check_object(path: UPath, expect: str) -> None:
    """check_source_path for an object in storage: a file is an object, a folder a prefix."""
    try:
        kind = path.fs.info(path.path).get("type")
    except Exception as e:
        raise _unreadable_object(path, e) from None
    is_dir = kind == "directory"
    if is_dir and expect == "file":
        raise SourceUnreadable(f"{path}: is a folder; this source reads one file")
    if not is_dir and expect == "folder":
        raise SourceUnreadable(f"{path}: not a folder; this source reads a folder")


def open_regular(path: Location) -> BinaryIO:
    """`path` opened for binary reading, unbuffered; SourceUnreadable unless a regular file.

    O_NONBLOCK makes opening a FIFO return at once (instead of waiting for a writer), and the
    type is checked on the open descriptor, so a path swapped after a check is caught too.
    An object in storage is opened through its filesystem, read ahead CHUNK bytes at a time.
    """
    if storage.is_remote(path):
        return _open_object(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise SourceUnreadable(f"{path}: No such file or directory") from None
    except IsADirectoryError:
        raise SourceUnreadable(f"{path}: is a folder; this source reads one file") from None
    except PermissionError:
        raise SourceUnreadable(f"{path}: permission denied") from None
    except OSError as e:
        raise SourceUnreadable(f"{path}: {e.strerror or e}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise SourceUnreadable(f"{path}: is a folder; this source reads one file")
        kind = special(mode) or "not a regular file"
        raise SourceUnreadable(f"{path}: is {kind}, not a regular file; it is not read")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb", buffering=0)


class _Object(io.RawIOBase):
    """An object opened through its filesystem, whose read failures stop the source: on a
    store, a failed read (a reset connection, a 503 after the filesystem's retries) says
    nothing about the data, so it is SourceUnreadable (the stage fails, exit 3, nothing
    recorded), never a record's error the way a local file's damaged bytes are."""

    def __init__(self, f: Any, url: str):
        self.f, self.url = f, url
        self.size = int(f.size)

    def _failed(self, e: Exception) -> SourceUnreadable:
        return SourceUnreadable(
            f"{self.url}: reading failed at byte {self.f.tell():,}: {storage.why(e)}"
        )

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            data = self.f.read(len(b))
        except Exception as e:
            raise self._failed(e) from None
        b[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self.f.seek(offset, whence))

    def tell(self) -> int:
        return int(self.f.tell())

    def close(self) -> None:
        self.f.close()
        super().close()


def _open_object(path: UPath) -> BinaryIO:
    try:
        f = path.fs.open(path.path, "rb", block_size=CHUNK)
    except Exception as e:
        raise _unreadable_object(path, e) from None
    return cast(BinaryIO, _Object(f, str(path)))


def _unreadable_object(path: UPath, e: Exception) -> SourceUnreadable:
    """An object that cannot be listed or opened, in one line: missing, a prefix where an
    object is expected, denied, or the store's own error (no credentials, no endpoint, a
    timeout ...)."""
    if isinstance(e, FileNotFoundError):
        return SourceUnreadable(f"{path}: no such file or folder")
    if isinstance(e, IsADirectoryError):
        return SourceUnreadable(f"{path}: is a folder; this source reads one file")
    if isinstance(e, PermissionError):
        return SourceUnreadable(f"{path}: permission denied")
    if isinstance(e, ImportError):  # fsspec imports a scheme's package on first use
        return SourceUnreadable(storage.needs(str(path)))
    return SourceUnreadable(f"{path}: cannot be read: {storage.why(e)}")


def parquet_file(path: Location) -> pq.ParquetFile:
    """A Parquet file's reader (its footer read): a local path, or an object opened through
    its filesystem."""
    if storage.is_remote(path):
        return pq.ParquetFile(open_regular(path))
    return pq.ParquetFile(path)


# --- streams ------------------------------------------------------------------------------


class CountingReader(io.RawIOBase):
    """Reports the bytes read from the underlying file, for the progress bar."""

    def __init__(self, f: BinaryIO, advance: Callable[[int], None]):
        self.f, self.advance = f, advance

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.f.readinto(b)  # type: ignore[attr-defined]
        self.advance(n or 0)
        return n


class _Decoded(io.RawIOBase):
    """UTF-8 bytes from `f`: `prefix` first, then the rest, transcoded when `codec` is set.
    `error`, met while the prefix was read, is raised where it was met: after the prefix."""

    def __init__(self, f: BinaryIO, prefix: bytes, codec: str, error: BaseException | None):
        self.f, self.pending, self.error = f, prefix, error
        self.dec = codecs.getincrementaldecoder(codec)("editcurate.undecodable") if codec else None
        self.done = False
        if self.dec is not None:
            self.pending = self._encode(self.dec.decode(prefix))

    def readable(self) -> bool:
        return True

    @staticmethod
    def _encode(text: str) -> bytes:
        return text.encode("utf-8", "surrogatepass")

    def readinto(self, b) -> int:
        if not self.pending and self.error is not None:
            error, self.error = self.error, None
            raise error
        while not self.pending and not self.done:
            data = self.f.read1(CHUNK)  # type: ignore[attr-defined]
            if self.dec is None:
                self.pending, self.done = data, not data
            else:
                self.pending = self._encode(self.dec.decode(data, final=not data))
                self.done = not data
        n = min(len(b), len(self.pending))
        b[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


@contextmanager
def open_source(
    path: Location,
    advance: Callable[[int], None] | None = None,
    set_total: Callable[[int | None], None] | None = None,
) -> Iterator[io.BufferedReader]:
    """The file's text as a stream of UTF-8 bytes (see the module doc); `.encoding_name`
    says what the file was in ("UTF-8", "UTF-16-LE" ...). Progress is in bytes of the file.

    A gzip or I/O error met while reading surfaces from the stream's reads (READ_ERRORS), for
    the reader to record where it happened.
    """
    raw = open_regular(path)
    with raw:
        if set_total is not None:
            set_total(storage.size(raw))
        counted = io.BufferedReader(CountingReader(raw, advance or (lambda n: None)), CHUNK)
        try:
            gz = counted.peek(2)[:2] == GZIP_MAGIC
        except OSError as e:
            if e.errno == errno.EISDIR:
                raise SourceUnreadable(f"{path}: is a folder; this source reads one file") from None
            raise SourceUnreadable(f"{path}: cannot be read: {e}") from None
        inner: BinaryIO = gzip.GzipFile(fileobj=counted) if gz else counted  # type: ignore
        try:
            head = inner.read(4)
        except READ_ERRORS:
            head = b""  # met again by the reader's first read, which records it
        codec, name, error = "", "UTF-8", None
        for bom, enc, label in BOMS:
            if head.startswith(bom):
                head, codec, name = head[len(bom) :], enc, label
                break
        else:
            head, error = _read_more(inner, head, SNIFF)
            guess = utf16_guess(head)
            if guess is not None:
                codec, name = guess, f"{guess.upper()} (no BOM)"
        stream = io.BufferedReader(_Decoded(inner, head, codec, error), CHUNK)
        stream.encoding_name = name  # type: ignore[attr-defined]
        yield stream  # type: ignore[misc]


def _read_more(f: BinaryIO, head: bytes, size: int) -> tuple[bytes, BaseException | None]:
    """`head` and what follows it up to `size` bytes, read a chunk at a time (read1), so a read
    error keeps what came before it; the error is returned, to be raised in its place."""
    read1 = f.read1  # type: ignore[attr-defined]
    try:
        while len(head) < size and (data := read1(size - len(head))):
            head += data
    except READ_ERRORS as e:
        return head, e
    return head, None


def utf16_guess(head: bytes) -> str | None:
    """The codec ("utf-16-le", "utf-16-be") of a file without a BOM whose first bytes are
    UTF-16: NULs in at least a third of the code units' high bytes and (almost) none in their
    low bytes, and no NUL code unit; None for anything else (UTF-8 has no NUL; a binary file
    has them in both halves)."""
    n = len(head) // 2
    if n < 2:
        return None
    evens, odds = head[0 : 2 * n : 2], head[1 : 2 * n : 2]
    for high, low, codec in ((odds, evens, "utf-16-le"), (evens, odds, "utf-16-be")):
        if high.count(0) * 3 >= n and low.count(0) * 50 <= n:
            if not any(lo == 0 and hi == 0 for lo, hi in zip(low, high, strict=True)):
                return codec
    return None


# --- blank lines ------------------------------------------------------------------------

BLANK_RUN = 64  # consecutive blank lines a reader reads one by one before skipping in bulk
_SPACE = b" \t\n\r\x0b\x0c"  # bytes.strip()'s whitespace: what the readers call blank


@lru_cache(maxsize=8)
def _over(limit: int) -> re.Pattern[bytes]:
    """A line over `limit` bytes, found from its start (`^`): without it every byte of a line
    just under the limit was a try scanning to the line's end (quadratic: minutes a MiB)."""
    return re.compile(rb"(?m)^[^\n]{%d}" % (limit + 1))


def skip_blank_lines(f: BinaryIO, limit: int) -> tuple[int, str | None]:
    """Consume the whole blank lines (whitespace only, none over `limit` bytes) at the front of
    buffered stream `f`, a buffer at a time: (how many, the read error met, as `unreadable`
    words it, or None). A flood of blank lines (300 Mi of them in a 298 KB gzip) costs a few C
    scans per MiB instead of a readline each. A blank line over the limit and a partial one at
    the end of the buffer are left for the caller's next readline. A read error is returned,
    not left for the next read: a gzip stream raises some errors once only."""
    n = 0
    while True:
        try:
            buf = f.peek(CHUNK)  # type: ignore[attr-defined]
        except READ_ERRORS as e:
            return n, unreadable(e)
        space = len(buf) - len(buf.lstrip(_SPACE))
        end = buf.rfind(b"\n", 0, space) + 1  # after the last newline of the blank run
        if end > limit and (long := _over(limit).search(buf, 0, end)) is not None:
            end = buf.rfind(b"\n", 0, long.start()) + 1  # stop at the line over the limit
        if end == 0:
            return n, None
        n += buf.count(b"\n", 0, end)
        f.read(end)  # from the buffer peeked: no read of the file
        if end < len(buf):
            return n, None


UNREADABLE = "unreadable input"  # a read error's reason starts so: the reader stops there


def unreadable(e: BaseException) -> str:
    """A read error's record reason: the rest of the file is one record, this one."""
    return f"{UNREADABLE}: {e}; rest of file not read"


def encoding_of(path: Location) -> str:
    """What open_source reads the file as ("UTF-8", "UTF-16-LE", "UTF-16-LE (no BOM)" ...)."""
    try:
        with open_source(path) as f:
            return str(f.encoding_name)  # type: ignore[attr-defined]
    except READ_ERRORS:
        return "UTF-8"


def head_bytes(path: Location, size: int) -> tuple[bytes, str | None]:
    """Up to `size` bytes from the start of the decoded text, and the read error met on the
    way (None when there was none): the readers meet that error again and report it."""
    head = b""
    try:
        with open_source(path) as f:
            while len(head) < size and (data := f.read1(size - len(head))):
                head += data
    except READ_ERRORS as e:
        return head, str(e) or type(e).__name__
    return head, None


# ------------------------------------------------------------------------ CR-only line ends

CR_SNIFF = 64 * 1024  # decoded bytes looked at to tell CR-only line ends
SWAP_CRLF = bytes.maketrans(b"\r\n", b"\n\r")


def cr_line_ends(path: Location) -> bool:
    """True for a text file whose lines end in CR alone (classic Mac OS): its first 64 KiB
    hold a CR and no LF. Every reader and counter of lines (CSV, JSON lines) asks this, so
    they cut the same lines."""
    head = head_bytes(path, CR_SNIFF)[0]
    return b"\r" in head and b"\n" not in head


class Swapped(io.RawIOBase):
    """`f` with CR and LF swapped: a CR-only file read by the LF line splitters (a reader
    that keeps the line's bytes swaps each line back with SWAP_CRLF)."""

    def __init__(self, f: BinaryIO):
        self.f = f

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self.f.read1(len(b)).translate(SWAP_CRLF)  # type: ignore[attr-defined]
        b[: len(data)] = data
        return len(data)


_Stream = TypeVar("_Stream", BinaryIO, io.BufferedReader)


def lf_lines(f: _Stream, cr: bool) -> _Stream:
    """The stream as LF-ended lines: `f` itself, or with CR and LF swapped (cr_line_ends)."""
    return cast(_Stream, io.BufferedReader(Swapped(f), CHUNK)) if cr else f


def open_maybe_gzip(path: Path) -> BinaryIO:
    """The file's bytes, decompressed when it starts with the gzip magic bytes."""
    with open_regular(path) as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")  # type: ignore


class _Bounded(io.RawIOBase):
    """The first `size` bytes of stream `f` (a piece of a file ends at a line start)."""

    def __init__(self, f: Any, size: int):
        self.f, self.left = f, size

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.left <= 0:
            return 0
        view = memoryview(b)[: min(len(b), self.left)]
        n = self.f.readinto(view)
        self.left -= n or 0
        return n or 0


@contextmanager
def open_line_range(
    path: Location, start: int, end: int, advance: Callable[[int], None] | None = None
) -> Iterator[io.BufferedReader]:
    """Bytes [start, end) of a plain UTF-8 file cut at line starts (ingest/shards.py), as
    the reader and the counter of a piece both read them: a UTF-8 BOM at the start of the
    file skipped, as open_source does. Progress in bytes of the file."""
    step = advance or (lambda n: None)
    with open_regular(path) as raw:
        if start == 0 and raw.read(len(codecs.BOM_UTF8)) == codecs.BOM_UTF8:
            start = len(codecs.BOM_UTF8)
            step(start)
        raw.seek(start)
        yield io.BufferedReader(_Bounded(CountingReader(raw, step), end - start), CHUNK)

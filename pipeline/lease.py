"""The run folder's lock on object storage: a lease object.

A store has no flock, and a process that dies cannot release what it holds. The lock is an
object (`RUN/.lock`) created only if none is there (a conditional PUT, `If-None-Match: *`),
holding its owner (host, pid, a random token) and an expiry LEASE_S ahead, which the holder
renews every RENEW_S while it runs. A second run finds the object, reads a lease not yet
expired, and is refused with one line naming the holder. A lease past its expiry (its holder
died) is replaced only over the version that was read (`If-Match: ETAG`), so of two runs
taking it at once one wins and the other is refused; renewals are conditional the same way,
so a holder that stalled past its expiry and was replaced learns it (RunBusy at its next
commit) rather than writing over the new holder.

Conditional replaces need S3's If-Match (AWS, MinIO, moto); on other schemes a takeover is a
delete then a create, and two runs taking one expired lease in the same instant could both
go on. Expiry is compared with this machine's clock: hosts whose clocks differ by more than
LEASE_S - RENEW_S could both hold a run folder.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pipeline import storage
from pipeline.errors import EnvError, UsageError

if TYPE_CHECKING:
    from upath import UPath

LEASE_S = 120.0  # a dead holder's lease frees the run folder after this long
RENEW_S = 30.0


class RunBusy(EnvError):
    """Another editcurate process holds the run folder."""


class _Lost(Exception):
    """A conditional write found another version of the lease than the one it was made on."""


def _body(owner: str) -> bytes:
    return json.dumps({"owner": owner, "expires": time.time() + LEASE_S}).encode()


def _read(p: UPath) -> tuple[dict[str, Any], str | None] | None:
    """The lease and the version (ETag) it was read at; None when there is none. The ETag is
    taken before the body, so a replace made on it fails if the body read is newer."""
    try:
        etag = p.fs.info(p.path).get("ETag") if storage.replaces_if_match(p) else None
        data = json.loads(p.fs.cat_file(p.path))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError):
        data = None
    ok = isinstance(data, dict) and isinstance(data.get("expires"), (int, float))
    # not a lease: taken over like an expired one
    return (data if ok else {"owner": "?", "expires": 0.0}), etag


def holder(p: UPath) -> dict[str, Any] | None:
    """The lease as its object holds it; None when there is none."""
    got = _read(p)
    return None if got is None else got[0]


def _write(p: UPath, body: bytes, etag: str | None) -> str | None:
    """Replaces the lease, over version `etag` only where the store can be asked to; the new
    ETag. _Lost when another version (or none) is there."""
    if not storage.replaces_if_match(p) or etag is None:
        storage.put(p, body)
        return None
    out = storage.replace(p, body, etag)
    if out is None:
        raise _Lost
    return out.get("ETag")


def _create(p: UPath, body: bytes) -> tuple[bool, str | None]:
    """The lease created if none is there: (created, its ETag where the store says)."""
    out = storage.create(p, body)
    return out is not None, None if out is None else out.get("ETag")


def _busy(p: UPath, held: dict[str, Any]) -> RunBusy:
    until = time.strftime("%H:%M:%SZ", time.gmtime(held["expires"]))
    return RunBusy(
        f"{p.parent}: in use by another editcurate process ({held.get('owner', '?')}, "
        f"lease {p.name} renewed until {until}); wait for it to finish or use another run.name"
    )


def _take(p: UPath, owner: str) -> str | None:
    """The lease taken: created, or replaced once expired; its ETag. RunBusy when held."""
    for _ in range(5):
        made, etag = _create(p, _body(owner))
        if made:
            return etag
        got = _read(p)
        if got is None:
            continue  # released between our create and our read: create again
        held, etag = got
        if held["expires"] > time.time():
            raise _busy(p, held)
        try:  # its holder died: the lease expired
            if etag is not None:
                return _write(p, _body(owner), etag)
            storage.delete(p)
        except _Lost:
            continue  # another run replaced it first: read who holds it now
    raise RunBusy(f"{p.parent}: another editcurate process took the run folder's lease first")


class _Held:
    """A lease this process holds; `lost` set once a renewal found another holder."""

    def __init__(self, p: UPath, owner: str, etag: str | None) -> None:
        self.p, self.owner, self.etag = p, owner, etag
        self.lost = threading.Event()

    def renew(self) -> None:
        try:
            if self.etag is None:  # no conditional write here: look first
                held = holder(self.p)
                if held is not None and held.get("owner") != self.owner:
                    raise _Lost
            self.etag = _write(self.p, _body(self.owner), self.etag)
        except _Lost:
            self.lost.set()

    def check(self) -> None:
        if self.lost.is_set():
            held = holder(self.p) or {"owner": "?", "expires": 0.0}
            raise RunBusy(
                f"{self.p.parent}: this run's lease {self.p.name} expired and was taken by "
                f"another editcurate process ({held.get('owner', '?')}); nothing more is "
                "written by this run: rerun it once that one has finished"
            )


_HELD: dict[str, _Held] = {}  # run folder URL -> the lease this process holds on it


def still_held(run_dir: UPath) -> None:
    """RunBusy when this process held the run folder's lease and lost it: called before a
    commit (a manifest), so a run whose lease was taken over commits nothing more."""
    held = _HELD.get(str(run_dir))
    if held is not None:
        held.check()


@contextmanager
def lease(p: UPath, create: bool = True) -> Iterator[None]:
    """Holds the lease `p` while the block runs; renewed in a thread, deleted at the end."""
    if not create and not p.parent.fs.exists(p.parent.path):
        raise UsageError(f"{p.parent}: no such run folder")
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    held = _Held(p, owner, _take(p, owner))
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(RENEW_S) and not held.lost.is_set():
            try:
                held.renew()
            except Exception:  # a store hiccup: the next renewal tries again
                pass

    t = threading.Thread(target=renew, name="editcurate-lease", daemon=True)
    t.start()
    _HELD[str(p.parent)] = held
    ok = False
    try:
        yield
        ok = True
    finally:
        stop.set()
        t.join()
        _HELD.pop(str(p.parent), None)
        if not held.lost.is_set():
            try:
                got = _read(p)
                if got is not None and got[0].get("owner") == owner:
                    storage.delete(p)
            except Exception:  # a store hiccup on release: the lease expires by itself
                if ok:
                    raise
    if ok:
        held.check()

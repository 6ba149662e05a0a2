"""The run folder's lock on object storage: a lease object.

A store has no flock, and a process that dies cannot release what it holds. The lock is an
object (`RUN/.lock`) created only if none is there (a conditional PUT, `If-None-Match: *`),
holding its owner (host, pid, a random token) and an expiry LEASE_S ahead, which the holder
renews every RENEW_S while it runs. A second run finds the object, reads a lease not yet
expired, and is refused with one line naming the holder; a lease past its expiry (its holder
died) is deleted and taken. Expiry is compared with this machine's clock: hosts whose clocks
differ by more than LEASE_S - RENEW_S could both hold a run folder.
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


def _body(owner: str) -> bytes:
    return json.dumps({"owner": owner, "expires": time.time() + LEASE_S}).encode()


def holder(p: UPath) -> dict[str, Any] | None:
    """The lease as its object holds it; None when there is none (or it is unreadable)."""
    try:
        data = json.loads(p.fs.cat_file(p.path))
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError):
        return {"owner": "?", "expires": 0.0}  # not a lease: taken over like an expired one
    ok = isinstance(data, dict) and isinstance(data.get("expires"), (int, float))
    return data if ok else {"owner": "?", "expires": 0.0}


def _take(p: UPath, owner: str) -> None:
    run_dir = p.parent
    for _ in range(3):
        if storage.create(p, _body(owner)):
            return
        held = holder(p)
        if held is not None and held["expires"] > time.time():
            until = time.strftime("%H:%M:%SZ", time.gmtime(held["expires"]))
            raise RunBusy(
                f"{run_dir}: in use by another editcurate process ({held.get('owner', '?')}, "
                f"lease {p.name} renewed until {until}); wait for it to finish or use another "
                "run.name"
            )
        storage.delete(p)  # its holder died: the lease expired
    raise RunBusy(f"{run_dir}: another editcurate process took the run folder's lease first")


@contextmanager
def lease(p: UPath, create: bool = True) -> Iterator[None]:
    """Holds the lease `p` while the block runs; renewed in a thread, deleted at the end."""
    if not create and not p.parent.fs.exists(p.parent.path):
        raise UsageError(f"{p.parent}: no such run folder")
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    _take(p, owner)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(RENEW_S):
            try:
                held = holder(p)
                if held is None or held.get("owner") == owner:
                    storage.put(p, _body(owner))
            except Exception:  # a store hiccup: the next renewal tries again
                pass

    t = threading.Thread(target=renew, name="editcurate-lease", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        held = holder(p)
        if held is not None and held.get("owner") == owner:
            storage.delete(p)

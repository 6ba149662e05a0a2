"""The run folder: one sub-folder per stage, its manifest, atomic Parquet writes, skip logic.

A stage writes its outputs to temp files renamed into place, then `manifest.json` last: a stage
folder without a manifest is unfinished (a killed run) and is redone on the next run. A stage
whose code version, config section and inputs are unchanged since its manifest, and whose
outputs still hash as recorded, is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import storage
from pipeline.errors import EnvError, UsageError
from pipeline.lease import RunBusy, lease, still_held
from pipeline.parts import PartSink, PartWriter, num_rows, remove
from pipeline.stage import NAMES
from pipeline.storage import Location

MANIFEST = "manifest.json"
CONFIG_FILE = "config.toml"  # the effective config a run folder keeps (Pipeline.open)
# a stage whose inputs changed after it ran: its manifest, moved aside, saying why. Without a
# manifest the stage reads as not done everywhere (verify, why, report, summary, the skip
# check), so no reader takes its old outputs for current; rerunning it removes this file.
STALE = "stale.json"
PARQUET_OPTS = dict(compression="zstd", write_statistics=True)
_VERSIONED = (
    "editcurate",
    "polars",
    "pyarrow",
    "numba",
    "datasketch",
    "rapidfuzz",
    "datasets",
)


class StageFailed(UsageError):
    """A stage cannot go on; the message is one line a user can act on (the CLI exits 2, or
    the subclass's exit_code)."""


LOCK = ".lock"


@contextmanager
def run_lock(
    run_dir: Location, root: Location | None = None, create: bool = True
) -> Iterator[None]:
    """Hold the run folder for one command: a second run on it fails naming the holder's pid.

    flock, so a holder that died releases it (a stale lock file is just reused). With `root`,
    the run folder and its stage folders must resolve inside it: no `..`, no symlink out.
    On object storage, a lease object (pipeline/lease.py).
    """
    import fcntl

    if root is not None and not storage.is_remote(run_dir):
        assert not storage.is_remote(root)
        check_inside(run_dir, root)
    if "[" in str(run_dir) or "]" in str(run_dir):
        raise UsageError(
            f"{run_dir}: a run folder path with '[' or ']' cannot be used: polars reads the "
            "stage outputs' paths as globs; choose another run.name or run.root"
        )
    if storage.is_remote(run_dir):
        with lease(run_dir / LOCK, create=create):
            yield
        return
    if not create and not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK
    fd = _open_lock(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").split() or ["?"]
            raise RunBusy(
                f"{run_dir}: in use by another editcurate process (pid {holder[0]}); "
                "wait for it to finish or use another run.name"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(
            fd, f"{os.getpid()} {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n".encode(), 0
        )
        yield
    finally:
        os.close(fd)  # closing releases the flock


def _open_lock(path: Path) -> int:
    """The lock file, opened for writing without following a link: a `.lock` planted as a
    symlink (or a FIFO, a folder) is refused, never truncated through."""
    try:
        fd = os.open(
            path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644
        )
    except OSError:
        if path.is_symlink() or path.is_dir():
            kind = "a symbolic link" if path.is_symlink() else "a folder"
            raise EnvError(
                f"{path}: the run folder's lock file is {kind}, not a plain file; remove it"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise EnvError(f"{path}: the run folder's lock file is not a regular file; remove it")
    return fd


def check_inside(run_dir: Path, root: Path) -> None:
    """UsageError unless run_dir and every stage folder in it resolve inside root."""
    base = root.resolve()
    for p in [run_dir, *(run_dir.iterdir() if run_dir.is_dir() else [])]:
        if p != run_dir and not p.is_dir():
            continue
        real = p.resolve()
        if real != base and base not in real.parents:
            raise UsageError(
                f"{p}: resolves to {real}, outside the run root {base} "
                "(a run name with '..', or a symlink out of the run folder)"
            )


def package_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def file_sha256(path: Location) -> str:
    h = hashlib.sha256()
    with storage.open_read(path) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def output_size(path: Location) -> int:
    """Bytes of a file, or of every file in a folder."""
    if storage.is_remote(path):
        return sum(n for _, n, _ in storage.objects(path))
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def _files(folder: Path, skip: Location | None = None) -> list[Path]:
    """The files under a folder, in name order; none under `skip` (a run folder kept inside
    an input folder: ingest writes there while it reads the input)."""
    files = sorted(q for q in folder.rglob("*") if q.is_file())
    if skip is None or storage.is_remote(skip):
        return files
    real, skip = folder.resolve(), skip.resolve()
    return [q for q in files if not (real / q.relative_to(folder)).is_relative_to(skip)]


def output_sha(
    path: Location, skip: Location | None = None, known: dict[str, str] | None = None
) -> str:
    """sha256 of a file, or of a folder's relative paths and file hashes (none under skip).
    `known`: the hashes of files in the folder by relative path, taken as they were written
    (parts.PartSink.sha256); only the others are read."""
    known = known or {}
    if storage.is_remote(path):  # the same text over the objects' names and bytes
        names = [n for n, _, _ in storage.objects(path)]
        if names == [""]:
            return file_sha256(path)
        rels: list[tuple[str, Location]] = [(n, path / n) for n in names]
    elif not path.is_dir():
        return file_sha256(path)
    else:
        rels = [(p.relative_to(path).as_posix(), p) for p in _files(path, skip)]
    h = hashlib.sha256()
    for n, p in rels:
        h.update(f"{n}\0{known.get(n) or file_sha256(p)}\n".encode())
    return h.hexdigest()


def input_fingerprint(path: Location, rev: str | None = None, skip: Location | None = None) -> str:
    """Content fingerprint of an input: a file's sha256, a folder's over its files (none
    under `skip`, the run's own folder), a git rev; an object's or a prefix's from what
    the store lists of them (storage.fingerprint: their versions change with every write)."""
    if storage.is_remote(path):
        return storage.fingerprint(path, skip)
    if rev is not None:
        out = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "--verify", f"{rev}^{{commit}}"],
            capture_output=True,
            text=True,
        )
        return "git:" + (out.stdout.strip() or "unresolved")
    if path.is_dir():
        return "dir:" + output_sha(path, skip)
    return "sha256:" + file_sha256(path)


def input_state(path: Location, skip: Location | None = None) -> tuple[tuple[Any, ...], ...]:
    """What a file's (or a folder's files') stat says of its content: (name, size, mtime,
    ctime, inode); none under `skip` (the run's own folder). Any write moves the ctime, which
    no one can set back, so equal states before and after a read mean no file was written in
    between (restored bytes included). An object's: (name, size, version) as its store lists
    them (storage.objects)."""
    if storage.is_remote(path):
        return tuple(storage.objects(path, skip))
    files = _files(path, skip) if path.is_dir() else [path]
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:  # gone since it was listed: a change
            out.append((f.as_posix(), -1, 0, 0, 0))
            continue
        out.append((f.as_posix(), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
    return tuple(out)


def _atomic_tmp(path: Path) -> Path:
    """The temp path beside `path`, emptied: whatever a killed run (or anyone) left there,
    a symlink included, is removed, so the writer creates a file of its own."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    remove(tmp)
    return tmp


@contextmanager
def parquet_sink(
    path: Location, schema: pa.Schema, meta: dict[str, str], **opts: Any
) -> Iterator[pq.ParquetWriter]:
    """A ParquetWriter on a temp file, renamed over `path` only when the block succeeds
    (`opts`: ParquetWriter options over PARQUET_OPTS); an object is written in place."""
    if storage.is_remote(path):
        schema = schema.with_metadata({**(schema.metadata or {}), **_meta_bytes(meta)})
        with PartWriter(path, schema, **{**PARQUET_OPTS, **opts}) as w:
            yield w
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _atomic_tmp(path)
    schema = schema.with_metadata({**(schema.metadata or {}), **_meta_bytes(meta)})
    writer = pq.ParquetWriter(tmp, schema, **{**PARQUET_OPTS, **opts})
    try:
        yield writer
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(Exception):  # the failure that brought us here is reported
            writer.close()
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def parts_sink(
    path: Location, schema: pa.Schema, meta: dict[str, str], part_rows: int
) -> Iterator[PartSink]:
    """A folder of Parquet parts (pipeline/parts.py), renamed over `path` only when the block
    succeeds."""
    if not storage.is_remote(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    schema = schema.with_metadata({**(schema.metadata or {}), **_meta_bytes(meta)})
    sink = PartSink(path, schema, part_rows, **PARQUET_OPTS)
    try:
        yield sink
    except BaseException:
        sink.abort()
        raise
    sink.close()


def write_parquet(table: pa.Table, path: Location, meta: dict[str, str]) -> None:
    with parquet_sink(path, table.schema, meta) as w:
        w.write_table(table)


def _meta_bytes(meta: dict[str, str]) -> dict[bytes, bytes]:
    return {f"editcurate.{k}".encode(): v.encode() for k, v in meta.items()}


@contextmanager
def atomic_path(path: Location) -> Iterator[Path]:
    """A temp path beside `path`, renamed over it when the block succeeds (removed if not):
    for writers that take a path (savefig, write_csv). For an object, a local temp file
    uploaded as one object when the block succeeds."""
    if storage.is_remote(path):
        import tempfile

        with tempfile.TemporaryDirectory(prefix="editcurate-") as d:
            tmp = Path(d) / path.name
            yield tmp
            storage.put(path, tmp.read_bytes())
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _atomic_tmp(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: Location, data: bytes) -> None:
    """`data` written atomically: a temp file renamed over `path`; an object in one PUT
    (readers see the old object or the new one)."""
    if storage.is_remote(path):
        storage.put(path, data)
        return
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text(path: Location, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: Location, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


@dataclass
class StageRun:
    """One execution of a stage: knows its folder, what it depends on, and writes its manifest."""

    run_dir: Location
    stage: str
    fingerprint: str  # the stage's code version + config section
    config_fingerprint: str  # the whole config, for the record
    inputs: dict[str, str]  # name -> content fingerprint
    started: float = field(default_factory=time.time)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def dir(self) -> Location:
        return self.run_dir / self.stage

    @property
    def meta(self) -> dict[str, str]:
        """Parquet schema metadata: deterministic, no times."""
        return {
            "stage": self.stage,
            "fingerprint": self.fingerprint,
            "inputs": json.dumps(self.inputs, sort_keys=True),
        }

    def is_fresh(self) -> bool:
        """True when a finished manifest matches this fingerprint and inputs, and every output
        still has the size and the sha256 recorded: content, so a same-size byte flip in a
        part is redone rather than skipped (the size is compared first, as it costs nothing)."""
        m = read_manifest(self.dir)
        if not m or m.get("fingerprint") != self.fingerprint or m.get("inputs") != self.inputs:
            return False
        outs = m.get("outputs", {})
        for name, out in outs.items():
            p = self.dir / name
            if not isinstance(out, dict) or not p.exists() or output_size(p) != out.get("bytes"):
                return False
        return all(output_sha(self.dir / n) == o.get("sha256") for n, o in outs.items())

    def begin(self) -> None:
        """Drop the old manifest first, so a run killed midway is never mistaken for done."""
        if storage.is_remote(self.dir):
            storage.delete(self.dir / MANIFEST)
            storage.delete(self.dir / STALE)
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / MANIFEST).unlink(missing_ok=True)
        (self.dir / STALE).unlink(missing_ok=True)
        for stale in self.dir.glob(".*.tmp"):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale)
            else:
                stale.unlink()

    def record_output(self, name: str, role: str, known: dict[str, str] | None = None) -> None:
        """role: "items" (carries items on), "terminal" (items leave here), or "aux".
        A folder output (hf/) is recorded by its files' total size and a hash over them
        (`known`: its files' hashes taken as they were written, see output_sha)."""
        p = self.dir / name
        rows = num_rows(p) if name.endswith(".parquet") else None
        self.outputs[name] = {
            "role": role,
            "rows": rows,
            "bytes": output_size(p),
            "sha256": output_sha(p, known=known),
        }

    def finish(self, counts: dict[str, Any], extra: dict[str, Any] | None = None) -> dict:
        manifest = {
            "stage": self.stage,
            "fingerprint": self.fingerprint,
            "config_fingerprint": self.config_fingerprint,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "counts": counts,
            "versions": package_versions(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "wall_s": round(time.time() - self.started, 3),
            **(extra or {}),
        }
        if storage.is_remote(self.dir):
            still_held(self.dir.parent)  # a run whose lease was taken over commits nothing
        write_json(self.dir / MANIFEST, manifest)
        return manifest


def stage_folders(run_dir: Location, marker: str = MANIFEST) -> list[Location]:
    """The run folder's stage folders holding `marker` (a manifest: finished; STALE), in
    PIPELINE order, then any other (smoke, a custom stage) by name."""
    rank = {s: i for i, s in enumerate(NAMES)}
    found = [p.parent for p in run_dir.glob(f"*/{marker}")]
    return sorted(found, key=lambda d: (rank.get(d.name, len(rank)), d.name))


def invalidate_downstream(run_dir: Location, changed: str) -> list[str]:
    """After stage `changed` wrote its outputs: every finished stage that read an output of it
    with other content, or that reads a stage made stale here (transitively), loses its
    manifest to STALE. Returns those stages, in the order found."""
    stale: list[str] = []
    todo = [changed]
    while todo:
        up = todo.pop(0)
        up_m = read_manifest(run_dir / up)
        now = {
            n: f"sha256:{o.get('sha256', '')}" for n, o in (up_m or {}).get("outputs", {}).items()
        }
        for d in stage_folders(run_dir):
            m = read_manifest(d)
            if m is None or d.name == up:
                continue
            read = {
                k.partition("/")[2]: v
                for k, v in m.get("inputs", {}).items()
                if k.startswith(f"{up}/")
            }
            if not read or (up_m is not None and all(now.get(n) == v for n, v in read.items())):
                continue
            why = f"{up} changed after it ran" if up == changed else f"{up} is stale"
            write_json(d / STALE, {**m, "stale_because": why})
            remove(d / MANIFEST)
            stale.append(d.name)
            todo.append(d.name)
    return stale


def stale_stages(run_dir: Location) -> dict[str, str]:
    """Stage -> why it is stale, for the run folder's stages that are."""
    out = {}
    for d in stage_folders(run_dir, STALE):
        if not (d / MANIFEST).exists():
            try:
                out[d.name] = str(json.loads((d / STALE).read_bytes()).get("stale_because", ""))
            except (json.JSONDecodeError, OSError, AttributeError):
                out[d.name] = "its inputs changed after it ran"
    return out


def committed(stage_dir: Location, name: str) -> bool:
    """`name` is an output its stage finished writing: its manifest lists it (or the manifest
    it had before an upstream change made it stale). Readers outside the runner check this
    first: on object storage an output without one may be a killed attempt's half."""
    return name in committed_outputs(stage_dir)


def committed_outputs(stage_dir: Location) -> set[str]:
    """The outputs of `stage_dir` that `committed` accepts, from one read of its manifest
    (and of the stale one only when there is no manifest)."""
    for marker in (MANIFEST, STALE):
        m = read_manifest(stage_dir, marker)
        if m is not None:
            return set(m.get("outputs", {}))
    return set()


def read_manifest(stage_dir: Location, marker: str = MANIFEST) -> dict[str, Any] | None:
    p = stage_dir / marker
    if storage.is_remote(p):
        p.fs.invalidate_cache(p.path)  # written since this process listed it
    if not p.exists():
        return None
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError):
        return None
    # anything but an object whose outputs and counts are objects: not a manifest (unfinished)
    ok = isinstance(m, dict) and all(isinstance(m.get(k, {}), dict) for k in ("outputs", "counts"))
    return m if ok else None

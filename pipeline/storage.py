"""Where an input lives: a local path, or an object in storage named by a URL.

A URL (`s3://bucket/in/edits.jsonl.gz`, `gs://...`, `az://...`, any scheme fsspec knows) is
read through fsspec as a `UPath` (universal_pathlib): the path methods the readers use
(`name`, `is_dir`, `glob`, `/`) work on it as on a local `Path`, and it pickles with its
options, so a Ray worker opens its own piece of the object. Credentials and endpoints come
from the standard sources (the `AWS_*` environment variables, `AWS_ENDPOINT_URL` included, a
profile, instance metadata), and `run.storage_options` for anything else (passed to the
filesystem, e.g. `{endpoint_url = "http://minio:9000"}` for s3).

A filesystem's implementation is its own package (s3fs for s3://, gcsfs for gs://): a URL
whose package is missing is one line naming what to install.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from pipeline.errors import EnvError

if TYPE_CHECKING:  # fsspec and upath are imported when a URL is first read (CLI start-up)
    from typing_extensions import TypeIs
    from upath import UPath

# a path or an object in storage: what a source's path resolves to
Location = Union[Path, "UPath"]  # noqa: UP007 (a runtime alias: no `|` with a forward ref)

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# what a scheme's fsspec implementation is installed as, where its package name differs
_PACKAGE = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "az": "adlfs",
    "abfs": "adlfs",
}


def scheme(s: str | Path) -> str | None:
    """The URL scheme of `s` ("s3"), None for a local path (`file://` included)."""
    m = _SCHEME.match(str(s)) if isinstance(s, str) else None
    return None if m is None or m.group(1).lower() == "file" else m.group(1).lower()


def is_url(s: str | Path) -> bool:
    return scheme(s) is not None


def is_remote(p: Location) -> TypeIs[UPath]:
    """An object in storage (not a local path)."""
    return not isinstance(p, Path)  # (a local UPath is a Path)


def at(url: str, options: dict[str, Any] | None = None) -> UPath:
    """The object (or prefix) a URL names, read with `options` (run.storage_options);
    EnvError naming the package to install when the scheme's implementation is missing."""
    from upath import UPath

    try:
        return UPath(url, **(options or {}))
    except ImportError as e:
        raise EnvError(needs(url)) from e
    except (ValueError, TypeError) as e:  # an unknown scheme, or options it does not take
        raise EnvError(f"{url}: {e}") from None


def why(e: BaseException) -> str:
    """A store's error in one line: its type (botocore's NoCredentialsError says more than
    its text) and its message."""
    text = " ".join(str(e).split())
    name = type(e).__name__
    return text if isinstance(e, OSError) or not text else f"{name}: {text}"


def needs(url: str) -> str:
    """The line for a URL whose scheme's fsspec implementation is not installed."""
    name = scheme(url) or url
    package = _PACKAGE.get(name, f"the fsspec implementation of {name}://")
    return f"{url}: reading {name}:// needs {package} (pip install {package})"


def join(base: str, rel: str) -> str:
    """`rel` read from URL `base` (a prefix): `rel` itself when it is a URL."""
    return rel if is_url(rel) else f"{base.rstrip('/')}/{rel.lstrip('/')}"


def size(f: Any) -> int:
    """Bytes of an open file: a local one's by fstat, an object's as its store says."""
    fileno = getattr(f, "fileno", None)
    if fileno is not None:
        try:
            return os.fstat(fileno()).st_size
        except (OSError, ValueError):
            pass
    return int(f.size)


def objects(p: UPath, skip: Location | None = None) -> list[tuple[str, int, str]]:
    """(name relative to `p`, size, version) of the object `p` names, or of every object
    under the prefix (none under `skip`, a run folder kept inside an input prefix), in name
    order. The version is what the store lists of the object's version (VERSION_FIELDS: its
    ETag or hash, its time) hashed: any write changes it, so equal lists before and after a
    read mean nothing read was replaced in between. One listing, no object read (unless the
    store lists no version: then its bytes' hash)."""
    from fsspec.utils import tokenize

    p.fs.invalidate_cache(p.path)  # a cached listing may predate a write
    if p.fs.isdir(p.path):
        found = p.fs.find(p.path, detail=True)
        base = p.path.rstrip("/") + "/"
        away = skip.path.rstrip("/") + "/" if skip is not None and is_remote(skip) else None
        rows = [
            (k.removeprefix(base), v)
            for k, v in found.items()
            if v.get("type") != "directory" and not (away and k.startswith(away))
        ]
    else:
        rows = [("", p.fs.info(p.path))]
    out = []
    for name, info in rows:
        fields = {k: info[k] for k in VERSION_FIELDS if info.get(k) is not None}
        ver = tokenize(fields) if fields else _content(p, name)
        out.append((name, int(info.get("size") or 0), ver))
    return sorted(out)


# what stores list of an object's version: s3 (ETag, VersionId, LastModified), gcs
# (generation, md5Hash, crc32c, updated), azure (etag, last_modified), local and others (mtime)
VERSION_FIELDS = (
    "ETag",
    "etag",
    "VersionId",
    "version_id",
    "generation",
    "md5Hash",
    "crc32c",
    "LastModified",
    "last_modified",
    "updated",
    "mtime",
)


def _content(p: UPath, name: str) -> str:
    """sha256 of an object's bytes: for a store that lists no version (an HTTP server that
    sends neither ETag nor Last-Modified)."""
    path = f"{p.path.rstrip('/')}/{name}" if name else p.path
    h = hashlib.sha256()
    with p.fs.open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def fingerprint(p: UPath, skip: Location | None = None) -> str:
    """A fingerprint of an object or prefix: its objects' names, sizes and versions (none
    under `skip`)."""
    h = hashlib.sha256()
    for name, n, ver in objects(p, skip):
        h.update(f"{name}\0{n}\0{ver}\n".encode())
    return "object:" + h.hexdigest()


# --- the run folder on object storage -----------------------------------------------------
#
# A run folder (run.root) may be a URL too. Object stores have no rename, so nothing there is
# written to a temp name and moved: an output is written in place (its old objects deleted
# first), and the stage's manifest, one PUT written last, is the commit. Every reader trusts
# a stage's outputs only through its manifest (runs.read_manifest), which `begin` deletes
# before the stage writes anything: a killed attempt's objects are never read, and the
# stage's next attempt deletes them. The run folder's lock is a lease object (runs.run_lock).


def location(s: str | Path, options: dict[str, Any] | None = None) -> Location:
    """A run folder (or a file in one): a local path, or the prefix a URL names (run_root)."""
    return run_root(str(s), options) if is_url(s) else Path(s)


def run_root(url: str, options: dict[str, Any] | None = None) -> UPath:
    """run.root at a URL: read without the filesystem's cache of listings, which would miss
    what other processes (Ray's workers) wrote since."""
    return at(url, {**(options or {}), "use_listings_cache": False})


def under(d: Location, rel: str) -> Location:
    """`d / rel`, a `..` in `rel` taken as the parent (object stores do not resolve it)."""
    if not is_remote(d):
        return d / rel
    p = d
    for seg in rel.split("/"):
        p = p.parent if seg == ".." else p if seg in ("", ".") else p / seg
    return p


def open_write(p: Location) -> Any:
    """A binary file written in place: an object is uploaded when it is closed."""
    if is_remote(p):
        return p.fs.open(p.path, "wb")
    return open(p, "wb")


def open_read(p: Location) -> Any:
    if is_remote(p):
        return p.fs.open(p.path, "rb")
    return open(p, "rb")


def put(p: UPath, data: bytes) -> None:
    """An object written whole in one request: readers see the old bytes or the new."""
    p.fs.pipe_file(p.path, data)


def create(p: UPath, data: bytes) -> dict[str, Any] | None:
    """Writes the object only if none is there (a conditional PUT, `If-None-Match: *`): the
    store's reply (S3's carries the ETag), None when one was there."""
    return _conditional_put(p, data, mode="create")


def replaces_if_match(p: UPath) -> bool:
    """The store can replace an object only over a given version (S3's `If-Match`)."""
    return scheme(str(p)) in ("s3", "s3a")


def replace(p: UPath, data: bytes, etag: str) -> dict[str, Any] | None:
    """Writes the object only over version `etag` (`If-Match`; replaces_if_match stores):
    the store's reply, None when another version (or none) is there."""
    try:
        return _conditional_put(p, data, IfMatch=etag)
    except FileNotFoundError:  # no object to match
        return None


def _conditional_put(p: UPath, data: bytes, **condition: Any) -> dict[str, Any] | None:
    """A PUT under a condition: the store's reply, None when the condition failed (a 412,
    or a 409: another conditional write of the key in flight)."""
    try:
        out = p.fs.pipe_file(p.path, data, **condition)
    except FileExistsError:
        return None
    except OSError as e:
        text = str(e)
        if e.errno == errno.EINVAL or "ConditionalRequestConflict" in text:
            return None
        if "pre-condition" in text or "precondition" in text:
            return None
        raise
    return out if isinstance(out, dict) else {}


def delete(p: UPath) -> None:
    """The object, or every object under the prefix, deleted (nothing there: nothing done)."""
    p.fs.invalidate_cache(p.path)
    if p.fs.exists(p.path):
        p.fs.rm(p.path, recursive=True)
    p.fs.invalidate_cache(p.path)


def polars_source(p: Location) -> tuple[str, dict[str, Any] | None]:
    """What polars reads `p` as: its path, and for an object its URL and the storage options
    polars takes, translated from the fsspec ones the run has (polars reads the AWS_*
    variables itself)."""
    if not is_remote(p):
        return str(p), None
    opts = dict(getattr(p, "storage_options", {}) or {})
    out: dict[str, Any] = {}
    if scheme(str(p)) in ("s3", "s3a"):
        names = {
            "endpoint_url": "aws_endpoint_url",
            "key": "aws_access_key_id",
            "secret": "aws_secret_access_key",
            "token": "aws_session_token",
        }
        for k, v in opts.items():
            if k in names:
                out[names[k]] = v
        region = (opts.get("client_kwargs") or {}).get("region_name")
        if region:
            out["aws_region"] = region
    return str(p), out or None

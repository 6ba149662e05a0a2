"""Shared test helpers: configs written in the test, the CLI driven in-process."""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

# Wide, plain console output, so that messages asserted on are not wrapped.
os.environ["COLUMNS"] = "200"
os.environ["NO_COLOR"] = "1"

import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext, Items, RawItem, Record, RecordError

ROOT = Path(__file__).resolve().parents[1]
# The real corpora are not part of the repository: their folder is named by this variable,
# else taken to be `shared/data` in the folder that holds the repository (where the workspace
# keeps it). Tests that need a corpus skip, saying which, where it is absent.
SHARED_ENV = "EDITCURATE_SHARED_DATA"
SHARED_CONFIG = ROOT / "data" / "shared-corpora.toml"  # its paths: file names in that folder


def shared_data() -> Path:
    """The folder of the real corpora: $EDITCURATE_SHARED_DATA, else the one beside the repo."""
    given = os.environ.get(SHARED_ENV)
    return Path(given).expanduser().absolute() if given else ROOT.parent / "shared" / "data"


SHARED_DATA = shared_data()


def one_by_one(recs: Iterable[Record | RecordError | Items]) -> Iterator[Record | RecordError]:
    """A reader's records with each Items (a block read whole) given record by record, as a
    reader yields them without blocks."""
    for rec in recs:
        if not isinstance(rec, Items):
            yield rec
            continue
        for k, ref in enumerate(rec.refs):
            yield Record(ref, [RawItem(**{f: v[k] for f, v in rec.fields.items()})])


def read_source(module, path: Path, **spec_kw) -> list[Record | RecordError]:
    kind = spec_kw.pop("kind", "table")
    ctx = spec_kw.pop("ctx", None) or IngestContext()
    return list(
        one_by_one(module.read(SourceConfig(kind=kind, path=str(path), **spec_kw), path, ctx))
    )


def toml_config(tmp_path: Path, sources: str, name: str = "t") -> Path:
    p = tmp_path / "editcurate.toml"
    p.write_text(f'[run]\nname = "{name}"\nroot = "runs"\n\n{sources}')
    return p


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance (2 CPUs) for every Ray test of the session."""
    ray = pytest.importorskip("ray", reason="Ray is the optional [ray] extra (in [dev])")
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


# --- an S3 server on this machine (moto's; no internet), for the object-storage tests


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint():
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request
    moto_server = pytest.importorskip("moto.server", reason="moto[server] is in [dev]")
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint, monkeypatch):
    """A new bucket on the S3 server, the standard AWS variables pointing at it; its s3fs
    filesystem, to put inputs in."""
    s3fs = pytest.importorskip("s3fs", reason="s3:// needs the [s3] extra (in [dev])")

    for k, v in {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint, key="testing", secret="testing")
    name = f"b{uuid.uuid4().hex[:12]}"
    fs.mkdir(name)
    return name, fs


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True):
        res = runner.invoke(app, [str(a) for a in args])
        if ok and res.exit_code != 0:
            raise AssertionError(f"exit {res.exit_code}: {res.output}\n{res.exception!r}")
        return res

    return invoke


def shared(name: str) -> Path:
    """A real corpus's file, or a skip that says where it was looked for and how to set it."""
    p = SHARED_DATA / name
    if not p.exists():
        where = (
            f"${SHARED_ENV} = {SHARED_DATA}"
            if os.environ.get(SHARED_ENV)
            else f"${SHARED_ENV} unset, and not in {SHARED_DATA}, beside the repository"
        )
        pytest.skip(
            f"real corpus {name} absent ({where}); set {SHARED_ENV} to the folder of the "
            "shared corpora to run this test (docs/real-corpora.md)"
        )
    return p


def shared_corpora_sets() -> list[str]:
    """The `--set` that points data/shared-corpora.toml's sources (file names) at the shared
    corpora folder."""
    return ["--set", f"ingest.root={json.dumps(str(SHARED_DATA))}"]


def make_item_table(rows: list[dict], flags: bool = True):
    """An items table (ITEM_SCHEMA, + the filter stage's `flags` list column) from partial dicts.

    Missing fields get neutral values; `id` defaults to schema.item_id of the content.
    """
    import pyarrow as pa

    from pipeline.schema import ITEM_SCHEMA, item_id

    full = []
    for k, r in enumerate(rows):
        d = {
            "source": "t",
            "source_ref": f"row {k}",
            "repo": "o/r",
            "change": "1",
            "path": "a.py",
            "language": "",
            "before": "",
            "after": "",
            "context": "",
            "comment": "",
            "author": "dev",
            "author_is_bot": False,
            "lines_removed": 1,
            "lines_added": 1,
            "created_at": None,
            **r,
        }
        d.setdefault(
            "id", item_id(*(d[f] for f in ("repo", "change", "path", "before", "after", "comment")))
        )
        full.append(d)
    schema = ITEM_SCHEMA
    if flags:
        schema = schema.append(pa.field("flags", pa.list_(pa.string())))
        for d in full:
            d.setdefault("flags", [])
    return pa.Table.from_pylist(full, schema=schema)

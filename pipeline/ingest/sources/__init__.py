"""Ingest's source kinds, one module each, and SOURCES, the registry the stage reads them by.

A source module declares what it reads and how:
- `EXPECTS`: its path is a regular "file", a "folder", or "any" (checked before anything is
  fingerprinted or read);
- `read(spec, path, ctx)`: its records (base.Record / RecordError), mapped and masked by the
  shared readers and helpers beside this package (jsonio, csvio, mapping, opening ...);
- optionally `count(spec, path, limit) -> (records, unit) | None`: the input's own record
  count, which verify holds ingest to; `pieces(spec, path)`: how a big input is cut for
  workers (shards.py); `rev(spec)`: the revision its content fingerprint pins (git);
  `remote = False` where its path must be local (a git repository, a saved dataset): an
  object-storage URL is then refused before anything is read.

A new kind is one module here, listed below, plus its tests; its name goes in the config's
SourceKind (pipeline/config/vocab.py: the config does not import the readers), and a test
holds the two to the same names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from types import ModuleType
from typing import Any

from pipeline.ingest.sources import codereviewer, git, github, hf, table


@dataclass(frozen=True)
class Source:
    kind: str
    expects: str  # "file" | "folder" | "any"
    read: Callable[..., Any]
    count: Callable[..., Any] | None = None
    pieces: Callable[..., Any] | None = None
    rev: Callable[..., Any] | None = None
    remote: bool = True  # its path may be an object in storage (pipeline/storage.py)

    @classmethod
    def of(cls, module: ModuleType) -> Source:
        """The source a module declares: its EXPECTS and its functions by their names."""
        given = {f.name: getattr(module, f.name) for f in fields(cls) if hasattr(module, f.name)}
        kind = module.__name__.rpartition(".")[2]
        return cls(
            kind=kind, expects=module.EXPECTS, **{k: v for k, v in given.items() if k != "kind"}
        )


# a source's kind is its module's name
SOURCES: dict[str, Source] = {
    s.kind: s for s in (Source.of(m) for m in (table, github, codereviewer, git, hf))
}

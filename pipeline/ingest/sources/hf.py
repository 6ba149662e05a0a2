"""Hugging Face `datasets`: a dataset saved with `save_to_disk`, or local files read through
`load_dataset` with a builder (json, csv, parquet ...). Rows go through the same field mapping
as the generic tables. Nothing is fetched from a hub: the path must be local.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from pipeline.config import SourceConfig
from pipeline.ingest.base import IngestContext, Record, RecordError, SourceUnreadable
from pipeline.ingest.mapping import Mapper
from pipeline.ingest.sources.table import sized_rows
from pipeline.storage import Location

EXPECTS = "any"  # a saved dataset's folder, or files a builder reads
remote = False  # datasets reads a local saved dataset


def _load(spec: SourceConfig, path: Location):
    import datasets

    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # a local read must never go online
    if spec.format in ("disk", "auto"):
        try:
            return datasets.load_from_disk(str(path))
        except FileNotFoundError as e:
            if spec.format == "disk":
                raise SourceUnreadable(
                    f"{path}: not a dataset saved with save_to_disk ({e})"
                ) from None
            raise SourceUnreadable(
                f"{path}: not a saved dataset; for data files set format to a builder "
                "(json, csv, parquet)"
            ) from None
        except Exception as e:  # damaged files: datasets and pyarrow raise many types
            raise SourceUnreadable(f"{path}: cannot load the saved dataset: {e}") from None
    files = [str(path / f) for f in spec.data_files] if spec.data_files else [str(path)]
    if spec.data_files and not path.is_dir():
        raise SourceUnreadable(f"{path}: data_files are given, so path must be their folder")
    try:
        return datasets.load_dataset(spec.format, data_files=files)
    except Exception as e:  # datasets raises many types; all mean "cannot read this source"
        raise SourceUnreadable(f"{path}: load_dataset({spec.format!r}) failed: {e}") from None


def read(spec: SourceConfig, path: Location, ctx: IngestContext) -> Iterator[Record | RecordError]:
    if not path.exists():
        raise SourceUnreadable(f"{path}: no such file or folder")
    mapper = Mapper(spec)
    ds = _load(spec, path)
    if hasattr(ds, "keys"):  # a DatasetDict: one or all splits, in a stable order
        names = sorted(ds.keys())
        if spec.split:
            if spec.split not in ds:
                raise SourceUnreadable(f"{path}: no split {spec.split!r}; splits: {names}")
            names = [spec.split]
        parts = [(n, ds[n]) for n in names]
    else:
        parts = [(spec.split or "", ds)]
    ctx.set_total(sum(len(d) for _, d in parts))
    for split, d in parts:
        prefix = f"{split} " if split else ""
        row = 0
        # Arrow batches (a saved dataset's are memory-mapped), sized before any row becomes
        # Python values, so a row over ingest.max_record_bytes is an error, never read whole
        for tbl in d.with_format("arrow").iter(batch_size=ctx.batch_size):
            for batch in tbl.to_batches():
                for obj in sized_rows(batch, ctx.max_record_bytes):
                    row += 1
                    ref = f"{prefix}row {row}"
                    yield RecordError(ref, *obj) if isinstance(obj, tuple) else mapper(obj, ref)
                ctx.advance(batch.num_rows)
    mapper.check_mapped()

"""The local executor: a map stage's batches through its `map`, in this process."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from pipeline.executors import Writer, batch_size
from pipeline.stage import resolve

if TYPE_CHECKING:
    from pipeline.config import Config
    from pipeline.runner import StageIO
    from pipeline.stage import Stage


def run_map(stage: Stage, cfg: Config, io: StageIO) -> dict[Any, Any]:
    """The summed counts; the outputs are written through io."""
    ctx = resolve(stage.start)(cfg) if stage.start else cfg
    fn = resolve(stage.map)  # type: ignore[arg-type]
    src = pq.ParquetFile(io.input(stage.reads[0]))
    size = batch_size(stage, cfg)
    with ExitStack() as stack:
        out = Writer(stage, io, src.schema_arrow, size, stack)
        bar = stack.enter_context(io.progress())
        task = bar.add_task(stage.name, total=src.metadata.num_rows)
        for batch in src.iter_batches(batch_size=size):
            out.add(*fn(batch, ctx))
            bar.advance(task, batch.num_rows)
        return out.close()

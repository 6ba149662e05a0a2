"""A map stage (`Stage.map`): its batches through the configured executor, then the Writer."""

from __future__ import annotations

from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from pipeline.executors import Writer, batch_size, batches
from pipeline.stage import resolve

if TYPE_CHECKING:
    from pipeline.config import Config
    from pipeline.runner import StageIO
    from pipeline.stage import Stage


def run_map(stage: Stage, cfg: Config, io: StageIO) -> dict[Any, Any]:
    """The summed counts; the outputs are written through io."""
    ctx = resolve(stage.start)(cfg) if stage.start else cfg
    fn = resolve(stage.map)  # type: ignore[arg-type]
    src = io.input(stage.reads[0])
    size = batch_size(stage, cfg)
    where = " (ray)" if cfg.run.executor == "ray" else ""
    with ExitStack() as stack:
        out = Writer(stage, io, pq.read_schema(src), size, stack)
        bar = stack.enter_context(io.progress())
        task = bar.add_task(stage.name + where, total=pq.ParquetFile(src).metadata.num_rows)
        for outs, counts, rows in batches(cfg, src, fn, ctx, size):
            out.add(outs, counts)
            bar.advance(task, rows)
        return out.close()

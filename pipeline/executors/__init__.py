"""Executors run per-batch work: `local` in this process, `ray` on Ray Data.

`batches(cfg, src, fn, ctx, size)` runs `fn(batch, ctx) -> (outputs, counts)` over `size`-row
batches of a Parquet output; `tasks(cfg, todo, fn, ctx)` runs a generator `fn(task, ctx)` per
task (ingest's pieces of a source); `partitioned(cfg, src, key, columns, fn, ctx)` runs
`fn(rows, ctx)` over an output cut so that rows sharing a key stay together (the filter's
whole-input findings, per repository). Results come back in input order whichever executor ran
them. Executors only decide where work runs: the runner writes a map stage's outputs (filter), and
ingest its own, through `writer`, which re-chunks them into row groups of exactly the stage's
batch size, so files are byte-identical whichever executor ran (Ray's workers see the local
batches too: Parts.spans). Asked with `held` (the outputs' schemas), `batches` and `tasks`
on Ray leave the outputs with the workers, and `writer`'s parts are written by workers:
nothing a stage writes passes through the driver. Whole-stage steps call `batches` for their
own per-item work and do the rest in the driver; those whose rows are made a batch at a time
(decontaminate's matching, shapes' kept and removed, export's split files) write them
through `writer` too, with the pieces as they came (`size` None), and `reordered` puts rows
in another order than the input's a range of target slots at a time (dedup's outputs,
spread's kept). `batches(..., side=)` joins to each batch columns a stage decided per row
in tasks of its own (shapes' annotate), by row number (side.py). What the executors are
handed and give back is in contract.py.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.executors.contract import BatchFn, KeyRangeFn, PartFn, RangeFn, Result, TaskFn
from pipeline.executors.side import Side, arrays, joined
from pipeline.parts import Parts, Writer, as_frame, scan_output, with_rows
from pipeline.reorder import ranges, scatter
from pipeline.storage import Location

if TYPE_CHECKING:
    from pipeline.config import Config, RunConfig


def batches(
    cfg: Config,
    src: Location,
    fn: BatchFn,
    ctx: Any,
    size: int,
    columns: list[str] | None = None,
    threads: int = 1,
    held: dict[str, pa.Schema] | None = None,
    numbered: bool = False,
    side: Side | None = None,
) -> Iterator[Result]:
    """fn over `size`-row batches of `src` (only `columns`), in input order, on the
    configured executor (run.executor). Locally, `threads` > 1 runs that many batches at
    once on threads: for steps whose kernels release the GIL (numba, polars), so one batch's
    work overlaps the next one's. `held`: outputs go only to `writer` (on Ray they stay
    with the workers). `numbered`: each batch ends with a column ROW, its rows' positions
    in `src` (for fn to look up what the driver decided per row). `side`: then each batch
    has side.schema's columns too, joined by row number (side.py: on Ray by the tasks)."""
    if cfg.run.executor == "ray":
        from pipeline.executors.ray import ray_batches

        yield from ray_batches(cfg, src, fn, ctx, size, columns, held, numbered, side)
        return

    def done(res: tuple[dict[str, Any], dict[str, Any]], rows: int) -> Result:
        return {k: _local(v) for k, v in res[0].items()}, res[1], rows

    parts = Parts(src)
    reader = parts.iter_batches(size, columns)
    if numbered:
        reader = with_rows(reader, 0)
    if side is not None:
        laid = arrays(side.pieces, 0, parts.num_rows, side.schema)
        reader = joined(reader, 0, laid, side.schema)
    if threads <= 1:
        for batch in reader:
            yield done(fn(batch, ctx), batch.num_rows)
        return

    def work(batch: pa.RecordBatch) -> tuple[tuple[dict[str, Any], dict[str, Any]], int]:
        return fn(batch, ctx), batch.num_rows

    with ThreadPoolExecutor(threads) as pool:  # at most `threads` batches held at a time
        for res, rows in in_order(pool, lambda b: b, work, reader, threads - 1):
            yield done(res, rows)


def in_order(
    ex: ThreadPoolExecutor,
    prepare: Callable[[Any], Any],
    work: Callable[[Any], Any],
    items: Iterable[Any],
    depth: int,
) -> Iterator[Any]:
    """work(prepare(x)) for x in items, in order: prepare in this thread, work in the pool, at
    most `depth` prepared inputs waiting. prepare may spread a kernel over threads itself
    (jit.on_threads: reading a band, making signatures); work runs nogil kernels."""
    pending: deque[Future[Any]] = deque()
    for x in items:
        pending.append(ex.submit(work, prepare(x)))
        if len(pending) > depth:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def tasks(
    run: RunConfig,
    todo: list[Any],
    fn: TaskFn,
    ctx: Any,
    held: dict[str, pa.Schema] | None = None,
) -> Generator[tuple[dict, dict], None, None]:
    """What fn yields for each task of `todo`, task after task, in order, on the configured
    executor: for work whose input is not a Parquet output (ingest's pieces of a source).
    On Ray each task runs on some worker, as many at once as it has CPUs. `held`: outputs
    go only to `writer` (on Ray they stay with the workers)."""
    if run.executor == "ray":
        from pipeline.executors.ray import ray_held, ray_tasks

        if held is not None:
            yield from ray_held(run, todo, fn, ctx, held)
        else:
            yield from ray_tasks(run, todo, fn, ctx)
        return
    for task in todo:
        for outs, counts in fn(task, ctx):
            yield {k: _local(v) for k, v in outs.items()}, counts


def partitioned(
    cfg: Config, src: Location, key: str, columns: list[str], fn: PartFn, ctx: Any
) -> list[Any]:
    """fn(rows, ctx) over the rows of `src` (only `columns`) cut so that every row with one
    value of `key` is in the same cut, rows in input order within it; the results in cut
    order. Locally one cut, the output as a lazy frame (polars reads only what fn needs);
    on Ray hash partitions, cut by workers from the output's row groups and each handed to a
    task: the driver holds the results only. For work that is whole within a key (a
    repository's changes) but not within a batch."""
    if cfg.run.executor == "ray":
        from pipeline.executors.ray import ray_partitioned

        return ray_partitioned(cfg.run, src, key, columns, fn, ctx)
    return [fn(scan_output(src).select(columns), ctx)]


def range_count(cfg: Config, rows: int) -> int:
    """How many key ranges `by_range` cuts `rows` rows into: 1 locally; on Ray one per
    ROWS_PER_CUT rows, at least one per CPU. A stage takes it once: a cluster that loses a
    node midway must not change it between two passes over the same keys."""
    if cfg.run.executor == "ray":
        from pipeline.executors.ray import ensure_ray, partitions

        return partitions(ensure_ray(cfg.run), rows)
    return 1


def by_range(
    cfg: Config,
    pieces: list[Any],
    key: str,
    columns: list[str],
    count: int,
    fn: KeyRangeFn,
    ctx: Any,
    schemas: dict[str, pa.Schema],
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """fn(rows, p, ctx) -> (result, {output: table}) for each of `count` ranges p of the uint64
    column `key` (range p holds the keys k with ((k >> 32) * count) >> 32 == p: ranges come in key
    order), over the rows of `pieces` (only `columns`), rows in piece order within a range; (result,
    outputs) in range order. `pieces` are a stage's own per-batch tables: what `batches` gave with
    `held` (on Ray they stay with the workers). Locally `count` is 1 (range_count) and fn gets every
    row. On Ray a shuffle of tasks (ray_by_range): the results come to the driver, the outputs
    (`schemas`) stay with the workers, for `writer`. For work that is whole within one value of a
    key but needs no order across values (shapes' groups at one scope)."""
    if cfg.run.executor == "ray":
        from pipeline.executors.ray import ray_by_range

        yield from ray_by_range(cfg.run, pieces, key, columns, count, fn, ctx, schemas)
        return
    assert count == 1, "locally every row is in one range (range_count)"
    frames = [as_frame(p) for p in pieces]
    yield fn(pl.concat([f.select(columns) for f in frames], rechunk=False), 0, ctx)


def reordered(
    cfg: Config,
    src: Location,
    slots: np.ndarray,
    size: int,
    fn: RangeFn,
    ctx: Any,
    folder: Path,
    schemas: dict[str, pa.Schema],
) -> Iterator[dict[str, Any]]:
    """fn(rows, k, ctx) -> {output name: table} for each range k of `size` consecutive
    slots that holds rows, in order: `rows` are the rows of `src` whose slot (`slots`, one
    per row) falls in the range, in slot order, with their slot (reorder.SLOT). Locally
    through scatter files in `folder` (pipeline/reorder.py); on Ray a shuffle of tasks whose
    outputs (`schemas`) stay with the workers, for `writer`."""
    if cfg.run.executor == "ray":
        from pipeline.executors.ray import ray_reordered

        yield from ray_reordered(cfg.run, src, slots, size, fn, ctx, schemas)
        return
    parts = scatter(src, slots, size, folder)
    for k in ranges(slots, size):
        yield fn(parts.read(int(k)), int(k), ctx)


def elsewhere(run: RunConfig, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) as one task on the configured executor (locally in this process), its
    result back: for whole-output work that needs only the run folder (export's hf/), so
    that its memory is a worker's, not the driver's."""
    if run.executor == "ray":
        from pipeline.executors.ray import ray_call

        return ray_call(run, fn, *args)
    return fn(*args)


def _local(b: Any) -> Any:
    """A local map output as the step returned it (a polars frame stays one), batches as
    tables."""
    return pa.Table.from_batches([b]) if isinstance(b, pa.RecordBatch) else b


def writer(
    run: RunConfig,
    sink: Callable[[str, pa.Schema], Any],
    schemas: dict[str, pa.Schema],
    size: int | None,
    stack: Any,
) -> Any:
    """A stage's writer of outputs `schemas` (parts.Writer's `add` and `close`; `size` the
    row groups', None for the pieces' own): in this process, or on Ray by the workers
    (executors.ray.RayParts), for `held` results."""
    if run.executor == "ray":
        from pipeline.executors.ray import RayParts

        return RayParts(run, sink, schemas, size, stack)
    return Writer(sink, schemas, size, stack)


def worker_cpu_s() -> float:
    """CPU seconds Ray spent for this process so far (0 without Ray; executors.ray)."""
    on_ray = _ray_executor()
    return on_ray.worker_cpu_s() if on_ray is not None else 0.0


def worker_nodes() -> dict[str, int]:
    """Ray tasks run per node so far ({} without Ray)."""
    on_ray = _ray_executor()
    return on_ray.worker_nodes() if on_ray is not None else {}


def _ray_executor() -> Any:
    """executors.ray if this process has used it (nothing to count otherwise): not imported
    here, so a local run never imports Ray's side."""
    return sys.modules.get("pipeline.executors.ray")

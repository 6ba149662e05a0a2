"""Executors run per-batch work: `local` in this process, `ray` on Ray Data.

`batches(cfg, src, fn, ctx, size)` runs `fn(batch, ctx) -> (outputs, counts)` over `size`-row
batches of a Parquet output; `tasks(cfg, todo, fn, ctx)` runs a generator `fn(task, ctx)` per
task (ingest's pieces of a source). Results come back in input order whichever executor ran
them. A map stage (filter) is `batches` plus the `Writer`, which re-chunks every output into
row groups of exactly the stage's batch size, so files are byte-identical whichever executor
ran (Ray's workers see the local batches too: Parts.spans); whole-stage steps call `batches`
for their own per-item work (decontaminate's matching, export's split files) and do the rest
in the driver.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pipeline.parts import Parts, read_schema
from pipeline.runs import StageFailed
from pipeline.stage import Output, resolve

if TYPE_CHECKING:
    from pipeline.config import Config, RunConfig
    from pipeline.runner import StageIO
    from pipeline.stage import Stage

DEFAULT_BATCH = 65_536

# fn(batch, ctx) -> ({output name: table}, {count: number}); pure, so any worker can run it
BatchFn = Callable[[pa.RecordBatch, Any], tuple[dict[str, Any], dict[str, Any]]]
# outputs (Arrow tables; a polars frame a step returned stays one locally), counts, rows in
Result = tuple[dict[str, Any], dict[str, Any], int]


def batches(
    cfg: Config,
    src: Path,
    fn: BatchFn,
    ctx: Any,
    size: int,
    columns: list[str] | None = None,
    threads: int = 1,
) -> Iterator[Result]:
    """fn over `size`-row batches of `src` (only `columns`), in input order, on the
    configured executor (run.executor). Locally, `threads` > 1 runs that many batches at
    once on threads: for steps whose kernels release the GIL (numba, polars), so one batch's
    work overlaps the next one's."""
    if cfg.run.executor == "ray":
        from pipeline.executors.ray import ray_batches

        yield from ray_batches(cfg, src, fn, ctx, size, columns)
        return

    def done(res: tuple[dict[str, Any], dict[str, Any]], rows: int) -> Result:
        return {k: _local(v) for k, v in res[0].items()}, res[1], rows

    reader = Parts(src).iter_batches(size, columns)
    if threads <= 1:
        for batch in reader:
            yield done(fn(batch, ctx), batch.num_rows)
        return
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    pending: deque[tuple[Future[Any], int]] = deque()
    with ThreadPoolExecutor(threads) as pool:
        for batch in reader:
            pending.append((pool.submit(fn, batch, ctx), batch.num_rows))
            if len(pending) >= threads:  # at most `threads` batches held at a time
                f, rows = pending.popleft()
                yield done(f.result(), rows)
        while pending:
            f, rows = pending.popleft()
            yield done(f.result(), rows)


# fn(task, ctx) -> yields (outputs, counts): a generator over one task's pieces of output
TaskFn = Callable[[Any, Any], Iterator[tuple[dict[str, Any], dict[str, Any]]]]


def tasks(
    run: RunConfig, todo: list[Any], fn: TaskFn, ctx: Any
) -> Generator[tuple[dict, dict], None, None]:
    """What fn yields for each task of `todo`, task after task, in order, on the configured
    executor: for work whose input is not a Parquet output (ingest's pieces of a source).
    On Ray each task runs on some worker, as many at once as it has CPUs."""
    if run.executor == "ray":
        from pipeline.executors.ray import ray_tasks

        yield from ray_tasks(run, todo, fn, ctx)
        return
    for task in todo:
        for outs, counts in fn(task, ctx):
            yield {k: _local(v) for k, v in outs.items()}, counts


def _local(b: Any) -> Any:
    """A local map output as the step returned it (a polars frame stays one), batches as
    tables."""
    return pa.Table.from_batches([b]) if isinstance(b, pa.RecordBatch) else b


def as_table(b: Any) -> pa.Table:
    """A map output as an Arrow Table (steps may return RecordBatches or polars frames)."""
    if isinstance(b, pa.RecordBatch):
        return pa.Table.from_batches([b])
    if isinstance(b, pa.Table):
        return b
    table: pa.Table = b.to_arrow()  # a polars DataFrame
    return table


def batch_size(stage: Stage, cfg: Config) -> int:
    return stage.batch_size(cfg) if stage.batch_size else DEFAULT_BATCH


def merge(total: dict[Any, Any], part: dict[Any, Any]) -> None:
    """Sum `part` into `total`: numbers add, dicts merge recursively."""
    for k, v in part.items():
        if isinstance(v, dict):
            merge(total.setdefault(k, {}), v)
        else:
            total[k] = total.get(k, 0) + v


def output_schema(out: Output, in_schema: pa.Schema) -> pa.Schema:
    want = resolve(out.schema) if isinstance(out.schema, str) else out.schema
    if callable(want) and not isinstance(want, pa.Schema):
        want = want(in_schema)
    if want is None:
        raise StageFailed(f"output {out.name}: a map stage must declare its schema")
    return want


class Writer:
    """The outputs of a stage (`schemas`: name -> schema), written through the runner's
    atomic sinks in row groups of exactly `size` rows, however the pieces came; and their
    counts summed."""

    def __init__(self, io: StageIO, schemas: dict[str, pa.Schema], size: int, stack: Any):
        self.size = size
        self.schemas = schemas
        self.sinks = {n: stack.enter_context(io.sink(n, s)) for n, s in self.schemas.items()}
        self.pending: dict[str, list[pa.Table]] = {n: [] for n in self.schemas}
        self.rows = dict.fromkeys(self.schemas, 0)
        self.totals: dict[Any, Any] = {}

    def add(self, outs: dict[str, Any], counts: dict[str, Any]) -> None:
        for name, b in outs.items():
            t = as_table(b)
            self.pending[name].append(t.cast(self.schemas[name]))  # the declared schema
            self.rows[name] += t.num_rows
            while self.rows[name] >= self.size:
                self._write(name, self.size)
        merge(self.totals, counts)

    def _write(self, name: str, n: int) -> None:
        whole = pa.concat_tables(self.pending[name])
        # one chunk per row group: Parquet pages follow chunk boundaries, which vary with
        # how the pieces came
        group = whole.slice(0, n).combine_chunks()
        self.sinks[name].write_table(group, row_group_size=max(n, 1))
        rest = whole.slice(n)
        self.pending[name] = [rest] if rest.num_rows else []
        self.rows[name] = rest.num_rows

    def close(self) -> dict[Any, Any]:
        for name in self.schemas:
            if self.rows[name]:
                self._write(name, self.rows[name])
        return self.totals


def run_map(stage: Stage, cfg: Config, io: StageIO) -> dict[Any, Any]:
    """A map stage (`Stage.map`): its batches through `batches`, outputs through the Writer;
    returns the summed counts."""
    src = io.input(stage.reads[0])
    ctx = resolve(stage.start)(cfg, src) if stage.start else cfg
    fn = resolve(stage.map)  # type: ignore[arg-type]
    size = batch_size(stage, cfg)
    where = " (ray)" if cfg.run.executor == "ray" else ""
    with ExitStack() as stack:
        in_schema = read_schema(src)
        schemas = {
            o.name: output_schema(o, in_schema) for o in stage.writes if o.name.endswith(".parquet")
        }
        out = Writer(io, schemas, size, stack)
        bar = stack.enter_context(io.progress())
        task = bar.add_task(stage.name + where, total=Parts(src).num_rows)
        for outs, counts, rows in batches(cfg, src, fn, ctx, size):
            out.add(outs, counts)
            bar.advance(task, rows)
        return out.close()

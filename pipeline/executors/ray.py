"""The Ray executor: per-batch work as Ray Data tasks (one block each -> `map_batches`).

Ray (`pip install 'editcurate[ray]'`) is started once per process: `ray.init(address=...)`
with `run.ray_address`, or a local instance with `run.num_cpus` CPUs. Every batch's outputs
come back to the driver as Arrow IPC, tagged with their task, are put in input order and
written by the stage exactly as local results are, so the files are byte-identical.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pipeline.errors import EnvError
from pipeline.executors.contract import BatchFn, Result, TaskFn
from pipeline.parts import Parts, Span, as_table, read_span

if TYPE_CHECKING:
    from pipeline.config import Config, RunConfig


def ensure_ray(run: RunConfig) -> Any:
    """The ray module, initialised once (connecting to run.ray_address when given)."""
    try:
        import ray
    except ImportError:
        raise EnvError("run.executor = 'ray' needs Ray: pip install 'editcurate[ray]'") from None
    if not ray.is_initialized():
        address = run.ray_address or None
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is None:
            kw["num_cpus"] = run.num_cpus
        ray.init(address=address, **kw)
    return ray


def _data(run: RunConfig) -> Any:
    """ray.data, Ray started, results kept in input order (preserve_order)."""
    ensure_ray(run)
    import ray.data as rd

    rd.DataContext.get_current().execution_options.preserve_order = True
    return rd


def _ipc(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _table(b: bytes) -> pa.Table:
    return pa.ipc.open_stream(b).read_all()


def _pack(outs: dict[str, Any], counts: dict[str, Any], task: int, end: bool = False) -> pa.Table:
    """One result as a one-row table: output names, their Arrow IPC bytes, counts as JSON,
    its task, and whether it is the task's end mark (no outputs)."""
    return pa.table(
        {
            "__outs": [json.dumps(sorted(outs))],
            # 64-bit offsets: a result's outputs may pass 2 GiB
            "__ipc": pa.array(
                [[_ipc(as_table(outs[n])) for n in sorted(outs)]], pa.list_(pa.large_binary())
            ),
            "__counts": [json.dumps(_jsonable(counts))],
            "__task": [task],
            "__end": [end],
        }
    )


def _unpack(res: pa.Table) -> Iterator[tuple[dict[str, Any], dict[str, Any], int, bool]]:
    for k in range(res.num_rows):
        names = json.loads(res["__outs"][k].as_py())
        blobs = res["__ipc"][k].as_py()
        outs = {n: _table(b) for n, b in zip(names, blobs, strict=True)}
        counts = json.loads(res["__counts"][k].as_py())
        yield outs, counts, res["__task"][k].as_py(), res["__end"][k].as_py()


ROWS = "__rows"  # a batch's rows, passed with its counts (and taken out here)


def ray_batches(
    cfg: Config, src: Path, fn: BatchFn, ctx: Any, size: int, columns: list[str] | None
) -> Iterator[Result]:
    """fn over the `size`-row batches a local run sees, on Ray, yielded in input order: one
    task per span of consecutive batches (Parts.spans), which its worker reads itself (only
    `columns`; a row group decoded at most twice). Not Ray's read_parquet: with a column
    selection, Ray Data 2.60 gave a part's row groups out of order (a 262,144-row part read
    as two blocks, the second first) despite preserve_order, and rows would have been
    numbered wrong."""
    spans = Parts(src).spans(size)
    for outs, counts in ray_tasks(cfg.run, spans, _span_task, (fn, ctx, columns, size)):
        rows = counts.pop(ROWS)
        yield outs, counts, rows


def _span_task(
    span: Span, ctx: tuple[BatchFn, Any, list[str] | None, int]
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    fn, fctx, columns, size = ctx
    for batch in read_span(span, size, columns):
        outs, counts = fn(batch, fctx)
        yield outs, {**counts, ROWS: batch.num_rows}


def ray_tasks(run: RunConfig, todo: list[Any], fn: TaskFn, ctx: Any) -> Iterator[tuple[dict, dict]]:
    """What fn yields for each task, task after task: one task per Ray Data block, so they
    run on as many workers as there are CPUs. Results are tagged with their task and put
    back in order here should Ray return them out of order (preserve_order is asked for, so
    normally nothing waits)."""
    if not todo:  # (Ray refuses a dataset of no blocks)
        return
    rd = _data(run)

    def udf(batch: pa.Table) -> Iterator[pa.Table]:
        for k in batch["task"].to_pylist():
            for outs, counts in fn(todo[k], ctx):
                yield _pack(outs, counts, k)
            yield _pack({}, {}, k, end=True)

    items = rd.from_items([{"task": k} for k in range(len(todo))], override_num_blocks=len(todo))
    ds = items.map_batches(udf, batch_format="pyarrow", batch_size=1)
    tagged = (
        r for res in ds.iter_batches(batch_format="pyarrow", batch_size=None) for r in _unpack(res)
    )
    yield from in_task_order(tagged, len(todo))


def in_task_order(
    tagged: Iterable[tuple[dict[str, Any], dict[str, Any], int, bool]], tasks: int
) -> Iterator[tuple[dict, dict]]:
    """(outputs, counts) of results tagged (outputs, counts, task, end mark), task after
    task, each task's in the order they came; a task's results wait until the tasks before
    it have ended."""
    waiting: dict[int, list[tuple[dict, dict, bool]]] = {}
    nxt = 0  # the task whose results are due
    for outs, counts, k, end in tagged:
        waiting.setdefault(k, []).append((outs, counts, end))
        while nxt in waiting:
            ended = False
            for o, c, e in waiting.pop(nxt):
                if e:
                    ended = True
                else:
                    yield o, c
            if not ended:
                break
            nxt += 1
    if nxt != tasks:
        raise RuntimeError(f"Ray returned the results of {nxt} of {tasks} tasks")


def _jsonable(counts: Any) -> Any:
    if isinstance(counts, dict):
        return {str(k): _jsonable(v) for k, v in counts.items()}
    return counts

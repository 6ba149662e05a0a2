"""The Ray executor: per-batch work over Ray Data (`read_parquet` -> `map_batches`).

Ray (`pip install 'editcurate[ray]'`) is started once per process: `ray.init(address=...)`
with `run.ray_address`, or a local instance with `run.num_cpus` CPUs. Every batch's outputs
come back to the driver in input order (preserve_order) as Arrow IPC and are written by the
stage exactly as local results are, so the files are byte-identical.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pipeline.errors import EnvError
from pipeline.executors import BatchFn, Result, TaskFn, as_table

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


def _pack(outs: dict[str, Any], counts: dict[str, Any], rows: int) -> pa.Table:
    """One result as a one-row table: output names, their Arrow IPC bytes, counts as JSON."""
    return pa.table(
        {
            "__outs": [json.dumps(sorted(outs))],
            # 64-bit offsets: a result's outputs may pass 2 GiB
            "__ipc": pa.array(
                [[_ipc(as_table(outs[n])) for n in sorted(outs)]], pa.list_(pa.large_binary())
            ),
            "__counts": [json.dumps(_jsonable(counts))],
            "__rows": [rows],
        }
    )


def _unpack(res: pa.Table) -> Iterator[Result]:
    for k in range(res.num_rows):
        names = json.loads(res["__outs"][k].as_py())
        blobs = res["__ipc"][k].as_py()
        outs = {n: _table(b) for n, b in zip(names, blobs, strict=True)}
        yield outs, json.loads(res["__counts"][k].as_py()), res["__rows"][k].as_py()


def _results(ds: Any) -> Iterator[Result]:
    for res in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        assert isinstance(res, pa.Table)
        yield from _unpack(res)


def ray_batches(
    cfg: Config, src: Path, fn: BatchFn, ctx: Any, size: int, columns: list[str] | None
) -> Iterator[Result]:
    """fn over `size`-row batches of src on Ray Data, yielded in input order (preserve_order):
    each worker returns its outputs as Arrow IPC bytes and its counts as JSON."""
    rd = _data(cfg.run)

    def udf(batch: pa.Table) -> pa.Table:
        outs, counts = fn(
            batch.combine_chunks().to_batches()[0]
            if batch.num_rows
            else pa.RecordBatch.from_pylist([], schema=batch.schema),
            ctx,
        )
        return _pack(outs, counts, batch.num_rows)

    # Ray lists a folder's files sorted (zero-padded part names: row order) and skips hidden
    # ones. One path, not a list: Ray resolves a list's paths on threads, and with fsspec
    # but no aiohttp two threads importing fsspec's http module at once fail.
    ds = rd.read_parquet(str(src))
    if columns is not None:  # projected at read (Ray pushes the selection down)
        ds = ds.select_columns(columns)
    ds = ds.map_batches(udf, batch_format="pyarrow", batch_size=size, zero_copy_batch=True)
    yield from _results(ds)


def ray_tasks(run: RunConfig, todo: list[Any], fn: TaskFn, ctx: Any) -> Iterator[tuple[dict, dict]]:
    """What fn yields for each task, task after task: one task per Ray Data block, so
    they run on as many workers as there are CPUs, and come back in order (preserve_order)."""
    rd = _data(run)

    def udf(batch: pa.Table) -> Iterator[pa.Table]:
        for k in batch["task"].to_pylist():
            for outs, counts in fn(todo[k], ctx):
                yield _pack(outs, counts, 0)

    items = rd.from_items([{"task": k} for k in range(len(todo))], override_num_blocks=len(todo))
    for outs, counts, _ in _results(items.map_batches(udf, batch_format="pyarrow", batch_size=1)):
        yield outs, counts


def _jsonable(counts: Any) -> Any:
    if isinstance(counts, dict):
        return {str(k): _jsonable(v) for k, v in counts.items()}
    return counts

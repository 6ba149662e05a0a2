"""The Ray executor: a map stage's `map` over Ray Data (`read_parquet` -> `map_batches`).

Ray (`pip install 'editcurate[ray]'`) is started once per process: `ray.init(address=...)`
with `run.ray_address`, or a local instance with `run.num_cpus` CPUs. Every batch's outputs
come back to the driver in input order (preserve_order) as Arrow IPC, and go through the same
Writer as the local executor, so the files are byte-identical. Whole-stage steps (dedup's
banding and clustering, shapes' grouping, export's splits) run in the driver.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import EnvError
from pipeline.executors import Writer, batch_size
from pipeline.stage import resolve

if TYPE_CHECKING:
    from pipeline.config import Config
    from pipeline.runner import StageIO
    from pipeline.stage import Stage


def ensure_ray(cfg: Config) -> Any:
    """The ray module, initialised once (connecting to run.ray_address when given)."""
    try:
        import ray
    except ImportError:
        raise EnvError("run.executor = 'ray' needs Ray: pip install 'editcurate[ray]'") from None
    if not ray.is_initialized():
        address = cfg.run.ray_address or None
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is None:
            kw["num_cpus"] = cfg.run.num_cpus
        ray.init(address=address, **kw)
    return ray


def _ipc(t: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _table(b: bytes) -> pa.Table:
    return pa.ipc.open_stream(b).read_all()


def run_map(stage: Stage, cfg: Config, io: StageIO) -> dict[Any, Any]:
    ensure_ray(cfg)
    import ray.data as rd

    rd.DataContext.get_current().execution_options.preserve_order = True
    ctx = resolve(stage.start)(cfg) if stage.start else cfg
    fn = resolve(stage.map)  # type: ignore[arg-type]
    src = io.input(stage.reads[0])
    size = batch_size(stage, cfg)
    names = [o.name for o in stage.writes if o.name.endswith(".parquet")]

    def udf(batch: pa.Table) -> pa.Table:
        outs, counts = fn(
            batch.combine_chunks().to_batches()[0]
            if batch.num_rows
            else pa.RecordBatch.from_pylist([], schema=batch.schema),
            ctx,
        )
        row: dict[str, list[Any]] = {
            n: [_ipc(_as_table(outs[n]))] if n in outs else [b""] for n in names
        }
        row["__counts"] = [json.dumps(_jsonable(counts))]
        row["__rows"] = [batch.num_rows]
        return pa.table(row)

    ds = rd.read_parquet(str(src)).map_batches(
        udf, batch_format="pyarrow", batch_size=size, zero_copy_batch=True
    )
    with ExitStack() as stack:
        out = Writer(stage, io, pq.read_schema(src), size, stack)
        bar = stack.enter_context(io.progress())
        task = bar.add_task(f"{stage.name} (ray)", total=pq.ParquetFile(src).metadata.num_rows)
        for res in ds.iter_batches(batch_format="pyarrow", batch_size=None):
            assert isinstance(res, pa.Table)
            for k in range(res.num_rows):
                outs = {n: _table(res[n][k].as_py()) for n in names if res[n][k].as_py()}
                counts = json.loads(res["__counts"][k].as_py())
                out.add(outs, counts)
                bar.advance(task, res["__rows"][k].as_py())
        return out.close()


def _as_table(b: Any) -> pa.Table:
    return pa.Table.from_batches([b]) if isinstance(b, pa.RecordBatch) else b


def _jsonable(counts: Any) -> Any:
    if isinstance(counts, dict):
        return {str(k): _jsonable(v) for k, v in counts.items()}
    return counts

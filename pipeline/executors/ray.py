"""The Ray executor: per-batch work as Ray tasks.

Ray (`pip install 'editcurate[ray]'`) is started once per process: `ray.init(address=...)`
with `run.ray_address`, or a local instance with `run.num_cpus` CPUs.

Every task is a Ray streaming generator (`_streams`): its results are objects the driver
owns, made one at a time, read in task order, a bounded number ahead. Outputs a stage
writes (a map stage's, ingest's) never pass through the driver: each task (`_produce`)
yields only counts and row counts to read, its tables left in Ray's object store (`Held`);
`RayParts`, the stage's writer, cuts the rows into the output's parts and has a worker write
each part (`_write_part`) in the row groups a local run writes, so the files are
byte-identical. Whole-stage steps write their rows the same way (decontaminate's, shapes',
export's), and rows put in another order go through a shuffle of tasks (`ray_reordered`:
dedup's, spread's), and work whole within a key's range through a shuffle of tasks over
the tables the workers keep (`ray_by_range`: shapes' groups). Results a stage uses itself
(`batches` for dedup's per-item work) come to the driver as Arrow tables (`_results`). A stage's
manifest counts Ray's CPU time with the driver's (`worker_cpu_s`: a local instance's
processes as the OS counts them; on a cluster, what each task reports its worker spent on
it).
"""

from __future__ import annotations

import copy
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline import storage
from pipeline.errors import EnvError
from pipeline.executors.contract import BatchFn, KeyRangeFn, PartFn, RangeFn, Result, TaskFn
from pipeline.executors.side import Side, arrays, joined
from pipeline.parts import (
    ROW,
    Parts,
    PartSink,
    PartWriter,
    Span,
    as_table,
    open_parquet,
    part_name,
    read_span,
    scan_output,
    with_rows,
)
from pipeline.reorder import SLOT, in_slot_order, ranges
from pipeline.storage import Location

if TYPE_CHECKING:
    from pipeline.config import Config, RunConfig


# Every task holds one CPU (spread), so a worker's thread pools get one thread each: by
# default polars, numba and Arrow each start one per core of the machine, in every worker.
WORKER_THREADS = {
    "POLARS_MAX_THREADS": "1",
    "NUMBA_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "RAYON_NUM_THREADS": "1",
}


def ensure_ray(run: RunConfig) -> Any:
    """The ray module, initialised once (connecting to run.ray_address when given)."""
    try:
        import ray
    except ImportError:
        raise EnvError("run.executor = 'ray' needs Ray: pip install 'editcurate[ray]'") from None
    if not ray.is_initialized():
        address = run.ray_address or None
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        kw["runtime_env"] = {"env_vars": WORKER_THREADS}
        if address is None:
            kw["num_cpus"] = run.num_cpus
        before = _children()
        ray.init(address=address, **kw)
        if address is None:  # a local instance: its processes are this one's children
            _local[:] = [TreeCPU(sorted(_children() - before))]
    return ray


def _children() -> set[int]:
    import psutil

    return {p.pid for p in psutil.Process().children()}


class TreeCPU:
    """CPU seconds (user + system) of the processes `pids` and all their descendants, those
    that have ended included: Ray's raylet does not wait for the workers it stops, so the OS
    keeps no record of theirs. A thread samples the tree every `every` seconds and keeps
    each process's last reading (a process that ends loses at most that long of CPU)."""

    def __init__(self, pids: list[int], every: float = 0.5):
        import threading

        self.pids = pids
        self.seen: dict[tuple[int, float], float] = {}
        self.lock = threading.Lock()
        self.every = every
        self.sample()
        threading.Thread(target=self._loop, name="ray-cpu", daemon=True).start()

    def _loop(self) -> None:  # for the life of the process, as the Ray instance's
        while True:
            time.sleep(self.every)
            self.sample()

    def sample(self) -> float:
        """Read the tree now; the total so far."""
        import psutil

        readings = {}
        for pid in self.pids:
            try:
                root = psutil.Process(pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            for p in procs:
                try:
                    with p.oneshot():
                        t = p.cpu_times()
                        readings[(p.pid, p.create_time())] = t.user + t.system
                except psutil.Error:  # ended since it was listed
                    continue
        with self.lock:  # the sampling thread's reading may be older than this one
            for k, v in readings.items():
                self.seen[k] = max(v, self.seen.get(k, 0.0))
            return sum(self.seen.values())


ROWS = "__rows"  # a batch's rows, passed with its counts (and taken out here)
END = "__end"  # the last thing a task yields: its CPU time and node
BACKLOG = 48  # objects a task yields ahead of the driver's reading (a result: 1 + outputs)
_worker_cpu = [0.0]  # CPU seconds the workers reported for this process's tasks
_nodes: Counter[str] = Counter()  # tasks run per Ray node, for this process


def worker_nodes() -> dict[str, int]:
    """Tasks run so far for this process per Ray node (its id)."""
    return dict(_nodes)


def _node() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


_local: list[TreeCPU] = []  # the processes of the local instance ray.init started here


def worker_cpu_s() -> float:
    """CPU seconds Ray has spent for this process so far. A local instance this process
    started: every process of it (the workers, whatever they ran, their start-up and
    imports, the raylet, the GCS, Ray Data's actors), as the OS counts them. Joining a
    cluster: what the workers reported for this process's tasks (user + system of each
    worker process while it ran one of them), which leaves out the cluster's own daemons."""
    return _local[0].sample() if _local else _worker_cpu[0]


def ray_batches(
    cfg: Config,
    src: Location,
    fn: BatchFn,
    ctx: Any,
    size: int,
    columns: list[str] | None,
    held: dict[str, pa.Schema] | None = None,
    numbered: bool = False,
    side: Side | None = None,
) -> Iterator[Result]:
    """fn over the `size`-row batches a local run sees, on Ray, yielded in input order: one
    task per span of consecutive batches (Parts.spans), which its worker reads itself (only
    `columns`; a row group decoded at most twice). Not Ray's read_parquet: with a column
    selection, Ray Data 2.60 gave a part's row groups out of order (a 262,144-row part read
    as two blocks, the second first) despite preserve_order, and rows would have been
    numbered wrong. With `held` (the outputs' schemas), outputs stay with the workers
    (`Held`, for RayParts). With `side`, its tables are cut by span (a task each, as they
    lie) and each span's task joins its pieces (side.py): they never reach the driver."""
    spans = Parts(src).spans(size)
    todo: list[tuple[Span, list[Any]]] = [(span, []) for span in spans]
    if side is not None and spans:
        ray = ensure_ray(cfg.run)
        firsts = np.array([s.first for s in spans], np.int64)
        cut = spread(ray, _cut_side, num_returns=len(spans) + 1)
        held_side = [_held(ray, p) for p in side.pieces]
        cuts = [cut.remote(firsts, h.start, h.rows, h.ref) for h in held_side]
        for c in cuts:  # the cutting tasks' CPU and node
            _count(_get(ray, c[-1]))
        todo = [(span, [c[i] for c in cuts]) for i, span in enumerate(spans)]
        del cuts
    job = (fn, ctx, columns, size, numbered, side.schema if side is not None else None)
    results = (
        ray_held(cfg.run, todo, _span_task, job, held)
        if held is not None
        else ray_tasks(cfg.run, todo, _span_task, job)
    )
    for outs, counts in results:
        rows = counts.pop(ROWS)
        yield outs, counts, rows


def _span_task(
    task: tuple[Span, list[Any]],
    ctx: tuple[BatchFn, Any, list[str] | None, int, bool, pa.Schema | None],
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """A span's batches (with their side columns: the span's pieces of them, as refs)."""
    fn, fctx, columns, size, numbered, side = ctx
    span, refs = task
    reader = read_span(span, size, columns)
    if numbered:
        reader = with_rows(reader, span.first)
    if side is not None:
        import ray

        laid = arrays(ray.get(refs), span.first, span.rows, side)
        reader = joined(reader, span.first, laid, side)
    for batch in reader:
        outs, counts = fn(batch, fctx)
        yield outs, {**counts, ROWS: batch.num_rows}


def _cut_side(firsts: np.ndarray, start: int, rows: int, t: pa.Table) -> list[Any]:
    """Rows [start, start + rows) of a side table cut by span (`firsts`: each span's first
    row), rows in order; last, the task's CPU time and node."""
    t0 = time.process_time()
    t = t.slice(start, rows)
    span = np.searchsorted(firsts, t[ROW].to_numpy(), side="right") - 1
    return [*_cut_by(t, span, len(firsts)), _spent(t0)]


def ray_tasks(run: RunConfig, todo: list[Any], fn: TaskFn, ctx: Any) -> Iterator[tuple[dict, dict]]:
    """What fn yields for each task, task after task, each result's outputs as Arrow tables
    (for work whose results the stage uses itself: dedup's per-item work)."""
    for got, _ in _read(run, _results, todo, (fn, ctx)):
        outs, counts = got
        del got  # the object freed: what the stage keeps is its own copy
        yield {n: _own(t) for n, t in outs.items()}, counts


def _own(t: pa.Table) -> pa.Table:
    """A table copied out of Ray's object store: a zero-copy view would keep the whole
    object (every output of the result) in the store, and mapped into this process, for
    as long as the stage keeps any of it."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    return pa.ipc.open_stream(sink.getvalue()).read_all()


def _results(task: Any, job: tuple[TaskFn, Any]) -> Iterator[Any]:
    """One task on a worker, as a streaming generator: each result (outputs as Arrow tables,
    counts) as it is made; last, END with the worker's CPU time."""
    fn, ctx = job
    t0 = time.process_time()
    for outs, counts in fn(task, ctx):
        yield {n: as_table(b) for n, b in outs.items()}, counts
    yield {END: True, **_spent(t0)}


def _streams(
    ray: Any, work: Callable[..., Iterator[Any]], todo: list[Any], job: Any
) -> Iterator[Any]:
    """A streaming-generator task of `work` per task of `todo`, given back in order: each
    is to be read to its END before the next is asked for. At most two tasks per CPU are in
    flight, and each stops after BACKLOG unread objects, so the object store holds a bounded
    amount whatever the tasks' size; tasks not yet read when the caller stops (an unreadable
    piece, a failure) are cancelled."""
    remote = spread(ray, work, num_returns="streaming", _generator_backpressure_num_objects=BACKLOG)
    shared = ray.put(job)
    pending: deque[Any] = deque()
    tasks = iter(todo)
    window = _window(ray)
    try:
        for task in tasks:
            pending.append(remote.remote(task, shared))
            if len(pending) >= window:
                break
        while pending:
            yield pending[0]
            pending.popleft()
            nxt = next(tasks, None)
            if nxt is not None:
                pending.append(remote.remote(nxt, shared))
    finally:
        for gen in pending:
            ray.cancel(gen)


def _read(
    run: RunConfig, work: Callable[..., Iterator[Any]], todo: list[Any], job: Any
) -> Iterator[tuple[Any, Any]]:
    """What the tasks of `work` yield (_streams), task after task: each object and its
    task's generator (to read the objects that follow it); each task's END counted (its
    worker's CPU time and node), not given. No task: Ray is not started."""
    if not todo:
        return
    ray = ensure_ray(run)
    for gen in _streams(ray, work, todo, job):
        for ref in gen:
            got = _get(ray, ref)
            if isinstance(got, dict) and got.get(END):
                _count(got)
                break
            yield got, gen


# --------------------------------------------------------- outputs written by the workers


@dataclass(frozen=True)
class Held:
    """Rows [start, start + rows) of one output's table that a task made, left in Ray's
    object store (`ref`: that table alone)."""

    ref: Any
    name: str
    start: int
    rows: int

    def head(self, n: int) -> Held:
        return Held(self.ref, self.name, self.start, n)

    def tail(self, n: int) -> Held:
        """All but the first n rows."""
        return Held(self.ref, self.name, self.start + n, self.rows - n)


def _produce(task: Any, job: tuple[TaskFn, Any, dict[str, pa.Schema]]) -> Iterator[Any]:
    """One task on a worker, as a streaming generator (every object it yields is the
    driver's, streamed as made, so a task holds one result at a time whatever its size):
    per result, its counts and the outputs holding rows (a dict), then each such output's
    table, cast to the declared schema as the local Writer casts it (one with none declared
    as it is), one object each (an output's rows are freed with its own parts); last, END
    with the worker's CPU time."""
    fn, ctx, schemas = job
    t0 = time.process_time()
    for outs, counts in fn(task, ctx):
        tables = {n: _cast(as_table(b), schemas.get(n)) for n, b in outs.items()}
        rows = {n: t.num_rows for n, t in sorted(tables.items()) if t.num_rows}
        yield {"counts": counts, "rows": rows}
        for n in rows:
            yield tables[n]
    yield {END: True, **_spent(t0)}


def _cast(t: pa.Table, schema: pa.Schema | None) -> pa.Table:
    return t if schema is None else t.cast(schema)


def spread(ray: Any, fn: Callable[..., Any], **options: Any) -> Any:
    """`fn` as a Ray task of one CPU, spread over the cluster's nodes: the pipeline's tasks
    are data-parallel, and Ray's default placement keeps short tasks on the driver's node
    while it has a free CPU, leaving other nodes idle."""
    return ray.remote(num_cpus=1, scheduling_strategy="SPREAD", **options)(fn)


def here(ray: Any, fn: Callable[..., Any], **options: Any) -> Any:
    """`fn` as a Ray task on this process's node: work on files only this machine has (a
    stage's working folder, on its local disk), whose data go between them and the object
    store, where tasks on any node read them, without passing through this process.

    It holds no CPU: the driver's node may offer none to tasks (a head started with
    `ray start --head --num-cpus=0`, as large clusters are), and a task needing one would
    never run. So that they do not start a worker each, the callers run such tasks one
    after another (`in_turn`)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    strategy = NodeAffinitySchedulingStrategy(node, soft=False)
    return ray.remote(num_cpus=0, scheduling_strategy=strategy, **options)(fn)


def in_turn(task: Any, calls: Iterable[tuple[Any, ...]]) -> Iterator[Any]:
    """task.remote(*args, after) for each args of `calls`, each call given the previous
    one's last return (a small one: its CPU time and node, see _spent), so that each runs
    after the one before: one worker does them all, in order. Yields each call's refs."""
    after = None
    for args in calls:
        refs = task.remote(*args, after)
        after = refs[-1]
        yield refs


def ray_call(run: RunConfig, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) as one task on some worker (executors.elsewhere), its result back."""
    ray = ensure_ray(run)
    return _get(ray, spread(ray, fn).remote(*args))


def _window(ray: Any) -> int:
    """Tasks in flight at once: two per CPU of the cluster, so workers never wait on the
    driver and the object store holds a bounded number of tasks' outputs."""
    return max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))


def _get(ray: Any, ref: Any) -> Any:
    """ray.get, a task's exception raised as itself: the cause, not Ray's wrapper (whose
    text is the worker's traceback), so a StageFailed is still one line."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        raise (cause if isinstance(cause, BaseException) else e) from None


def ray_held(
    run: RunConfig, todo: list[Any], fn: TaskFn, ctx: Any, schemas: dict[str, pa.Schema]
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """What fn yields for each task, task after task, as `ray_tasks` gives it, except that
    outputs stay with the workers: each output a `Held` (RayParts writes them)."""
    for meta, gen in _read(run, _produce, todo, (fn, ctx, schemas)):
        outs = {n: Held(next(gen), n, 0, r) for n, r in meta["rows"].items()}
        yield outs, meta["counts"]


def _write_part(
    spec: tuple[Location | str, pa.Schema, dict[str, Any], int | None, int, list[int]],
    pieces: list[tuple[str, int, int]],
    *tables: pa.Table,
) -> tuple[dict[str, Any], str]:
    """Part file `path` from the pieces' rows, in row groups cut where a local run cuts
    them (at every `size` rows of the whole output from the last row where the grid
    restarted, `origins`, and at each origin; this part's first row is `first`), each one
    chunk (parts.Writer); `size` None: each piece's rows as they came (parts.Writer too).
    What the task spent (_spent) and the part's sha256."""
    t0 = time.process_time()
    path, schema, opts, size, first, origins = spec
    rows = [t.slice(start, n) for (_, start, n), t in zip(pieces, tables, strict=True)]
    if size is None:
        with PartWriter(path, schema, **opts) as w:
            for piece in rows:
                w.write_table(piece)
        return _spent(t0), w.sha256
    whole = pa.concat_tables(rows)
    with PartWriter(path, schema, **opts) as w:
        at = 0
        while at < whole.num_rows:
            row = first + at
            i = int(np.searchsorted(origins, row, side="right"))  # origins[i - 1] <= row
            o, nxt = origins[i - 1], origins[i] if i < len(origins) else first + whole.num_rows
            end = min(whole.num_rows, o + ((row - o) // size + 1) * size - first, nxt - first)
            group = whole.slice(at, end - at).combine_chunks()
            w.write_table(group, row_group_size=max(group.num_rows, 1))
            at = end
    return _spent(t0), w.sha256


class RayParts:
    """parts.Writer's work on Ray: outputs (`Held` rows, or tables the driver made, which
    are put in the object store) are cut into parts of run.part_rows rows, each written by
    a worker into the sink's temp folder; `close` waits for them, and the sinks rename the
    folders into place as for a local run."""

    def __init__(
        self,
        run: RunConfig,
        sink: Callable[[str, pa.Schema], Any],
        schemas: dict[str, pa.Schema],
        size: int | None,
        stack: Any,
    ):
        self.ray = ensure_ray(run)
        self.write = spread(self.ray, _write_part)
        self.size = size
        self.schemas = schemas
        self.sinks: dict[str, PartSink] = {
            n: stack.enter_context(sink(n, s)) for n, s in schemas.items()
        }
        self.queue: dict[str, deque[Held]] = {n: deque() for n in schemas}
        self.queued = dict.fromkeys(schemas, 0)
        self.origins: dict[str, list[int]] = {n: [0] for n in schemas}  # see restart
        self.jobs: deque[tuple[Any, PartSink, str]] = deque()  # a write, its sink and part
        self.window = _window(self.ray)
        # on a failure, before the sinks drop their temp folders: no write still running
        # that could leave a file there, or write one into a later attempt's
        stack.callback(self._drain)

    def _drain(self) -> None:
        if self.jobs:
            self.ray.wait([j[0] for j in self.jobs], num_returns=len(self.jobs))
            self.jobs.clear()

    def add(self, outs: dict[str, Any]) -> None:
        for name, b in outs.items():
            if not isinstance(b, Held):  # made in the driver (ingest's record of an empty file)
                t = as_table(b).cast(self.schemas[name])
                b = Held(self.ray.put(t), name, 0, t.num_rows)
            if not b.rows:
                continue
            self.queue[name].append(b)
            self.queued[name] += b.rows
            part = self.sinks[name].part_rows
            while self.queued[name] >= part:
                self._part(name, part)

    def restart(self, name: str) -> None:
        """parts.Writer.restart: the row-group grid of `name` starts again at the next row."""
        sink = self.sinks[name]
        added = sink.k * sink.part_rows + self.queued[name]  # parts cut so far are whole
        if self.origins[name][-1] != added:
            self.origins[name].append(added)

    def _part(self, name: str, rows: int) -> None:
        """The next part of output `name`: the first `rows` rows queued."""
        sink, queue = self.sinks[name], self.queue[name]
        pieces: list[Held] = []
        left = rows
        while left:
            h = queue.popleft()
            if h.rows > left:
                queue.appendleft(h.tail(left))
                h = h.head(left)
            pieces.append(h)
            left -= h.rows
        path = sink.tmp / part_name(sink.k)
        spec = (
            path if storage.is_remote(path) else str(path.absolute()),  # workers' cwd may differ
            sink.schema,
            sink.opts,
            self.size,
            sink.k * sink.part_rows,
            self.origins[name],
        )
        where = [(h.name, h.start, h.rows) for h in pieces]
        job = self.write.remote(spec, where, *[h.ref for h in pieces])
        self.jobs.append((job, sink, part_name(sink.k)))
        sink.k += 1
        self.queued[name] -= rows
        while len(self.jobs) > self.window:
            self._done(self.jobs.popleft())

    def _done(self, job: tuple[Any, PartSink, str]) -> None:
        ref, sink, name = job
        spent, sink.sha256[name] = _get(self.ray, ref)
        _count(spent)

    def close(self) -> None:
        for name in self.schemas:
            if self.queued[name]:
                self._part(name, self.queued[name])
        while self.jobs:
            self._done(self.jobs.popleft())
        for sink in self.sinks.values():
            if storage.is_remote(sink.tmp):
                sink.tmp.fs.invalidate_cache(sink.tmp.path)  # listed before the workers wrote
            missing = [k for k in range(sink.k) if not (sink.tmp / part_name(k)).is_file()]
            if missing:  # written on a node whose disk this one does not see
                raise EnvError(
                    f"{sink.dest}: {len(missing)} of the {sink.k} parts Ray's workers wrote are "
                    f"not in {sink.tmp} as this process sees it; the run folder must be on a "
                    "disk every node mounts (run.root)"
                )


# ------------------------------------------------------------- partitioned by a key's hash

ROWS_PER_CUT = 1 << 19  # rows one task holds as a frame, as the corpus grows
ROWS_PER_READ = 1 << 18  # rows of row groups one reading task cuts
# by_range: rows a cut piece holds at least, so that it is not under Ray's 100 KiB inline
# limit (a smaller return is kept in the driver's memory); 2^13 rows of two key words: 128 KiB
PIECE_ROWS = 1 << 13


def ray_partitioned(
    run: RunConfig, src: Location, key: str, columns: list[str], fn: PartFn, ctx: Any
) -> list[Any]:
    """executors.partitioned on Ray: a shuffle of plain tasks, as dedup's band shuffle
    (dedup/ray_bands.py). A task per run of row groups reads them (only `columns`) and cuts
    the rows by a hash of `key` into one piece per partition (`_cut`); a task per partition
    joins its pieces in reading order and runs fn on them (`_gather`). The rows never pass
    through the driver; its memory holds the results (and, for an output of at most one
    partition's rows, those rows: no shuffle costs less). Every partition's result is made
    whatever its size: a key that holds most rows makes one big partition."""
    parts = Parts(src)
    if parts.num_rows <= ROWS_PER_CUT:  # one partition's worth: held here, as a task would
        return [fn(scan_output(src).select(columns), ctx)]
    ray = ensure_ray(run)
    cuts = partitions(ray, parts.num_rows)
    cut = spread(ray, _cut, num_returns=cuts + 1)
    gather = spread(ray, _gather, num_returns=2)
    pieces = [cut.remote(r, columns, key, cuts) for r, _ in _reads(parts)]
    for p in pieces:  # the cutting tasks' CPU and node
        _count(_get(ray, p[-1]))
    outs = [gather.remote(fn, ctx, *[p[k] for p in pieces]) for k in range(cuts)]
    del pieces
    results = []
    for res, spent in outs:
        results.append(_get(ray, res))
        _count(_get(ray, spent))
    return results


def partitions(ray: Any, rows: int) -> int:
    """A shuffle's partitions: one per ROWS_PER_CUT rows, at least one per CPU."""
    return max(int(ray.cluster_resources().get("CPU", 1)), 1, -(-rows // ROWS_PER_CUT))


def _reads(parts: Parts) -> list[tuple[list[tuple[Location | str, int]], int]]:
    """The output's row groups in runs of about ROWS_PER_READ rows, each with its first row."""
    reads: list[tuple[list[tuple[Location | str, int]], int]] = []
    rows = at = 0
    for path, g, n in parts.row_groups():
        if not reads or rows + n > ROWS_PER_READ:
            reads.append(([], at))
            rows = 0
        reads[-1][0].append((path, g))
        rows += n
        at += n
    return reads


def ray_reordered(
    run: RunConfig,
    src: Location,
    slots: np.ndarray,
    size: int,
    fn: RangeFn,
    ctx: Any,
    schemas: dict[str, pa.Schema],
) -> Iterator[dict[str, Held]]:
    """executors.reordered on Ray: a shuffle of plain tasks, as ray_partitioned's, cut by
    slot range instead of a hash. The ranges are dealt in order into as many groups as
    ray_partitioned has partitions (one per ROWS_PER_CUT rows, at least one per CPU), so a
    read's piece for a group is not a few rows whatever the number of ranges. A task per
    run of row groups reads them whole and cuts the rows, with their slots, by group
    (`_cut_ranges`); a task per group joins its pieces, sorts them (reorder.in_slot_order,
    as locally) and runs fn on each of its ranges (`_gather_ranges`). fn's outputs, cast to
    their schemas, stay in the object store as `Held` rows for RayParts: the rows never pass
    through the driver, which holds the slots (put once) and the refs. Groups are gathered
    in order, two per CPU ahead of the one being written."""
    ks = ranges(slots, size)
    if not len(ks):
        return
    ray = ensure_ray(run)
    names = list(schemas)
    groups = min(len(ks), partitions(ray, len(slots)))
    bounds = np.linspace(0, len(ks), groups + 1).astype(np.int64)  # group g: ks[b[g]:b[g+1]]
    group_of = np.repeat(np.arange(groups), np.diff(bounds))  # per range
    cut = spread(ray, _cut_ranges, num_returns=groups + 1)
    gather = spread(ray, _gather_ranges)
    shared_slots, shared_ctx = ray.put(slots), ray.put(ctx)
    reads = _reads(Parts(src))
    pieces = [cut.remote(g, first, shared_slots, ks, size, group_of) for g, first in reads]
    for p in pieces:  # the cutting tasks' CPU and node
        _count(_get(ray, p[-1]))

    def submit(g: int) -> Any:
        mine = [p[g] for p in pieces]
        for p in pieces:
            p[g] = None  # freed once its group is gathered
        todo = [int(k) for k in ks[bounds[g] : bounds[g + 1]]]
        task = gather.options(num_returns=1 + len(todo) * len(names))
        return task.remote(fn, shared_ctx, todo, size, schemas, *mine)

    for refs in _in_window(ray, groups, submit):
        meta = _get(ray, refs[0])
        _count(meta)
        for i, rows in enumerate(meta["rows"]):  # per range, per output
            yield {
                n: Held(refs[1 + i * len(names) + j], n, 0, rows[n])
                for j, n in enumerate(names)
                if rows[n]
            }


def ray_by_range(
    run: RunConfig,
    pieces: list[Any],
    key: str,
    columns: list[str],
    count: int,
    fn: KeyRangeFn,
    ctx: Any,
    schemas: dict[str, pa.Schema],
) -> Iterator[tuple[Any, dict[str, Held]]]:
    """executors.by_range on Ray: a shuffle of plain tasks, as ray_partitioned's, over tables left
    in the object store (`Held` rows; a table the driver made is put there). A task per run of about
    ROWS_PER_READ rows of pieces (more with many ranges: at least PIECE_ROWS a range, so no piece is
    small enough for Ray to keep it in the driver) cuts them (only `columns`) by key range
    (`_cut_held`); a task per range joins its pieces in order and runs fn (`_gather_range`). Its
    result comes to the driver (a copy: nothing of it stays mapped from the object store); its
    outputs, cast to their schemas, stay there as `Held` rows for RayParts. Ranges are gathered in
    order, two per CPU ahead of the one read."""
    ray = ensure_ray(run)
    held = [_held(ray, p) for p in pieces]
    names = list(schemas)
    cut = spread(ray, _cut_held, num_returns=count + 1)
    gather = spread(ray, _gather_range, num_returns=2 + len(names))
    cuts = []
    for run_ in _held_reads(held, max(ROWS_PER_READ, count * PIECE_ROWS)):
        where = [(h.start, h.rows) for h in run_]
        cuts.append(cut.remote(columns, key, count, where, *[h.ref for h in run_]))
    for c in cuts:  # the cutting tasks' CPU and node
        _count(_get(ray, c[-1]))
    shared = ray.put(ctx)

    def submit(p: int) -> Any:
        mine = [c[p] for c in cuts]
        for c in cuts:
            c[p] = None  # freed once its range is gathered
        return gather.remote(fn, shared, p, schemas, *mine)

    for refs in _in_window(ray, count, submit):
        meta = _get(ray, refs[0])
        _count(meta)
        result = copy.deepcopy(_get(ray, refs[1]))  # numpy arrays come as views of the store
        rows = meta["rows"]
        yield result, {n: Held(refs[2 + j], n, 0, rows[n]) for j, n in enumerate(names) if rows[n]}


def _in_window(ray: Any, n: int, submit: Callable[[int], Any]) -> Iterator[Any]:
    """submit(i) for i in 0..n-1, given back in order, two per CPU in flight ahead of the
    one given back (the next is submitted once the caller is done with it): a shuffle's
    gathering tasks, whose outputs the object store holds a bounded number of at a time."""
    pending = deque(submit(i) for i in range(min(_window(ray), n)))
    nxt = len(pending)
    while pending:
        yield pending.popleft()
        if nxt < n:
            pending.append(submit(nxt))
            nxt += 1


def _held(ray: Any, t: Any) -> Held:
    """A piece as Held rows: one the workers hold as it is, a table the driver made put in
    the object store."""
    if isinstance(t, Held):
        return t
    table = as_table(t)
    return Held(ray.put(table), "", 0, table.num_rows)


def _held_reads(held: list[Held], per_read: int) -> list[list[Held]]:
    """Held pieces in runs of about `per_read` rows, in order (at least one run)."""
    reads: list[list[Held]] = [[]]
    rows = 0
    for h in held:
        if reads[-1] and rows + h.rows > per_read:
            reads.append([])
            rows = 0
        reads[-1].append(h)
        rows += h.rows
    return reads


def _cut_held(
    columns: list[str], key: str, count: int, where: list[tuple[int, int]], *tables: pa.Table
) -> list[Any]:
    """Pieces' rows ((start, rows) of each table; only `columns`) cut into `count` tables by
    range of the uint64 `key`, rows in order; last, the task's CPU time and node."""
    t0 = time.process_time()
    rows = [t.slice(s, n).select(columns) for (s, n), t in zip(where, tables, strict=True)]
    t = pa.concat_tables(rows)
    k = t[key].to_numpy().astype(np.uint64)
    part = (((k >> np.uint64(32)) * np.uint64(count)) >> np.uint64(32)).astype(np.int64)
    return [*_cut_by(t, part, count), _spent(t0)]


def _gather_range(
    fn: KeyRangeFn, ctx: Any, p: int, schemas: dict[str, pa.Schema], *pieces: pa.Table
) -> list[Any]:
    """A key range's pieces joined in order, fn run on them: first the rows of each output
    and the task's CPU time and node, then fn's result, then each output's table cast to
    its schema (None where fn gave none), in `schemas` order."""
    t0 = time.process_time()
    frame = pl.from_arrow(pa.concat_tables(pieces))
    assert isinstance(frame, pl.DataFrame)
    result, outs = fn(frame, p, ctx)
    tables = {n: as_table(b).cast(schemas[n]) for n, b in outs.items()}
    meta = {"rows": {n: tables[n].num_rows if n in tables else 0 for n in schemas}}
    return [{**meta, **_spent(t0)}, result, *[tables.get(n) for n in schemas]]


def _cut_ranges(
    groups: list[tuple[Location | str, int]],
    first: int,
    slots: np.ndarray,
    ks: np.ndarray,
    size: int,
    group_of: np.ndarray,
) -> list[Any]:
    """Row groups read whole, each row given its slot (rows from `first` on), cut into one
    table per group of ranges (`group_of`: each range's of `ks`), rows in order; last, the
    task's CPU time and node."""
    t0 = time.process_time()
    t = _read_groups(groups)
    mine = slots[first : first + t.num_rows]
    t = t.append_column(SLOT, pa.array(mine))
    which = group_of[np.searchsorted(ks, mine // size)]
    return [*_cut_by(t, which, int(group_of[-1]) + 1), _spent(t0)]


def _gather_ranges(
    fn: RangeFn,
    ctx: Any,
    todo: list[int],
    size: int,
    schemas: dict[str, pa.Schema],
    *pieces: pa.Table,
) -> list[Any]:
    """A group's pieces joined and sorted by slot, and fn run on each of its ranges `todo`
    (a slice each, one chunk per column as locally), outputs cast to their schemas: first
    the rows of each output per range and the task's CPU time and node, then per range each
    output's table (None where fn gave none), in `schemas` order."""
    t0 = time.process_time()
    rows = in_slot_order(pa.concat_tables(pieces))
    at = np.searchsorted(rows[SLOT].to_numpy() // size, np.asarray(todo + [todo[-1] + 1]))
    counts, tables = [], []
    for i, k in enumerate(todo):
        outs = fn(rows.slice(int(at[i]), int(at[i + 1] - at[i])), k, ctx)
        cast = {n: as_table(b).cast(schemas[n]) for n, b in outs.items()}
        counts.append({n: cast[n].num_rows if n in cast else 0 for n in schemas})
        tables += [cast.get(n) for n in schemas]
    meta = {"rows": counts, **_spent(t0)}
    return [meta, *tables]


def _spent(t0: float) -> dict[str, Any]:
    """What a task reports of itself (see _count): its worker's CPU time since `t0`, and
    its node."""
    return {"cpu_s": time.process_time() - t0, "node": _node()}


def _count(spent: dict[str, Any]) -> None:
    """A task's report of its worker's CPU time and node, counted for this process."""
    _worker_cpu[0] += spent["cpu_s"]
    _nodes[spent["node"]] += 1


def _cut(
    groups: list[tuple[Location | str, int]], columns: list[str], key: str, cuts: int
) -> list[Any]:
    """Row groups read (only `columns`) and cut into `cuts` tables by a hash of `key`, rows
    in order; last, the task's CPU time and node."""
    t0 = time.process_time()
    t = _read_groups(groups, columns)
    k = pl.from_arrow(t.select([key])).to_series()  # type: ignore[union-attr]
    # polars' hash is fixed for given seeds within one polars version: every worker agrees
    part = (k.hash(seed=0) % cuts).to_numpy().astype(np.int64)
    return [*_cut_by(t, part, cuts), _spent(t0)]


def _read_groups(
    groups: list[tuple[Location | str, int]], columns: list[str] | None = None
) -> pa.Table:
    """Row groups ((part file, group), in order) read as one table (only `columns`)."""
    opened: dict[str, Any] = {}
    tables = []
    for path, rg in groups:
        f = opened.get(str(path)) or opened.setdefault(str(path), open_parquet(path))
        tables.append(f.read_row_group(rg, columns=columns))
    return pa.concat_tables(tables)


def _cut_by(t: pa.Table, part: np.ndarray, n: int) -> list[pa.Table]:
    """t's rows cut into n tables by their partition (`part`, one per row), rows in order."""
    order = np.argsort(part, kind="stable")
    at = np.searchsorted(part[order], np.arange(n + 1))
    return [t.take(pa.array(order[at[i] : at[i + 1]])) for i in range(n)]


def _gather(fn: PartFn, ctx: Any, *pieces: pa.Table) -> tuple[Any, dict[str, Any]]:
    """A partition's pieces joined in reading order, fn's result on them; the task's CPU
    time and node."""
    t0 = time.process_time()
    frame = pl.from_arrow(pa.concat_tables(pieces))
    assert isinstance(frame, pl.DataFrame)
    res = fn(frame.lazy(), ctx)
    return res, _spent(t0)

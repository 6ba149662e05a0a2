"""The one runner: every stage runs through `run_stage`, whatever it does.

For every stage alike: its inputs must be outputs of finished stages; its fingerprint (code,
config section, the stage's own key, the content fingerprints its upstream manifests recorded:
nothing is re-hashed) decides whether it is skipped; its old manifest is dropped before it
starts, so a killed run is redone; its steps write through a StageIO (atomic files, the
stage's Parquet metadata); its outputs are checked against their declared schemas, recorded
(rows, bytes, sha256) and conserved (every item in leaves in exactly one output, checked here
as `verify` re-checks it); the manifest, written last, records counts, wall and CPU time.
The caller holds the run folder's lock (runs.run_lock) for as long as it runs stages.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from rich.text import Text

from pipeline import storage
from pipeline.config import Config
from pipeline.console import console, progress
from pipeline.errors import DataError
from pipeline.executors import batches, elsewhere, worker_cpu_s, worker_nodes, writer
from pipeline.executors.contract import merge
from pipeline.jit import BEGUN, none_cached, note_compiling_ahead, uncached_kernels, warm_mark
from pipeline.memory import peak_rss_mib, release, reset_peak_rss
from pipeline.parts import Parts, read_schema, read_table, remove, replace_tree
from pipeline.runs import (
    StageFailed,
    StageRun,
    invalidate_downstream,
    parts_sink,
    read_manifest,
    write_text,
)
from pipeline.stage import PKG, Output, Stage, code_version, import_graph, resolve
from pipeline.storage import Location

DEFAULT_BATCH = 65_536  # rows a map stage's batches hold unless it says (Stage.batch_size)


def write_tree(dest: Location, build: Callable[[Path], None]) -> None:
    """StageIO.write_tree's work, wherever it runs."""
    if storage.is_remote(dest):
        with tempfile.TemporaryDirectory(prefix="editcurate-") as d:
            build(Path(d) / dest.name)
            storage.delete(dest)
            dest.fs.put(str(Path(d) / dest.name), dest.path, recursive=True)
        return
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    remove(tmp)  # a symlink left there would have `build` write through it
    build(tmp)
    replace_tree(tmp, dest)


@dataclass
class StageIO:
    """What a step reads and writes through: the runner's files, never the step's own."""

    cfg: Config
    stage: Stage
    run: StageRun
    sha256: dict[str, dict[str, str]] = field(default_factory=dict)  # output -> part -> hash

    @property
    def dir(self) -> Location:
        return self.run.dir

    @property
    def meta(self) -> dict[str, str]:
        return self.run.meta

    @property
    def source(self) -> str:
        """The items it reads: its first input, as PIPELINE declares it ("filter/kept.parquet")."""
        return self.stage.reads[0]

    def input(self, rel: str) -> Location:
        return self.cfg.run_dir / rel

    def table(self, rel: str, columns: list[str] | None = None) -> pa.Table:
        return read_table(self.input(rel), columns=columns)

    def parts(self, rel: str) -> Parts:
        """An input output's parts, read as one table (pipeline/parts.py)."""
        return Parts(self.input(rel))

    @contextmanager
    def sink(self, name: str, schema: pa.Schema) -> Iterator[Any]:
        """An atomic writer of output `name`: a folder of Parquet parts of run.part_rows rows,
        renamed into place on success. The parts' hashes, taken as they were written, are
        kept for the output's record."""
        with parts_sink(self.dir / name, schema, self.meta, self.cfg.run.part_rows) as s:
            yield s
        self.sha256[name] = s.sha256

    def write(self, name: str, table: pa.Table) -> None:
        with self.sink(name, table.schema) as w:
            w.write_table(table)

    def write_text(self, name: str, text: str) -> None:
        write_text(self.dir / name, text)

    def write_tree(self, name: str, build: Callable[[Path], None], anywhere: bool = False) -> None:
        """A folder output, built in a temp folder renamed over the old one (on object
        storage: built in a local temp folder, its objects uploaded over the old ones).
        `anywhere`: `build` needs only the run folder, so on Ray a worker runs it (export's
        hf/: datasets maps the whole corpus while it writes)."""
        if anywhere:
            elsewhere(self.cfg.run, write_tree, self.dir / name, build)
        else:
            write_tree(self.dir / name, build)

    @contextmanager
    def scratch(self, name: str) -> Iterator[Path]:
        """A working folder of the stage's own (memory-mapped stores, temp buckets), removed
        whatever happens: `.NAME.PID` in the stage folder (what a killed run left there is
        removed first), or a local temp folder when the run folder is in object storage."""
        if storage.is_remote(self.dir):
            with tempfile.TemporaryDirectory(
                prefix=f"editcurate-{name}-", ignore_cleanup_errors=True
            ) as d:
                yield Path(d)
            return
        for old in self.dir.glob(f".{name}.*"):  # left by a run that was killed (or a link)
            remove(old)
        work = self.dir / f".{name}.{os.getpid()}"
        work.mkdir(parents=True)
        try:
            yield work
        finally:
            remove(work)

    def progress(self) -> Any:
        return progress()


@dataclass
class StageResult:
    stage: str
    manifest: dict[str, Any]
    skipped: bool


# ------------------------------------------------------------------------ fingerprints


def upstream(cfg: Config, rel: str, needed_by: str) -> str:
    """The content fingerprint the upstream manifest recorded for output `rel`."""
    stage, _, name = rel.partition("/")
    m = read_manifest(cfg.run_dir / stage)
    out = (m or {}).get("outputs", {}).get(name)
    if not isinstance(out, dict) or not (cfg.run_dir / rel).exists():
        raise StageFailed(
            f"{needed_by}: no {stage} output in {cfg.run_dir / stage}; "
            f"run `editcurate {stage} {shlex.quote(str(cfg.run_dir))}` first"
        )
    return f"sha256:{out.get('sha256', '')}"


# a stage's key: (fingerprint text, {external input: its content fingerprint})
Key = tuple[str, dict[str, str]]


def stage_key(stage: Stage, cfg: Config) -> Key:
    """What the stage's `key` says (it also checks what the config names for it)."""
    return resolve(stage.key)(cfg) if stage.key else ("", {})


def prepare(stage: Stage, cfg: Config, key: Key | None = None) -> StageRun:
    """The stage's run record: its inputs and fingerprint (`key`: stage_key's, when the caller
    already has it, so no input is hashed twice)."""
    inputs = {rel: upstream(cfg, rel, stage.name) for rel in stage.reads}
    extra, external = key if key is not None else stage_key(stage, cfg)
    inputs.update(external)
    section = cfg.fingerprint(stage.section) if stage.section else ""
    # part boundaries are part of the output bytes
    parts = f"part_rows={cfg.run.part_rows}"
    text = "\0".join((stage.name, section, extra, code_version(stage.code), parts))
    return StageRun(
        run_dir=cfg.run_dir,
        stage=stage.name,
        fingerprint=hashlib.sha256(text.encode()).hexdigest()[:16],
        config_fingerprint=cfg.fingerprint(),
        inputs=inputs,
    )


# ------------------------------------------------------------------------ running


def cpu_seconds() -> float:
    """The process's CPU time so far, user + system, its threads' and its finished child
    processes' included (a pool's workers, a git or gzip child)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_stage(
    stage: Stage, cfg: Config, force: bool = False, key: Key | None = None
) -> StageResult:
    sr = prepare(stage, cfg, key)
    if not force and sr.is_fresh():
        return StageResult(stage.name, read_manifest(sr.dir) or {}, skipped=True)
    sr.begin()
    if storage.is_remote(sr.dir):  # its outputs are rewritten in place: their readers are stale now
        invalidate_downstream(cfg.run_dir, stage.name)
    written = stage.written(cfg)
    for out in stage.writes:  # one not wanted this time: no earlier run's copy stays
        if out not in written:
            remove(sr.dir / out.name)
    _say_compiling(stage)
    reset_peak_rss()
    cpu0, workers0, nodes0 = cpu_seconds(), worker_cpu_s(), worker_nodes()
    io = StageIO(cfg, stage, sr)
    if stage.map is not None:
        counts, extra = _run_map(stage, cfg, io)
    else:
        assert stage.step is not None  # Stage checks exactly one of step and map
        counts, extra = resolve(stage.step)(cfg, io)
    in_schema = read_schema(io.input(stage.reads[0])) if stage.reads else None
    for out in written:
        _check_schema(stage, out, io.dir / out.name, in_schema)
        sr.record_output(out.name, out.role, io.sha256.get(out.name))
    if stage.conservation == "ids" and "conservation" not in extra:
        extra["conservation"] = {
            "kind": "ids",
            "input": f"../{stage.reads[0]}",
            "outputs": stage.leaves,
        }
    # this process's CPU and, on Ray, what the workers spent on the stage's tasks
    workers = worker_cpu_s() - workers0
    extra["cpu_s"] = round(cpu_seconds() - cpu0 + workers, 3)
    if workers:
        extra["workers_cpu_s"] = round(workers, 3)
    nodes = {n: k - nodes0.get(n, 0) for n, k in worker_nodes().items() if k > nodes0.get(n, 0)}
    if nodes:  # on Ray: its tasks, per node
        extra["ray_nodes"] = dict(sorted(nodes.items()))
    if (peak := peak_rss_mib()) is not None:
        extra["peak_rss_mib"] = peak
    manifest = sr.finish(counts, extra)
    release()
    invalidate_downstream(cfg.run_dir, stage.name)  # no later output is older than this one
    from pipeline.verify import check_stage

    problems: list[str] = []
    check_stage(sr.dir, manifest, problems, content=False, cfg=cfg)
    if problems:
        raise DataError(f"{stage.name}: {problems[0]}")
    return StageResult(stage.name, manifest, skipped=False)


def _cold(stage: Stage) -> bool:
    """Whether none of the stage's own numba kernels (those of its package) is compiled yet:
    the first run of this version of the code."""
    ref = stage.step if isinstance(stage.step, str) else stage.map
    if not isinstance(ref, str):
        return False
    resolve(ref)  # imports the stage's modules, and so its kernels' modules
    home = ref.partition(":")[0].rpartition(".")[0] + "."  # "pipeline.dedup."
    mods = [m for m in import_graph(PKG) if m.startswith(home) and home != "pipeline."]
    cold, every = uncached_kernels(mods)
    return bool(every) and cold == every


def _warm_cold(stage: Stage) -> bool:
    """_cold for a stage with warm-ups, from the kernel cache's folder names where it can
    (nothing imported: compiling ahead starts before the stages' modules are loaded)."""
    package = str(stage.warm[0]).partition(":")[0].rpartition(".")[0]  # "pipeline.dedup"
    fast = none_cached(package)
    return _cold(stage) if fast is None else fast


LATER_NICE = 10  # the CPU priority of the warm-ups of a stage other than the first cold one
IDLE_NICE = 19  # ... and of those of a stage that does not wait for them (Stage.warm_waits)
IDLE_WAIT_S = 30.0  # how long a finished run lets those finish


def _warm_modules(stage: Stage) -> list[str]:
    """The modules of a stage's warm-ups ("pipeline.filter.kernels")."""
    return sorted({str(ref).partition(":")[0] for ref in stage.warm})


def _unready(stage: Stage) -> bool:
    """Whether a stage that does not wait for its warm-ups has kernels still to compile (one
    killed part-way leaves some): no mark of a finished warm-up in their cache folder
    (jit.warm_mark; importing nothing: numba loaded before ingest slowed it by a tenth), or
    where there is none, its warm-ups' modules say, by `ready()`."""
    mods = _warm_modules(stage)
    marks = [warm_mark(m) for m in mods]
    if all(marks):
        return not all(m.exists() for m in marks if m is not None)
    return not all(resolve(f"{m}:ready")() for m in mods)


def _begun(stage: Stage) -> bool:
    """Whether a warm-up of the stage began in an earlier run (its BEGUN mark)."""
    marks = [warm_mark(m, BEGUN) for m in _warm_modules(stage)]
    return any(m is not None and m.exists() for m in marks)


class CompileAhead:
    """The warm-ups (Stage.warm) of the given stages whose kernels are not compiled yet, each
    in a process of its own, started now: a first run compiles dedup's and shapes' kernels
    while the stages before them run, on every core (numba compiles on one). wait(stage)
    before running a stage; close() stops what is left. A warm-up that fails costs nothing
    but its time: the stage compiles what it needs itself. The warm-ups of a stage that does
    not wait for them (the filter's) start once the others are done, at the lowest priority:
    until they are, that stage works without its kernels (filter/measures.py)."""

    def __init__(self, stages: list[Stage], cfg: Config) -> None:
        self.running: dict[str, list[tuple[str, subprocess.Popen[bytes], Any]]] = {}
        self.lock, self.closed = threading.Lock(), False
        cold = [s for s in stages if s.warm and (_warm_cold(s) if s.warm_waits else _unready(s))]
        # a stage that does not wait (Stage.warm_waits) has its kernels compiled once the
        # others' are: on a core its run leaves idle, not in the time they take
        self.deferred = [s for s in cold if not s.warm_waits]
        # those an earlier run began and stopped: this one lets them finish (close)
        self.idle = {s.name for s in self.deferred if _begun(s)}
        if not cold:
            return
        self.payload = cfg.model_dump_json().encode()
        # this process's copy of the package first: a warm-up compiles the code that will run
        path = os.pathsep.join(filter(None, [str(PKG.parent), os.environ.get("PYTHONPATH")]))
        self.env = {**os.environ, "PYTHONPATH": path}
        waited = [s for s in cold if s.warm_waits]
        for k, stage in enumerate(waited):
            # the next stage first: later ones have the stages between to compile in
            self._start(stage, LATER_NICE if k else 0)
        for stage in self.deferred:
            for module in _warm_modules(stage):
                note_compiling_ahead(module.rpartition(".")[0])
        if self.deferred:
            procs = [p for procs in self.running.values() for _, p, _ in procs]
            threading.Thread(target=self._after, args=(procs,), daemon=True).start()
        console.print(
            Text(
                f"compiling the numba kernels of {', '.join(s.name for s in cold)} in "
                f"{sum(len(s.warm) for s in cold)} processes while the stages before "
                "them run (once per version of the code: later runs load them from the kernel "
                "cache, see docs/DESIGN.md)",
                style="dim",
            )
        )

    def _start(self, stage: Stage, nice: int) -> None:
        for ref in stage.warm:
            log = tempfile.TemporaryFile()
            cmd = [sys.executable, "-m", "pipeline.jit", str(ref), str(nice)]
            proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=log, stderr=log, env=self.env
            )
            assert proc.stdin is not None
            proc.stdin.write(self.payload)
            proc.stdin.close()
            self.running.setdefault(stage.name, []).append((str(ref), proc, log))

    def _after(self, procs: list[subprocess.Popen[bytes]]) -> None:
        """Starts the deferred warm-ups once `procs` are done (a thread of its own)."""
        for p in procs:
            p.wait()
        with self.lock:
            if not self.closed:
                for stage in self.deferred:
                    self._start(stage, IDLE_NICE)

    def wait(self, stage: Stage) -> None:
        if not stage.warm_waits:  # it runs without them; close() stops what is left
            return
        with self.lock:
            procs = self.running.pop(stage.name, [])
        for ref, proc, log in procs:
            if proc.wait() != 0:
                log.seek(0)
                lines = log.read().decode(errors="replace").strip().splitlines() or ["?"]
                console.print(
                    Text(f"{stage.name}: compiling ahead ({ref}) failed: {lines[-1]}", style="dim")
                )
            log.close()

    def close(self, finished: bool = False) -> None:
        """Stops what is left; after a finished run, first lets the warm-ups of a stage that
        did not wait for them finish (up to IDLE_WAIT_S) where an earlier run began them:
        stopped with every short run, they would start again with the next, and a first
        run does not wait."""
        with self.lock:
            self.closed = True
        for name, procs in self.running.items():
            for _, proc, log in procs:
                if finished and name in self.idle:
                    try:
                        proc.wait(IDLE_WAIT_S)
                    except subprocess.TimeoutExpired:
                        pass
                proc.kill()
                proc.wait()
                log.close()
        self.running.clear()


def _say_compiling(stage: Stage) -> None:
    """One line before a stage none of whose own numba kernels is compiled yet (and not
    compiled ahead): the first run after an install."""
    if stage.warm_waits and _cold(stage):
        console.print(
            Text(
                f"{stage.name}: compiling its numba kernels on first use (up to half a minute, "
                "once per version of the code: every later run and install of it loads them "
                "from the kernel cache, see docs/DESIGN.md)",
                style="dim",
            )
        )


def _check_schema(stage: Stage, out: Output, path: Location, in_schema: pa.Schema | None) -> None:
    if not path.exists():
        raise StageFailed(f"{stage.name}: the stage did not write its output {out.name}")
    want = declared_schema(out, in_schema)
    if want is None or not out.name.endswith(".parquet"):
        return
    got = read_schema(path)
    if [(f.name, f.type) for f in got] != [(f.name, f.type) for f in want]:
        raise StageFailed(
            f"{stage.name}: {out.name} has columns {got.names}, the stage declares {want.names}"
        )


def declared_schema(out: Output, in_schema: pa.Schema | None) -> pa.Schema | None:
    """The schema an output declares: given, named ("module:NAME"), or a function of the
    first input's schema (kept = input); None where it declares none."""
    want = resolve(out.schema) if isinstance(out.schema, str) else out.schema
    if callable(want) and not isinstance(want, pa.Schema):
        want = want(in_schema)
    return want


def _run_map(stage: Stage, cfg: Config, io: StageIO) -> tuple[dict[str, Any], dict[str, Any]]:
    """A map stage (`Stage.map`): its batches through the configured executor (local or ray),
    its outputs through the Writer, the counts summed, then its finalize."""
    src = io.input(io.source)
    ctx = resolve(stage.start)(cfg, src) if stage.start else cfg
    fn = resolve(stage.map)  # type: ignore[arg-type]
    size = stage.batch_size(cfg) if stage.batch_size else DEFAULT_BATCH
    where = " (ray)" if cfg.run.executor == "ray" else ""
    totals: dict[Any, Any] = {}
    in_schema = read_schema(src)
    schemas: dict[str, pa.Schema] = {}
    for o in stage.written(cfg):
        if o.name.endswith(".parquet"):
            if (want := declared_schema(o, in_schema)) is None:
                raise StageFailed(f"output {o.name}: a map stage must declare its schema")
            schemas[o.name] = want
    with ExitStack() as stack:
        out = writer(cfg.run, io.sink, schemas, size, stack)
        bar = stack.enter_context(io.progress())
        task = bar.add_task(stage.name + where, total=Parts(src).num_rows)
        for outs, counts, rows in batches(cfg, src, fn, ctx, size, held=schemas):
            out.add(outs)
            merge(totals, counts)
            bar.advance(task, rows)
        out.close()
    if stage.finalize is None:
        return totals, {}
    return resolve(stage.finalize)(cfg, totals, io)

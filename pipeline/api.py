"""The Python API: a Pipeline runs the stages of PIPELINE through the one runner; a Run reads
what it wrote. The CLI is a thin layer over this.

    from pipeline import Pipeline
    run = Pipeline.from_paths("edits.jsonl").run()
    run.read("export/train").collect()
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import storage
from pipeline.config import Config, ConfigError, apply_override, load_config, validate
from pipeline.errors import EnvError, UsageError
from pipeline.parts import scan_output
from pipeline.runner import CompileAhead, StageResult, run_stage, stage_key
from pipeline.runs import CONFIG_FILE, committed, read_manifest, run_lock, stale_stages, write_text
from pipeline.secrets.masking import mask
from pipeline.stage import PIPELINE, Stage, resolve
from pipeline.storage import Location, is_url


def _set(data: dict[str, Any], key: str, value: Any) -> None:
    """data[a][b][0][c] = value for key "a.b.0.c", creating tables on the way."""
    parts = key.split(".")
    node: Any = data
    for part, nxt in zip(parts[:-1], parts[1:], strict=True):
        if isinstance(node, list):
            node = node[int(part)]
        else:
            node = node.setdefault(part, [] if nxt.isdigit() else {})
    if isinstance(node, list):
        node[int(parts[-1])] = value
    else:
        node[parts[-1]] = value


def _input_path(given: str | Path) -> Path:
    """A path given on the command line, checked readable as a config's source path is (one
    line naming it, exit 3: missing, a FIFO or device, permission denied, a symlink loop)."""
    from pipeline.ingest.base import SourceUnreadable
    from pipeline.ingest.opening import check_source_path

    p = Path(given).expanduser().absolute()
    try:
        check_source_path(p, "any")
        return p.resolve()
    except SourceUnreadable as e:
        raise EnvError(str(e)) from None
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        raise EnvError(f"{p}: too many levels of symbolic links") from None


def _same_folder(a: Location, b: Location) -> bool:
    if storage.is_remote(a) or storage.is_remote(b):
        return str(a).rstrip("/") == str(b).rstrip("/")
    return a.resolve() == b.resolve()


def detect_source(path: Path) -> dict[str, Any]:
    """A source for a path given on the command line: the format is read from what it is."""
    if path.is_dir():
        if (path / ".git").exists():
            return {"kind": "git", "path": str(path)}
        if any((path / f).exists() for f in ("dataset_dict.json", "dataset_info.json")):
            return {"kind": "hf", "format": "disk", "path": str(path)}
        if any(p.name[:1] not in "._" for p in path.glob("*.parquet")):
            # a folder of Parquet parts: a stage output (export/train.parquet), shards
            return {"kind": "table", "format": "auto", "path": str(path)}
        raise EnvError(
            f"{path}: a folder that is neither a git repository, a saved `datasets` dataset "
            "nor a folder of Parquet files; give the files in it, or a config"
        )
    if not path.exists():
        raise EnvError(f"{path}: no such file")
    return {"kind": "table", "format": "auto", "path": str(path)}


# the first line of a run folder's config.toml in which a secret was masked
MASKED_CONFIG = "# MASKED: a value here held a secret; this copy is for reading, not loading"


class Pipeline:
    """The stages of `stages` over one config; `run` executes them in order."""

    def __init__(self, config: Config, stages: tuple[Stage, ...] = PIPELINE):
        self.config = config
        self.stages = stages

    @classmethod
    def from_config(
        cls,
        source: str | Path | dict[str, Any],
        overrides: dict[str, Any] | None = None,
        sets: list[str] | None = None,
    ) -> Pipeline:
        """From a TOML file or a dict in its shape; overrides map dotted keys to values,
        as `--set` does ({"dedup.threshold": 0.7, "ingest.sources.0.path": "x.jsonl"});
        sets are `--set KEY=VALUE` texts (values read as TOML, bare words as strings)."""
        set_by: dict[str, str] = {}  # key -> the --set that gave it, for error lines
        if isinstance(source, dict):
            data, where, base = copy.deepcopy(source), "<dict>", Path.cwd()
            for text in sets or []:
                set_by[apply_override(data, text)] = text
        else:
            loaded = load_config(source, sets)
            if not overrides:
                return cls(loaded)
            data, where, base = loaded.canonical(), str(source), Path(loaded.base_dir)
        for key, value in (overrides or {}).items():
            try:
                _set(data, key, value)
            except (IndexError, ValueError, AttributeError, TypeError):
                raise ConfigError(f"override {key!r}: no such key path in the config") from None
        return cls(validate(Config, data, where, set_by=set_by).with_base_dir(base))

    @classmethod
    def open(
        cls,
        run_dir: str | Path,
        overrides: dict[str, Any] | None = None,
        sets: list[str] | None = None,
    ) -> Pipeline:
        """The pipeline a run folder was made with (the config it keeps, RUN_DIR/config.toml),
        overrides and sets on top: a run continued stage by stage without its config file."""
        where = storage.location(run_dir)
        stored = where / CONFIG_FILE
        if not stored.is_file():
            raise UsageError(
                f"{where}: no {CONFIG_FILE} (not a run folder, or one made before run folders "
                "kept their config); give --config FILE"
            )
        if stored.read_text(encoding="utf-8").startswith(MASKED_CONFIG):
            raise UsageError(
                f"{stored}: its values hold a secret, masked, so it cannot be loaded; give "
                "--config FILE"
            )
        if storage.is_remote(stored):  # read here: the config loader reads local files
            from pipeline.config.load import read_toml

            p = cls.from_config(read_toml(stored.read_text(encoding="utf-8")), overrides, sets)
        else:
            p = cls.from_config(stored, overrides, sets)
        if not _same_folder(p.config.run_dir, where):
            raise UsageError(
                f"{run_dir}: its {CONFIG_FILE} names the run folder {p.config.run_dir} (moved, "
                "or run.root/run.name set); give --config FILE"
            )
        return p

    def stored_config(self) -> str:
        """The effective config as the run folder keeps it: every default, and run.base_dir
        set, so it loads back from the run folder to the same config. A secret in it (a
        source file named after a token) is masked, as everywhere in a run folder; such a
        copy says so in its first line, and `open` refuses it."""
        from pipeline.config import config_toml

        cfg = self.config
        if not cfg.run.base_dir:
            base = str(Path(cfg.base_dir).resolve())
            cfg = cfg.model_copy(update={"run": cfg.run.model_copy(update={"base_dir": base})})
        text = config_toml(cfg, "this run folder")
        masked, found = mask(text)
        return f"{MASKED_CONFIG}\n{masked}" if found else text

    @classmethod
    def from_paths(
        cls,
        *paths: str | Path,
        out: str | Path | None = None,
        overrides: dict[str, Any] | None = None,
        sets: list[str] | None = None,
    ) -> Pipeline:
        """No config: one source per path, its kind and format detected, default field
        names; the run folder is `out`, or ./runs/<stem of the first path>."""
        if not paths:
            raise UsageError("give at least one input path (or a config)")
        # a URL names an object in storage: read as a table (its format detected), checked
        # when ingest fingerprints it, with the run's storage options
        sources = [
            {"kind": "table", "format": "auto", "path": p}
            if isinstance(p, str) and is_url(p)
            else detect_source(_input_path(p))
            for p in paths
        ]
        names = [Path(s["path"]).name for s in sources]
        for k, s in enumerate(sources):  # distinct source names, as the config requires
            s["name"] = names[k] if names.count(names[k]) == 1 else f"{names[k]}#{k}"
        if out is None:
            stem = names[0].split(".")[0] or "run"
            if mask(stem)[1]:  # a file named after a token: the folder must not be
                stem = "run"
            run = {"root": str(Path.cwd() / "runs"), "name": stem}
        elif isinstance(out, str) and is_url(out):  # a run folder in object storage
            root, _, name = out.rstrip("/").rpartition("/")
            if root.endswith(":/"):  # s3://bucket: the bucket itself
                raise UsageError(
                    f"{out}: name a folder in the bucket for the run (s3://bucket/runs/NAME), "
                    "not the bucket"
                )
            run = {"root": root, "name": name}
        else:
            try:
                o = Path(out).expanduser().resolve()
            except RuntimeError:  # a symlink loop (Python < 3.13)
                raise EnvError(f"{out}: too many levels of symbolic links") from None
            run = {"root": str(o.parent), "name": o.name}
        data = {"run": run, "ingest": {"sources": sources}}
        return cls.from_config(data, overrides, sets)

    def run(
        self,
        until: str | None = None,
        only: str | None = None,
        force: bool = False,
        on_stage: Callable[[Stage, StageResult], None] | None = None,
    ) -> Run:
        """Run the stages in order (skipping unchanged ones), up to and including `until`,
        or only the stage `only`; holds the run folder's lock throughout. on_stage is called
        after each stage (the CLI prints its summary); a stage's data check (an ingest that
        gave no item) then raises DataError."""
        names = [s.name for s in self.stages]
        for name in (until, only):
            if name is not None and name not in names:
                raise UsageError(f"no stage {name!r}; stages: {', '.join(names)}")
        todo = list(self.stages)
        if until is not None:
            todo = todo[: names.index(until) + 1]
        if only is not None:
            todo = [s for s in todo if s.name == only]
        cfg = self.config
        results: list[StageResult] = []
        t0 = time.time()
        ahead = CompileAhead(todo, cfg)  # first, so that it overlaps all of what follows
        finished = False
        try:
            # what the config names (rules, benchmarks, earlier runs) is checked before the
            # first stage runs, by the later stages' keys, kept for their runs (the first's
            # key runs first anyway, and hashes the inputs)
            keys = {s.name: stage_key(s, cfg) for s in todo[1:]}
            with run_lock(cfg.run_dir, cfg.run_root):
                write_text(cfg.run_dir / CONFIG_FILE, self.stored_config())
                for stage in todo:
                    ahead.wait(stage)
                    result = run_stage(stage, cfg, force=force, key=keys.get(stage.name))
                    results.append(result)
                    if on_stage is not None:
                        on_stage(stage, result)
                    if stage.check is not None:
                        resolve(stage.check)(result.manifest)
            finished = True
        finally:
            ahead.close(finished)
        return Run(cfg.run_dir, results, time.time() - t0, self.stages)


class Run:
    """A run folder and what the last `Pipeline.run` did in it."""

    def __init__(
        self,
        path: Location | str,
        results: list[StageResult] | None = None,
        wall_s: float = 0.0,
        stages: tuple[Stage, ...] = PIPELINE,
    ):
        self.path = storage.location(path) if isinstance(path, str) else path
        self.results = results or []
        self.wall_s = wall_s
        self.stages = stages

    def read(self, name: str) -> pl.LazyFrame:
        """An output as a polars LazyFrame: "filter/kept", "export/train", "dedup/edges"."""
        rel = name if name.endswith(".parquet") else f"{name}.parquet"
        p = self.path / rel
        if not committed(p.parent, p.name):
            raise UsageError(
                f"{p}: no such output (stage not run or not finished, or no such name)"
            )
        return scan_output(p)

    def summary(self) -> dict[str, Any]:
        """Counts per stage, outputs (run-relative, rows), wall time: what `--json` prints."""
        ran = {r.stage: r for r in self.results}
        stages: dict[str, Any] = {}
        for stage in self.stages:
            m = (
                ran[stage.name].manifest
                if stage.name in ran
                else read_manifest(self.path / stage.name)
            )
            if not m:
                continue
            stages[stage.name] = {
                "skipped": ran[stage.name].skipped if stage.name in ran else None,
                "counts": m.get("counts", {}),
                "outputs": {
                    f"{stage.name}/{k}": v.get("rows") for k, v in m.get("outputs", {}).items()
                },
                "wall_s": m.get("wall_s"),
                "cpu_s": m.get("cpu_s"),
                "workers_cpu_s": m.get("workers_cpu_s", 0.0),
                "peak_rss_mib": m.get("peak_rss_mib"),
            }
        return {
            "run": str(self.path),
            "stages": stages,
            # stages whose inputs changed after they ran: not current, so not in `stages`
            "stale": stale_stages(self.path),
            "wall_s": round(self.wall_s, 3),
        }

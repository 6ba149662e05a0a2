"""The `editcurate` command: a thin layer over the Python API (pipeline/api.py).

`run` runs every stage of PIPELINE (from a config, or from paths), a sub-command per stage
runs one; heavy libraries are imported inside the commands, so `--help` stays fast.

Every failure is one line on stderr (data is never read as Rich markup, its control characters
are escaped: cli_base.py) and an exit code from pipeline/errors.py: 0 ok, 1 data or check
failed, 2 usage or config, 3 I/O or environment.
`--debug` (or EDITCURATE_DEBUG=1) lets the traceback through. Progress and logs go to stderr;
`--json` prints a machine-readable summary on stdout.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.text import Text

from pipeline.cli_base import (
    BaseOpt,
    ForceOpt,
    FormatOpt,
    Group,
    JsonOpt,
    LabelsOpt,
    NgramOpt,
    OptConfigOpt,
    OptRunDir,
    PathsArg,
    PrintOpt,
    RunDir,
    SetOpt,
    StageConfigOpt,
    check_report_options,
    fail,
    run_folder,
    set_debug,
)
from pipeline.console import console, json_text
from pipeline.errors import DATA
from pipeline.stage import NAMES, PIPELINE, SMOKE, by_name
from pipeline.storage import Location

if TYPE_CHECKING:
    from pipeline.api import Pipeline, Run
    from pipeline.config import Config
    from pipeline.runner import StageResult
    from pipeline.stage import Stage

app = typer.Typer(
    cls=Group,
    help="Curate code-review edits into a clean fine-tuning corpus.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib import metadata

        typer.echo(f"editcurate {metadata.version('editcurate')}")
        raise typer.Exit(0)


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of a failure.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_version, help="Print the version."),
    ] = False,
) -> None:
    """Curate code-review edits into a clean fine-tuning corpus."""
    set_debug(debug)


def _pipeline(
    config: Path | None,
    sets: list[str] | None,
    paths: list[str] | None = None,
    out: str | None = None,
    print_config: bool = False,
    run_dir: str | None = None,
) -> Pipeline:
    """The Pipeline from a config, input paths or a run folder's own config; --print-config
    prints it and exits."""
    from pipeline.api import Pipeline
    from pipeline.config import config_toml

    if config is not None and (paths or run_dir is not None):
        fail("give a config, or input paths or a run folder, not both")
    if config is not None:
        p = Pipeline.from_config(config, sets=sets or [])
    elif paths:
        p = Pipeline.from_paths(*paths, out=out, sets=sets or [])
    elif run_dir is not None:
        p = Pipeline.open(run_dir, sets=sets or [])
    else:
        fail(
            "give input paths (editcurate run edits.jsonl), a run folder (editcurate export "
            "runs/edits) or --config FILE"
        )
    if print_config:
        typer.echo(config_toml(p.config, str(config or "")), nl=False)
        raise typer.Exit(0)
    return p


def _show(stage: Stage, result: StageResult) -> None:
    """After each stage: its summary, and what it wrote (or that it was skipped)."""
    from pipeline.stage import resolve

    m = result.manifest
    if result.skipped:
        console.print(
            Text(f"{stage.name}: unchanged inputs and config, skipped (--force to re-run)"),
            style="dim",
        )
    if stage.summary is not None:
        resolve(stage.summary)(m)
    if not result.skipped:
        console.print(
            Text(
                f"{stage.name}: wrote {stage.name}/ in {m.get('wall_s', 0):.1f}s "
                f"({m.get('cpu_s', 0):.1f}s CPU)"
            )
        )


def _one_stage(
    name: str,
    run_dir: str | None,
    config: Path | None,
    sets: list[str] | None,
    force: bool,
    print_config: bool,
) -> None:
    p = _pipeline(config, sets, print_config=print_config, run_dir=run_dir)
    run = p.run(only=name, force=force, on_stage=_show)
    _say_stale(run.path)


def _stage_command(name: str, doc: str) -> None:
    """`editcurate NAME RUN_DIR` or `editcurate NAME --config FILE`: run that one stage (each
    stage is one in PIPELINE)."""

    def command(
        run_dir: OptRunDir = None,
        config: StageConfigOpt = None,
        set_: SetOpt = None,
        force: ForceOpt = False,
        print_config: PrintOpt = False,
    ) -> None:
        _one_stage(name, run_dir, config, set_, force, print_config)

    command.__doc__ = doc
    app.command(name)(command)


for _stage in PIPELINE:
    if _stage.name != "export":  # export has its own command below (--format)
        _stage_command(_stage.name, _stage.doc)


@app.command()
def export(
    run_dir: OptRunDir = None,
    config: StageConfigOpt = None,
    set_: SetOpt = None,
    force: ForceOpt = False,
    format_: FormatOpt = None,
    print_config: PrintOpt = False,
) -> None:
    extra = [f"export.format={format_}"] if format_ else []
    _one_stage("export", run_dir, config, [*(set_ or []), *extra], force, print_config)


export.__doc__ = by_name("export").doc


@app.command("run")
def run_all(
    paths: PathsArg = None,
    config: OptConfigOpt = None,
    set_: SetOpt = None,
    out: Annotated[
        Optional[str],  # noqa: UP045 (a URL too: s3://bucket/runs/edits)
        typer.Option("--out", "-o", help="Run folder (with paths; default ./runs/<stem>)."),
    ] = None,
    until: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help=f"Stop after this stage: {', '.join(NAMES)}."),
    ] = None,
    force: ForceOpt = False,
    json_: JsonOpt = False,
    print_config: PrintOpt = False,
    executor: Annotated[str, typer.Option(help="local | ray (default: run.executor).")] = "",
) -> None:
    """Run every stage in order (unchanged ones are skipped), verify, write the report."""
    from pipeline.memory import release
    from pipeline.runner import cpu_seconds
    from pipeline.verify import verify_run

    startup = cpu_seconds()  # the interpreter, the imports, the arguments
    set_ = [*(set_ or []), *([f"run.executor={executor}"] if executor else [])]
    p = _pipeline(config, set_, paths, out, print_config)
    run = p.run(until=until, force=force, on_stage=_show)
    ran = cpu_seconds()
    problems, passed = verify_run(run.path, p.config)
    release()  # the report starts from what the stages and verify left
    if problems:
        for prob in problems:
            console.print(Text.assemble(("conservation: ", "red"), prob))
        raise typer.Exit(DATA)
    verified = cpu_seconds()
    console.print(Text.assemble(("run complete", "green"), f": {run.path} (conservation verified)"))
    _say_stale(run.path)
    if until is None:
        _report(run, p, (problems, passed))
    if json_:
        summary = run.summary()  # stages in PIPELINE order
        summary["cpu_s"] = _cpu_parts(summary, startup, ran, verified, cpu_seconds())
        typer.echo(json_text(summary, indent=2))


def _cpu_parts(
    summary: dict, startup: float, ran: float, verified: float, end: float
) -> dict[str, float]:
    """The command's CPU time in parts that sum to its total: the process's own (user +
    system, threads and finished children included) and, on Ray, what the workers spent on
    its tasks (`workers`). The parts: the stages run now (their manifests' cpu_s, workers
    included), the work between them (config, keys, input hashing, each stage's output
    check), the final verify, the report, and the start-up before the command (interpreter,
    imports)."""
    now = [v for v in summary["stages"].values() if v["skipped"] is False]
    stages = sum(v["cpu_s"] or 0.0 for v in now)
    workers = sum(v.get("workers_cpu_s") or 0.0 for v in now)
    parts = {
        "total": end + workers,
        "process": end,
        "workers": workers,
        "startup": startup,
        "stages": stages,
        "between_stages": ran - startup - (stages - workers),
        "verify": verified - ran,
        "report": end - verified,
    }
    return {k: round(v, 3) for k, v in parts.items()}


def _report(run: Run, p: Pipeline, verified: tuple[list[str], list[str]]) -> None:
    from pipeline.report.report import write_report
    from pipeline.runs import run_lock

    with run_lock(run.path, create=False):
        paths = write_report(run.path, window=p.config.shapes.window, verified=verified)
    console.print(Text(f"report: wrote {paths['html']} (+ report.md, report.json, plots/)"))


@app.command()
def tune(
    run_dir: RunDir,
    base: BaseOpt = None,
    step: Annotated[float, typer.Option(help="Threshold step.")] = 0.05,
    labels: LabelsOpt = None,
    ngram: NgramOpt = None,
) -> None:
    """Sweep the dedup threshold over the edges found; plot, borderline pairs, precision/recall."""
    from pipeline.dedup.tune import print_tune
    from pipeline.dedup.tune import tune as run_tune
    from pipeline.runs import run_lock

    where = run_folder(run_dir)
    with run_lock(where, create=False):
        res = run_tune(where, base=base, step=step, labels=labels, ngrams=ngram)
        print_tune(res)
        _refresh_report(where)


def _refresh_report(run_dir: Location) -> None:
    """tune and smoke-train add to what the report shows (the sweep; the smoke table, plot and
    the recommendation's culprit sets), so they write it again, under the caller's run lock, and
    say so; where the report cannot be built, they say why and what to run."""
    from pipeline.report.report import ReportFailed, write_report

    try:
        paths = write_report(run_dir)
    except ReportFailed as e:
        console.print(Text(f"report: not refreshed: {e}"))
        return
    console.print(Text(f"report: refreshed {paths['html']} (+ report.md, report.json, plots/)"))


@app.command()
def report(
    run_dir: RunDir,
    scope: Annotated[str, typer.Option(help="Shape scope the sampling options use.")] = "repo",
    batch: Annotated[int, typer.Option(help="Items per optimizer step, for collisions.")] = 16,
    seed: Annotated[int, typer.Option(help="Seed of the random training order.")] = 0,
) -> None:
    """Write RUN_DIR/report/: report.md, report.html (self-contained), report.json, plots/."""
    check_report_options(scope, batch, seed)
    from pipeline.report.report import write_report
    from pipeline.runs import run_lock
    from pipeline.verify import verify_run

    where = run_folder(run_dir)
    with run_lock(where, create=False):
        verified = verify_run(where, _stored_config(run_dir))
        paths = write_report(where, scope=scope, batch=batch, seed=seed, verified=verified)
    console.print(Text(f"report: wrote {paths['html']} (+ report.md, report.json, plots/)"))


def _stored_config(run_dir: str) -> Config | None:
    """The config a run folder keeps, or None where it keeps none that loads (the checks
    that need one then run in this process): verify's whole-output checks run on the run's
    executor."""
    from pipeline.api import Pipeline
    from pipeline.errors import EditcurateError

    try:
        return Pipeline.open(run_dir).config
    except EditcurateError:
        return None


def _say_stale(run_dir: Location) -> None:
    """The stages whose inputs changed after they ran (their manifests are set aside)."""
    from pipeline.runs import stale_stages

    for name, why in stale_stages(run_dir).items():
        console.print(
            Text.assemble(
                ("stale ", "yellow"),
                f"{name}: {why}; not current, not checked: run it again (without --until)",
            )
        )


@app.command()
def verify(run_dir: RunDir) -> None:
    """Check that every item that entered a stage left it in exactly one output."""
    from pipeline.verify import verify_run

    where = run_folder(run_dir)
    problems, passed = verify_run(where, _stored_config(run_dir))
    for p in passed:
        console.print(Text.assemble(("ok ", "green"), p))
    _say_stale(where)
    if problems:
        for p in problems:
            console.print(Text.assemble(("FAIL ", "bold red"), p))
        console.print(
            Text.assemble(("verify failed", "bold red"), f": {len(problems)} problem(s) in {where}")
        )
        raise typer.Exit(DATA)
    console.print(Text.assemble(("verify passed", "green"), f": {where}"))


@app.command()
def why(
    run_dir: RunDir,
    ids: Annotated[list[str], typer.Argument(help="Item ids, or unique prefixes (8+ chars).")],
    json_: Annotated[bool, typer.Option("--json", help="Print a JSON list instead.")] = False,
) -> None:
    """Every decision the run made about each item: filter, dedup, shape group, split.

    Exits 1 when an id is unknown or a prefix ambiguous."""
    from pipeline import why as why_mod
    from pipeline.console import make_console

    where = run_folder(run_dir)
    if not where.is_dir():
        fail(f"{where}: no such run folder")
    results = why_mod.explain(where, ids)
    if json_:
        typer.echo(json_text(results, indent=2))
    else:
        out = make_console(soft_wrap=True, highlight=False, emoji=False, markup=False)
        for line in why_mod.render(results):
            out.print(line)
    if why_mod.unresolved(results):
        raise typer.Exit(1)


@app.command("smoke-train")
def smoke_train(
    run_dir: Annotated[
        str, typer.Argument(help="A run folder with a finished export stage", show_default=False)
    ],
    model: Annotated[str, typer.Option(help="HF checkpoint folder or config:tiny|0.5b.")] = "",
    lr: Annotated[float, typer.Option(help="AdamW peak learning rate.")] = 2e-4,
    micro_batch: Annotated[int, typer.Option(help="Items per micro-batch.")] = 1,
    grad_accum: Annotated[int, typer.Option(help="Micro-batches per step.")] = 16,
    max_len: Annotated[int, typer.Option(help="Tokens per item after truncation.")] = 1024,
    seed: Annotated[int, typer.Option(help="Seed of init and training order.")] = 0,
    schedule: Annotated[str, typer.Option(help="Decay after warmup: cosine | linear.")] = "cosine",
    grad_checkpointing: Annotated[bool, typer.Option(help="Activation checkpointing.")] = False,
    probe_batch: Annotated[int, typer.Option(help="K > 0: probe K-item blocks by suspicion.")] = 0,
    sweep: Annotated[str, typer.Option(help="KEY=V1,V2: one loop per value.")] = "",
    eval_items: Annotated[int, typer.Option(help="Validation items judged; 0: gate skipped.")] = 32,
    max_new_tokens: Annotated[int, typer.Option(help="Generation cap when judging.")] = 128,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda.")] = "auto",
    fault: Annotated[str, typer.Option(help="TEST ONLY: pair:A,B | item:A | forward:A.")] = "",
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress on stderr; the summary still prints.")
    ] = False,
) -> None:
    options = {k: v for k, v in locals().items() if k not in ("run_dir", "sweep", "fault", "quiet")}
    from pipeline.config import SmokeConfig, validate
    from pipeline.runs import run_lock
    from pipeline.train import stage as smoke
    from pipeline.train.faults import parse_fault

    sc = validate(SmokeConfig, options, "smoke-train")  # a bad option: one line, exit 2
    hook = parse_fault(fault) if fault else None  # test-only fault injection; bad: exit 2
    where = run_folder(run_dir)
    with run_lock(where, create=False):
        sweep_arg = smoke.parse_sweep(sweep) if sweep else None
        summary = smoke.run(where, sc, sweep_arg, hook, fault_spec=fault, quiet=quiet)
        smoke.print_summary(summary)
        console.print(Text(f"smoke-train: wrote {where / 'smoke'}"))
        _refresh_report(where)
    if summary["verdict"] != "trains":
        raise typer.Exit(1)


smoke_train.__doc__ = SMOKE.doc


if __name__ == "__main__":  # pragma: no cover
    app()

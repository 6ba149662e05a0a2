"""The `editcurate` command: one sub-command per stage, `run` for all of them, and `verify`.

Every failure is one line on stderr (data is never read as Rich markup) and an exit code from
pipeline/errors.py: 0 ok, 1 data or check failed, 2 usage or config, 3 I/O or environment.
`--debug` (or EDITCURATE_DEBUG=1) lets the traceback through.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, NoReturn, Optional

import typer
from rich.text import Text
from typer.core import TyperGroup

from pipeline import export as export_stage
from pipeline import filter as filter_stage
from pipeline import shapes as shapes_stage
from pipeline.config import Config, ConfigError, config_toml, load_config
from pipeline.console import console
from pipeline.dedup import stage as dedup_stage
from pipeline.errors import DATA, USAGE, DataError, exit_code, one_line
from pipeline.ingest import stage as ingest_stage
from pipeline.runs import StageFailed, read_manifest, run_lock
from pipeline.verify import verify_run

_DEBUG = {"on": False}  # set by the top-level callback on every invocation


def _debug() -> bool:
    return _DEBUG["on"] or os.environ.get("EDITCURATE_DEBUG", "") not in ("", "0")


def error_line(msg: str) -> None:
    """`error: msg` on stderr; msg is data, never markup."""
    console.print(Text.assemble(("error: ", "bold red"), msg), soft_wrap=True)


class _Group(TyperGroup):
    """Turns any exception a command raises into one line and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            error_line("interrupted")
            raise typer.Exit(130) from None
        except Exception as e:
            # typer's own exits, aborts and usage errors (its vendored click) pass through
            if _debug() or type(e).__module__.split(".")[0] in ("typer", "click"):
                raise
            error_line(one_line(e))
            raise typer.Exit(exit_code(e)) from None


app = typer.Typer(
    cls=_Group,
    help="Curate code-review edits into a clean fine-tuning corpus.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _main(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of a failure.")
    ] = False,
) -> None:
    """Curate code-review edits into a clean fine-tuning corpus."""
    _DEBUG["on"] = debug


ConfigOpt = Annotated[Path, typer.Option("--config", "-c", help="TOML config file.")]
SetOpt = Annotated[
    Optional[list[str]],  # noqa: UP045 - typer needs Optional here
    typer.Option("--set", "-s", help="Override a config key: --set ingest.batch_size=5000"),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Re-run even if inputs are unchanged.")]
PrintOpt = Annotated[
    bool,
    typer.Option(
        "--print-config", help="Print the effective config (every default) as TOML and exit."
    ),
]

# Stages in pipeline order. Each module has prepare(cfg) -> StageRun, run(cfg, stage_run) and
# print_summary(manifest), and raises its own Failed error for one-line user-facing failures.
STAGES = {
    "ingest": ingest_stage,
    "filter": filter_stage,
    "dedup": dedup_stage,
    "shapes": shapes_stage,
    "export": export_stage,
}


def _load(config: Path, overrides: list[str] | None, print_config: bool = False) -> Config:
    """The validated config; with --print-config, print it as TOML and exit 0 instead."""
    try:
        cfg = load_config(config, overrides or [])
    except ConfigError as e:
        _fail(str(e))
    if print_config:
        typer.echo(config_toml(cfg, str(config)), nl=False)
        raise typer.Exit(0)
    return cfg


def _fail(msg: str, code: int = USAGE) -> NoReturn:
    error_line(msg)
    raise typer.Exit(code)


def _run_stage(cfg: Config, name: str, force: bool) -> None:
    mod = STAGES[name]
    try:
        sr = mod.prepare(cfg)
        if not force and sr.is_fresh():
            console.print(f"[dim]{name}: unchanged inputs and config, skipped (--force to re-run)")
            mod.print_summary(read_manifest(sr.dir))
        else:
            mod.run(cfg, sr)
            m = read_manifest(sr.dir) or {}
            mod.print_summary(m)
            console.print(Text(f"{name}: wrote {sr.dir} in {m.get('wall_s', 0):.1f}s"))
    except StageFailed as e:
        _fail(str(e), e.exit_code)
    if name == "ingest":
        _check_ingest(read_manifest(sr.dir) or {})


def _lock(cfg: Config):
    """The run folder held for this command (inside run.root, one process at a time)."""
    return run_lock(cfg.run_dir, cfg.resolve(cfg.run.root))


def _one_stage(cfg: Config, name: str, force: bool) -> None:
    with _lock(cfg):
        _run_stage(cfg, name, force)


def _check_ingest(m: dict[str, Any]) -> None:
    """An ingest that gave no item fails the data (exit 1), naming what went wrong."""
    c = m.get("counts", {})
    if c.get("items_out", 0) > 0:
        return
    n = c.get("records_in", 0)
    if not n:
        raise DataError("ingest: the sources held no records; nothing to curate")
    raise DataError(
        f"ingest: every one of {n} records failed or was skipped ({c.get('errors_out', 0)} "
        f"errors, {c.get('skipped_out', 0)} skipped); see ingest/errors.parquet"
    )


@app.command()
def ingest(
    config: ConfigOpt, set_: SetOpt = None, force: ForceOpt = False, print_config: PrintOpt = False
) -> None:
    """Read every configured source into items.parquet (+ errors.parquet)."""
    _one_stage(_load(config, set_, print_config), "ingest", force)


@app.command("filter")
def filter_(
    config: ConfigOpt, set_: SetOpt = None, force: ForceOpt = False, print_config: PrintOpt = False
) -> None:
    """Apply the rule set: kept.parquet (+ flags) and rejected.parquet (+ rule, reason)."""
    _one_stage(_load(config, set_, print_config), "filter", force)


@app.command()
def dedup(
    config: ConfigOpt, set_: SetOpt = None, force: ForceOpt = False, print_config: PrintOpt = False
) -> None:
    """Remove exact and near duplicates (shingle Jaccard) from the filter stage's kept items."""
    _one_stage(_load(config, set_, print_config), "dedup", force)


@app.command()
def shapes(
    config: ConfigOpt, set_: SetOpt = None, force: ForceOpt = False, print_config: PrintOpt = False
) -> None:
    """Group items by edit shape (digits/SHAs normalised); annotate, cap or spread them."""
    _one_stage(_load(config, set_, print_config), "shapes", force)


FormatOpt = Annotated[
    Optional[str],  # noqa: UP045 - typer needs Optional here
    typer.Option("--format", help="plain, or sft (adds prompt/completion); default: config."),
]


@app.command()
def export(
    config: ConfigOpt,
    set_: SetOpt = None,
    force: ForceOpt = False,
    format_: FormatOpt = None,
    print_config: PrintOpt = False,
) -> None:
    """Split shapes' kept items into train/validation/test by whole group; Parquet + HF dataset."""
    extra = [f"export.format={format_}"] if format_ else []
    _one_stage(_load(config, [*(set_ or []), *extra], print_config), "export", force)


BaseOpt = Annotated[
    Optional[float],  # noqa: UP045 - typer needs Optional here
    typer.Option(help="Lowest threshold swept (default: dedup.edge_floor)."),
]
LabelsOpt = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option(help="CSV of labelled pairs: id_a,id_b,is_duplicate."),
]
NgramOpt = Annotated[
    Optional[list[int]],  # noqa: UP045
    typer.Option(help="Also re-score the pairs at this shingle size (repeatable)."),
]


@app.command()
def tune(
    run_dir: Annotated[Path, typer.Argument(help="A run folder with a finished dedup stage")],
    base: BaseOpt = None,
    step: Annotated[float, typer.Option(help="Threshold step.")] = 0.05,
    labels: LabelsOpt = None,
    ngram: NgramOpt = None,
) -> None:
    """Sweep the dedup threshold over the edges found; plot, borderline pairs, precision/recall."""
    from pipeline.dedup.tune import print_tune
    from pipeline.dedup.tune import tune as run_tune

    with run_lock(run_dir, create=False):
        res = run_tune(run_dir, base=base, step=step, labels=labels, ngrams=ngram)
    print_tune(res)


def _write_report(run_dir: Path, **kw: Any) -> None:
    from pipeline.report.report import write_report

    paths = write_report(run_dir, **kw)
    console.print(Text(f"report: wrote {paths['html']} (+ report.md, report.json, plots/)"))


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run folder, e.g. data/runs/sample")],
    scope: Annotated[str, typer.Option(help="Shape scope the sampling options use.")] = "repo",
    batch: Annotated[int, typer.Option(help="Items per optimizer step, for collisions.")] = 16,
    seed: Annotated[int, typer.Option(help="Seed of the random training order.")] = 0,
) -> None:
    """Write RUN_DIR/report/: report.md, report.html (self-contained), report.json, plots/."""
    with run_lock(run_dir, create=False):
        _write_report(run_dir, scope=scope, batch=batch, seed=seed)


@app.command("run")
def run_all(
    config: ConfigOpt, set_: SetOpt = None, force: ForceOpt = False, print_config: PrintOpt = False
) -> None:
    """Run every stage in order; unchanged stages are skipped."""
    cfg = _load(config, set_, print_config)
    with _lock(cfg):
        for name in STAGES:
            _run_stage(cfg, name, force)
        problems, _ = verify_run(cfg.run_dir)
        if problems:
            for p in problems:
                console.print(Text.assemble(("conservation: ", "red"), p))
            raise typer.Exit(DATA)
        console.print(
            Text.assemble(("run complete", "green"), f": {cfg.run_dir} (conservation verified)")
        )
        # --- the sampling report (pipeline/report/), written after every run ---
        _write_report(cfg.run_dir, window=cfg.shapes.window)


@app.command()
def verify(run_dir: Annotated[Path, typer.Argument(help="A run folder, e.g. data/runs/sample")]):
    """Check that every item that entered a stage left it in exactly one output."""
    problems, passed = verify_run(run_dir)
    for p in passed:
        console.print(Text.assemble(("ok ", "green"), p))
    if problems:
        for p in problems:
            console.print(Text.assemble(("FAIL ", "bold red"), p))
        console.print(
            Text.assemble(
                ("verify failed", "bold red"), f": {len(problems)} problem(s) in {run_dir}"
            )
        )
        raise typer.Exit(DATA)
    console.print(Text.assemble(("verify passed", "green"), f": {run_dir}"))


@app.command()
def why(
    run_dir: Annotated[Path, typer.Argument(help="A run folder, e.g. data/runs/sample")],
    ids: Annotated[list[str], typer.Argument(help="Item ids, or unique prefixes (8+ chars).")],
    json_: Annotated[bool, typer.Option("--json", help="Print a JSON list instead.")] = False,
) -> None:
    """Every decision the run made about each item: filter, dedup, shape group, split.

    Exits 1 when an id is unknown or a prefix ambiguous."""
    import json

    from rich.console import Console

    from pipeline import why as why_mod

    if not run_dir.is_dir():
        _fail(f"{run_dir}: no such run folder")
    results = why_mod.explain(run_dir, ids)
    if json_:
        typer.echo(json.dumps(results, indent=2, ensure_ascii=False))
    else:
        out = Console(soft_wrap=True, highlight=False, emoji=False, markup=False)
        for line in why_mod.render(results):
            out.print(line)
    if why_mod.unresolved(results):
        raise typer.Exit(1)


@app.command("smoke-train")
def smoke_train(
    run_dir: Annotated[Path, typer.Argument(help="A run folder with a finished shapes stage")],
    model: Annotated[str, typer.Option(help="Local HF checkpoint folder; default: tiny.")] = "",
    lr: Annotated[float, typer.Option(help="AdamW learning rate.")] = 2e-4,
    micro_batch: Annotated[int, typer.Option(help="Items per micro-batch.")] = 1,
    grad_accum: Annotated[int, typer.Option(help="Micro-batches per step.")] = 16,
    max_len: Annotated[int, typer.Option(help="Tokens per item after truncation.")] = 1024,
    seed: Annotated[int, typer.Option(help="Seed of init and order.")] = 0,
    probe_batch: Annotated[int, typer.Option(help="K > 0: bisect non-finite K-batches.")] = 0,
    sweep: Annotated[str, typer.Option(help="KEY=V1,V2: one loop per value.")] = "",
    eval_items: Annotated[int, typer.Option(help="Items generated for edit similarity.")] = 32,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda.")] = "auto",
) -> None:
    """LoRA-train every curated item (RUN_DIR/smoke/); explain any non-finite step. Slow."""
    from pipeline.config import SmokeConfig, validate
    from pipeline.train import stage as smoke

    options = {
        "model": model,
        "lr": lr,
        "micro_batch": micro_batch,
        "grad_accum": grad_accum,
        "max_len": max_len,
        "seed": seed,
        "probe_batch": probe_batch,
        "eval_items": eval_items,
        "device": device,
    }
    sc = validate(SmokeConfig, options, "smoke-train")  # a bad option: one line, exit 2
    with run_lock(run_dir, create=False):
        summary = smoke.run(run_dir, sc, smoke.parse_sweep(sweep) if sweep else None)
    smoke.print_summary(summary)
    console.print(Text(f"smoke-train: wrote {run_dir / 'smoke'}"))
    if summary["verdict"] != "trains":
        raise typer.Exit(1)


if __name__ == "__main__":  # pragma: no cover
    app()

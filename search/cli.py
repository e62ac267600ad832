"""The `nas` command line (Typer). TensorFlow is imported only by commands that need it."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console

from .errors import NasError, SearchInterrupted

app = typer.Typer(
    name="nas",
    help="Hardware-aware neural architecture search for TensorFlow/Keras.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)
for _console in (out, err):
    # Logs and pipes get Rich's 80 columns by default, which wraps every table row.
    if not _console.is_terminal:
        _console.width = 160

StorageOpt = Annotated[
    str | None,
    typer.Option("--storage", help="Database URL (default: $NAS_STORAGE or sqlite:///nas.db)."),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show TensorFlow's logs and full tracebacks.")]


class Sampler(StrEnum):
    tpe = "tpe"
    nsga2 = "nsga2"
    gp = "gp"
    random = "random"


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


@app.command()
def search(
    space: Annotated[str, typer.Argument(help="Space file, or a preset name (mobilenet, tiny).")],
    study: Annotated[str | None, typer.Option(help="Study name (default: the space's name).")] = None,
    storage: StorageOpt = None,
    trials: Annotated[
        int | None, typer.Option(min=1, help="Total budget of finished trials (default: the space's).")
    ] = None,
    timeout: Annotated[float | None, typer.Option(min=0, help="Start no trial after S seconds.")] = None,
    sampler: Annotated[Sampler | None, typer.Option(help="Sampler (default: the space's).")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampler seed (default: the space's).")] = None,
    cache: Annotated[bool, typer.Option(help="Reuse earlier measurements of the same network on this device.")] = True,
    screening: Annotated[
        bool, typer.Option(help="Reject candidates that break a constraint before training them.")
    ] = True,
    max_consecutive_failures: Annotated[
        int, typer.Option(min=1, help="Stop the search after this many failed trials in a row.")
    ] = 5,
    debug: DebugOpt = False,
) -> None:
    """Search SPACE; running it again resumes the study and runs only what is missing."""
    from nas.storage import resolve_storage_url

    from . import quiet
    from .space import load_space

    quiet.set_debug(debug)
    spec = load_space(space)
    url = resolve_storage_url(storage)
    quiet.import_tensorflow()

    from .display import LiveSearchView
    from .driver import SearchOptions, run_search
    from .pareto import pareto_records

    options = SearchOptions(
        storage=url,
        study_name=study or spec.name,
        trials=trials or spec.spec.search.trials,
        sampler=(sampler.value if sampler else spec.spec.search.sampler),
        seed=spec.spec.search.seed if seed is None else seed,
        timeout=timeout,
        cache=cache,
        screening=screening,
        max_consecutive_failures=max_consecutive_failures,
    )
    objectives = list(spec.spec.objectives)
    outcome = run_search(spec, options, LiveSearchView(err, objectives))
    records = pareto_records(outcome.study)
    if records:
        title = f"Pareto front of '{options.study_name}' ({outcome.finished} finished trials, {url.masked})"
        show_pareto(records, objectives, title)
    if outcome.stopped_by == "failures":
        raise NasError(
            f"stopped after {options.max_consecutive_failures} failed trials in a row; "
            "see fail_reason of the last trials (`nas pareto` / `optuna trials`) or run with --debug"
        )
    if outcome.stopped_by == "timeout":
        err.print(f"Timeout reached: {outcome.finished} of {outcome.budget} trials finished; run again to continue.")


@app.command()
def status(storage: StorageOpt = None, debug: DebugOpt = False) -> None:
    """List the studies in the storage with their progress."""
    from rich.table import Table

    from nas.storage import open_storage, resolve_storage_url

    from . import quiet
    from .status import cache_summary, study_summaries

    quiet.set_debug(debug)
    url = resolve_storage_url(storage)
    opened = open_storage(url, create=False)
    rows = study_summaries(opened)
    cache = cache_summary(opened)
    if cache is not None:
        out.print(
            f"Measurement cache: {cache.entries} measurements, {cache.hits} hits "
            f"({cache.seconds_saved:.1f} s of measuring saved)",
            highlight=False,
        )
    if not rows:
        out.print(f"No studies in {url.masked}.")
        return
    out.print(f"Studies in {url.masked}", highlight=False)
    table = Table()
    columns = (
        "study",
        "finished",
        "budget",
        "running",
        "failed",
        "screened",
        "queued",
        "pareto",
        "best accuracy",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "study" else "right")
    for r in rows:
        best = r["best_accuracy"]
        table.add_row(
            r["study"],
            str(r["finished"]),
            str(r["budget"] or "-"),
            str(r["running"]),
            str(r["failed"]),
            str(r["screened"]),
            str(r["queued"]),
            str(r["pareto"]),
            "-" if best is None else f"{best:.4f}",
        )
    out.print(table)


@app.command()
def pareto(
    study: Annotated[str, typer.Argument(help="Study name.")],
    storage: StorageOpt = None,
    format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
    debug: DebugOpt = False,
) -> None:
    """Print the Pareto front of STUDY: objectives, params, FLOPs and parameters."""
    from nas.storage import open_storage, resolve_storage_url

    from . import quiet
    from .pareto import objective_names, pareto_records, to_csv, to_json
    from .status import load_existing_study

    quiet.set_debug(debug)
    url = resolve_storage_url(storage)
    loaded = load_existing_study(open_storage(url, create=False), study, url)
    records = pareto_records(loaded)
    if format == Format.json:
        print(to_json(records))
    elif format == Format.csv:
        sys.stdout.write(to_csv(records))
    elif not records:
        out.print(f"Study '{study}' has no finished trials yet.")
    else:
        show_pareto(records, objective_names(loaded), f"Pareto front of '{study}' ({url.masked})")


def show_pareto(records: list[dict[str, Any]], objectives: list[str], title: str) -> None:
    from .display import parameter_lines, pareto_table

    out.print(title, highlight=False)
    out.print(pareto_table(records, objectives))
    out.print("Parameters:", highlight=False)
    for line in parameter_lines(records):
        out.print("  " + line, highlight=False)


def main() -> None:
    """Entry point: one-line errors with exit status 2 for bad input, tracebacks only with --debug."""
    args = sys.argv[1:] or ["--help"]
    debug = "--debug" in args
    command = typer.main.get_command(app)
    try:
        command.main(args=args, prog_name="nas", standalone_mode=False)
    except NasError as exc:
        if debug:
            err.print_exception()
        err.print(f"Error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: unknown option, bad value...
        err.print(f"Error: {exc.format_message()}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Abort:
        err.print("Interrupted.")
        sys.exit(130)
    except SearchInterrupted as exc:
        err.print(f"Interrupted: {exc} Run the same command again to resume.")
        sys.exit(130)
    except KeyboardInterrupt:
        err.print("Interrupted.")
        sys.exit(130)

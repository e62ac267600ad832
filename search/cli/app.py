"""The `nas` command line (Typer). TensorFlow is imported only by commands that need it."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from nas.errors import NasError, SearchInterrupted, one_line
from nas.search import strategies
from nas.search.cli.console import err, message, out
from nas.search.cli.ending import front_notes, report_end, show_pareto, show_table, warn_unused_gpus
from nas.search.cli.options import (
    ArtifactsOpt,
    BestOpt,
    DebugOpt,
    SpaceArg,
    StorageOpt,
    WhereOpt,
    WideOpt,
    check_study,
)
from nas.search.records import SamplerName

if TYPE_CHECKING:
    from nas.storage import StorageURL

app = typer.Typer(
    name="nas",
    help="Hardware-aware neural architecture search for TensorFlow/Keras.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


DEFAULT_RECYCLE_AFTER = 50  # trials per pool worker process before a fresh one takes over


def _print_version(asked: bool) -> None:
    if asked:
        from nas import __version__  # the installed distribution's, from importlib.metadata

        print(f"nas {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print nas's version and exit."),
    ] = False,
) -> None:
    """The options of `nas` itself, before any command."""


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


@app.command()
def search(
    space: SpaceArg,
    study: Annotated[
        str | None, typer.Option(help="Study name (default: the space's name).", callback=check_study)
    ] = None,
    storage: StorageOpt = None,
    trials: Annotated[
        int | None, typer.Option(min=1, help="Total budget of finished trials (default: the space's).")
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(min=0, help="Start no trial after S seconds (a supernet's training included).")
    ] = None,
    sampler: Annotated[
        SamplerName | None,
        typer.Option(help="Sampler (default: the space's; gp needs PyTorch, not installed with nas)."),
    ] = None,
    seed: Annotated[int | None, typer.Option(min=0, max=2**32 - 1, help="Sampler seed (default: the space's).")] = None,
    cache: Annotated[bool, typer.Option(help="Reuse earlier measurements of the same network on this device.")] = True,
    screening: Annotated[
        bool, typer.Option(help="Reject candidates that break a constraint before training them.")
    ] = True,
    max_consecutive_failures: Annotated[
        int, typer.Option(min=1, help="Stop the search after this many failed trials in a row.")
    ] = 5,
    workers: Annotated[
        int | None,
        typer.Option(min=1, help="Worker processes on this machine (default: 1, or one per GPU of --gpus)."),
    ] = None,
    gpus: Annotated[str | None, typer.Option(help="GPUs for the workers, e.g. 0,1 (round-robin).")] = None,
    workers_per_gpu: Annotated[
        int | None, typer.Option(min=1, help="Workers sharing each GPU, each with a memory cap.")
    ] = None,
    recycle_after: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Pool workers (--workers, --gpus) exit after N trials and a fresh process takes over "
            "(bounds memory; 0: never; default 50).",
        ),
    ] = None,
    weights: Annotated[
        bool, typer.Option(help="Keep trained models of the Pareto front (and --keep-top-k) for `nas export`.")
    ] = True,
    keep_top_k: Annotated[
        int, typer.Option(min=0, help="Also keep the weights of the K most accurate trials, dominated or not.")
    ] = 0,
    artifacts: ArtifactsOpt = None,
    wide: WideOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Search SPACE; running it again resumes the study and runs only what is missing."""
    from nas.search import runtime
    from nas.search.engine import SearchOptions
    from nas.search.hardware import require_visible_gpus, visible_to_this_process
    from nas.search.space import load_space
    from nas.search.workers import parse_gpus, plan_workers, uncapped_shared_gpus
    from nas.storage import check_artifact_root, open_device_profile, resolve_storage_url

    runtime.set_debug(debug)
    spec = load_space(space)
    url = resolve_storage_url(storage)
    check_artifact_root(url, os.path.abspath(artifacts) if artifacts else None)  # before TensorFlow loads
    if cache and (profile := open_device_profile()):  # a bad one is told before any study is touched
        profile.engine.dispose()
    gpu_list = parse_gpus(gpus)
    if workers_per_gpu is not None and gpu_list is None:
        raise NasError("--workers-per-gpu needs --gpus")
    pooled = (workers or 1) > 1 or gpu_list is not None
    if recycle_after is not None and not pooled:
        # A single in-process search has no fresh process to hand over to.
        raise NasError("--recycle-after applies to pool workers: add --workers N (or --gpus)")
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
        keep_weights=weights,
        keep_top_k=keep_top_k,
        artifacts=os.path.abspath(artifacts) if artifacts else None,
    )
    objectives = list(spec.spec.objectives)
    if pooled:
        from nas.search.cli.display_pool import PoolLiveView
        from nas.search.workers import WorkerPool

        physical = None
        if gpu_list is not None:
            physical = visible_to_this_process(gpu_list)
        placements = plan_workers(workers, physical, workers_per_gpu)
        for line in uncapped_shared_gpus(placements):
            err.print(line, markup=False, highlight=False, soft_wrap=True)
        if physical is not None:
            # Before any trial: a pool on GPUs TensorFlow cannot see would measure the CPU.
            require_visible_gpus(physical, ",".join(gpu_list or []))
        pool = WorkerPool(
            options,
            placements,
            PoolLiveView(err, objectives, timeout=options.timeout),
            recycle_after=DEFAULT_RECYCLE_AFTER if recycle_after is None else recycle_after,
            debug=debug,
        )
        outcome = pool.run(spec)
        stopped_by, finished, budget = outcome.stopped_by, outcome.finished, outcome.budget
        pool.finish(spec, stopped_by)  # the strategy's after-search steps, in a worker process
    else:
        runtime.import_tensorflow()
        warn_unused_gpus()
        from nas.search.cli.display import LiveSearchView
        from nas.search.engine import run_search
        from nas.search.strategies import strategy_for

        # after-search steps included
        single = run_search(
            spec, options, LiveSearchView(err, objectives, timeout=options.timeout), strategy=strategy_for(spec)
        )
        stopped_by, finished, budget = single.stopped_by, single.finished, single.budget
    report_end(options, stopped_by, finished, budget, show_front=True, wide=wide)


def _confirm_here(url: StorageURL, name: str, *, cache: bool = True) -> None:
    """`nas pareto --confirm`: the after-search confirmation, in this process (TensorFlow loaded)."""
    from dataclasses import replace

    from nas.search.cli.display import ConsoleEvents
    from nas.search.engine import CONFIRM, join_study

    joined = join_study(url, name)
    CONFIRM.run(replace(joined, options=replace(joined.options, cache=cache)), ConsoleEvents(err))


@app.command()
def status(
    storage: StorageOpt = None,
    format: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
    wide: WideOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List the studies in the storage with their progress."""
    from nas.search import runtime
    from nas.search.results import cache_summary, devices_line, study_summaries
    from nas.storage import open_storage, resolve_storage_url

    runtime.set_debug(debug)
    url = resolve_storage_url(storage)
    opened = open_storage(url, create=False)
    rows = study_summaries(opened)
    cache = cache_summary(opened)
    if format != Format.table:
        import json
        from dataclasses import asdict

        print(json.dumps({"storage": url.masked, "studies": rows, "cache": asdict(cache) if cache else None}, indent=2))
        return
    if cache is not None:
        out.print(
            f"Measurement cache: {cache.entries} measurements, {cache.hits} hits "
            f"({cache.seconds_saved:.1f} s of measuring saved)",
            highlight=False,
        )
    if not rows:
        out.print(f"No studies in {url.masked}.")
        return
    from nas.search.cli.tables import STATUS_LEGEND, status_columns

    out.print(f"Studies in {url.masked}", highlight=False)
    show_table(status_columns(rows, wide=wide), STATUS_LEGEND)
    for row in rows:  # a study measured on several devices, named with its trials on each
        line = devices_line([(d["device"], d["trials"]) for d in row["devices"]], row["fronts"] > 1)
        if line:
            out.print(f"Study '{row['study']}' was {line}.", markup=False, highlight=False, soft_wrap=True)


@app.command()
def pareto(
    study: Annotated[str, typer.Argument(help="Study name.")],
    storage: StorageOpt = None,
    format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.table,
    confirm: Annotated[
        bool,
        typer.Option(
            "--confirm",
            help="First measure the front and the trials within noise of it again, together, on this machine's "
            "device, and store the figures (runs TensorFlow); a study measured on several devices then shows one "
            "front, by these figures.",
        ),
    ] = False,
    cache: Annotated[
        bool, typer.Option(help="With --confirm: read the device's reference baseline from the cache.")
    ] = True,
    where: WhereOpt = None,
    best: BestOpt = None,
    wide: WideOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Print the Pareto front of STUDY: objectives, throughput intervals, confirmed figures, params, FLOPs."""
    from nas.search import runtime
    from nas.search.engine import load_existing_study
    from nas.search.results import Choice, objective_names, screened_line, stopped_early_line, to_csv, to_json
    from nas.storage import open_storage, resolve_storage_url

    runtime.set_debug(debug)
    choice = Choice.parse(where, best)  # bad input is said before anything is opened or measured
    url = resolve_storage_url(storage)
    loaded = load_existing_study(open_storage(url, create=False), study, url)
    if confirm:
        runtime.import_tensorflow()
        warn_unused_gpus()
        _confirm_here(url, study, cache=cache)
        loaded = load_existing_study(open_storage(url, create=False), study, url)
    records = choice.records(loaded, remeasured=confirm)
    notes = front_notes(loaded, records, remeasured=confirm)
    if format == Format.json:
        print(to_json(records))
    elif format == Format.csv:
        sys.stdout.write(to_csv(records))
    elif not records:
        out.print(f"Study '{study}' has no finished trials yet.")
    else:
        for note in notes:
            out.print(note, markup=False, highlight=False, soft_wrap=True)
        notes = []
        title = f"Pareto front of '{study}'" + (f", {choice.describe()}" if choice else "") + f" ({url.masked})"
        show_pareto(records, objective_names(loaded), title, wide=wide)
        trials = loaded.get_trials(deepcopy=False)
        for line in (screened_line(trials), stopped_early_line(trials)):
            if line:
                out.print(line, highlight=False)
    for note in notes:  # beside JSON or CSV on stdout, said on stderr
        err.print(note, markup=False, highlight=False, soft_wrap=True)


def _add_subcommands() -> None:
    from nas.search.cli.export import export
    from nas.search.cli.finetune import finetune
    from nas.search.cli.report import report
    from nas.search.cli.space import space_app
    from nas.search.cli.train import train
    from nas.search.cli.worker import worker

    app.command()(worker)
    app.command()(train)
    app.command()(export)
    app.command()(finetune)
    app.command()(report)
    app.add_typer(space_app, name="space")


_add_subcommands()


def main() -> None:
    """Entry point: one-line errors with exit status 2 for bad input, tracebacks only with --debug."""
    args = sys.argv[1:] or ["--help"]
    debug = "--debug" in args
    command = typer.main.get_command(app)
    # The strategies a space may name, from the registry as it is now (a plugin may add one).
    if (searching := getattr(command, "commands", {}).get("search")) is not None:
        names = ", ".join(strategies.names())
        searching.help = (
            f"{(search.__doc__ or '').strip()} What scores a trial is the space's search.strategy: {names}."
        )
    try:
        status = command.main(args=args, prog_name="nas", standalone_mode=False)
        if isinstance(status, int) and status:
            sys.exit(status)  # typer.Exit(code) comes back as a return value in this mode
    except NasError as exc:
        if debug:
            err.print_exception()
        err.print(f"Error: {message(exc)}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # usage errors: unknown option, bad value...
        # One line, like every error: Typer lists the choices of a missing option one a line.
        text = one_line(" ".join(line.strip() for line in exc.format_message().splitlines()))
        err.print(f"Error: {text}", markup=False, highlight=False, soft_wrap=True)
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
    finally:
        # The command is done and what it finished is saved; a Ctrl-C while the interpreter
        # shuts down (seconds, with TensorFlow loaded) would otherwise end it by SIGINT with
        # an unhandled KeyboardInterrupt instead of exit status 130.
        signal.signal(signal.SIGINT, _exit_interrupted)


def _exit_interrupted(signum: int, frame: object) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(130)

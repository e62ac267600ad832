"""The `nas` command line (Typer). TensorFlow is imported only by commands that need it."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from nas.errors import NasError, SearchInterrupted, one_line
from nas.search.cli.console import err, message, out
from nas.search.cli.finetune import finetune_here, finetune_in_child
from nas.search.cli.options import ArtifactsOpt, DebugOpt, RecycleOpt, StorageOpt, WideOpt, check_study
from nas.search.records import PipeEvent, SamplerName, StoppedBy

if TYPE_CHECKING:
    from nas.search.engine import SearchOptions
    from nas.search.space import SearchSpace
    from nas.storage import StorageURL

app = typer.Typer(
    name="nas",
    help="Hardware-aware neural architecture search for TensorFlow/Keras.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


DEFAULT_RECYCLE_AFTER = 50  # trials per pool worker process before a fresh one takes over


class Format(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


@app.command()
def search(
    space: Annotated[str, typer.Argument(help="Space file, or a preset name (mobilenet, tiny).")],
    study: Annotated[
        str | None, typer.Option(help="Study name (default: the space's name).", callback=check_study)
    ] = None,
    storage: StorageOpt = None,
    trials: Annotated[
        int | None, typer.Option(min=1, help="Total budget of finished trials (default: the space's).")
    ] = None,
    timeout: Annotated[float | None, typer.Option(min=0, help="Start no trial after S seconds.")] = None,
    sampler: Annotated[SamplerName | None, typer.Option(help="Sampler (default: the space's).")] = None,
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
    from nas.search.hardware.gpus import require_visible_gpus, visible_to_this_process
    from nas.search.space import load_space
    from nas.search.workers import parse_gpus, plan_workers
    from nas.search.workers.placement import uncapped_shared_gpus
    from nas.storage import open_device_profile, resolve_storage_url

    runtime.set_debug(debug)
    spec = load_space(space)
    url = resolve_storage_url(storage)
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
            PoolLiveView(err, objectives),
            recycle_after=DEFAULT_RECYCLE_AFTER if recycle_after is None else recycle_after,
            debug=debug,
        )
        outcome = pool.run(spec)
        stopped_by, finished, budget = outcome.stopped_by, outcome.finished, outcome.budget
        if _finetunes(spec, stopped_by):
            finetune_in_child(options, placements[0].env())
        if _confirms(spec, stopped_by):
            _confirm_in_child(options, placements[0].env())
    else:
        runtime.import_tensorflow()
        _warn_unused_gpus()
        from nas.search.cli.display import LiveSearchView
        from nas.search.engine import run_search

        single = run_search(spec, options, LiveSearchView(err, objectives))
        stopped_by, finished, budget = single.stopped_by, single.finished, single.budget
        if _finetunes(spec, stopped_by):
            try:
                finetune_here(options.storage, options.study_name, artifacts=options.artifacts)
            except NasError as exc:  # as in a pool: the search itself is complete and saved
                again = f"run `nas finetune {options.study_name}`"
                err.print(f"Warning: fine-tuning the front failed ({one_line(str(exc))}); {again}", highlight=False)
        if _confirms(spec, stopped_by):
            _confirm_here(options.storage, options.study_name, cache=options.cache)
    _report_end(options, stopped_by, finished, budget, show_front=True, wide=wide)


def _ended_normally(stopped_by: StoppedBy) -> bool:
    """Its budget or --timeout; not Ctrl-C or a run of failures."""
    return stopped_by in (StoppedBy.BUDGET, StoppedBy.TIMEOUT)


def _finetunes(space: SearchSpace, stopped_by: StoppedBy) -> bool:
    """Fine-tune a supernet study's front after a search that ended normally (before the
    confirmation, which measures the front again)."""
    search = space.spec.search
    return search.strategy == "supernet" and search.supernet.finetune.epochs > 0 and _ended_normally(stopped_by)


def _confirms(space: SearchSpace, stopped_by: StoppedBy) -> bool:
    """Confirm the front after a search that ended normally (not after Ctrl-C or failures)."""
    measure = space.spec.measure
    return measure.confirm and measure.reference and _ended_normally(stopped_by)


def _confirm_here(url: StorageURL, name: str, *, cache: bool = True) -> None:
    """Measure the front again in this process (TensorFlow loaded) and store the figures."""
    from nas.search.engine import load_existing_study
    from nas.search.hardware import HardwareProfiler
    from nas.search.results.confirm import confirm_front, study_space
    from nas.storage import MeasurementCache, open_storage

    storage = open_storage(url, create=False)
    study = load_existing_study(storage, name, url)
    measure = study_space(study).spec.measure
    profiler = HardwareProfiler(measure, MeasurementCache(storage.engine) if cache else None)
    confirm_front(study, profiler, lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True))


def _confirm_in_child(options: SearchOptions, placement_env: dict[str, str]) -> None:
    """The pool's parent never loads TensorFlow: `nas pareto --confirm` runs on the first
    worker's device. A failure is a warning: the search itself is complete and saved."""
    import subprocess

    env = os.environ | placement_env | {"NAS_STORAGE": options.storage.raw}
    command = [sys.executable, "-m", "nas", "pareto", options.study_name, "--confirm", "--format", "json"]
    command += [] if options.cache else ["--no-cache"]
    result = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in result.stderr.splitlines():
        if line.startswith("Confirming") or line.startswith("Warning"):
            err.print(line, markup=False, highlight=False, soft_wrap=True)
    if result.returncode != 0:
        last = next((line for line in reversed(result.stderr.splitlines()) if line.strip()), "no output")
        err.print(f"Warning: confirming the front failed ({last}); run `nas pareto {options.study_name} --confirm`")


def _warn_unused_gpus() -> None:
    from nas.search.hardware.gpus import check_placed_gpu

    if warning := check_placed_gpu():
        err.print(warning, markup=False, highlight=False, soft_wrap=True)


def _report_end(
    options: SearchOptions, stopped_by: StoppedBy, finished: int, budget: int, *, show_front: bool, wide: bool = False
) -> None:
    """The Pareto front, then why the search stopped; exit status 130 for an interrupt and 2
    for a runaway of failures, so scripts can tell."""
    from nas.search.engine import load_existing_study
    from nas.search.results import objective_names, pareto_records, stopped_early_line
    from nas.storage import open_storage

    if show_front:
        loaded = load_existing_study(open_storage(options.storage, create=False), options.study_name, options.storage)
        records = pareto_records(loaded)
        if records:
            title = f"Pareto front of '{options.study_name}' ({finished} finished trials, {options.storage.masked})"
            show_pareto(records, objective_names(loaded), title, wide=wide)
        if line := stopped_early_line(loaded.get_trials(deepcopy=False)):
            err.print(line, highlight=False)
    if stopped_by == StoppedBy.FAILURES:
        raise NasError(
            f"stopped after {options.max_consecutive_failures} failed trials in a row; "
            "see fail_reason of the last trials (`nas pareto` / `optuna trials`) or run with --debug"
        )
    if stopped_by == StoppedBy.TIMEOUT:
        err.print(f"Timeout reached: {finished} of {budget} trials finished; run again to continue.")
    if stopped_by == StoppedBy.INTERRUPTED:
        err.print(
            f"Stopped: {finished} of {budget} trials finished and saved, none left running. "
            "Run the same command again to resume."
        )
        raise typer.Exit(130)
    if stopped_by == StoppedBy.CRASHED:
        raise NasError(f"every worker ended before the budget ({finished} of {budget} finished); see the lines above")


@app.command()
def worker(
    study: Annotated[str, typer.Option("--study", help="Name of a study `nas search` created.", callback=check_study)],
    storage: StorageOpt = None,
    timeout: Annotated[float | None, typer.Option(min=0, help="Start no trial after S seconds.")] = None,
    recycle_after: RecycleOpt = 0,
    artifacts: ArtifactsOpt = None,
    index: Annotated[int | None, typer.Option(hidden=True)] = None,
    report_fd: Annotated[int | None, typer.Option(hidden=True)] = None,
    debug: DebugOpt = False,
) -> None:
    """Join a running study from this or any machine and run its trials until its budget is done.

    The space, sampler and budget come from the study; with --recycle-after N the process
    exits after N trials (a pool or a supervisor such as systemd starts a fresh one).
    """
    from nas.search import runtime
    from nas.search.runtime import ENV_INDEX
    from nas.storage import resolve_storage_url

    runtime.set_debug(debug)
    url = resolve_storage_url(storage)
    if index is None:
        # The sampler's seed must differ from every other worker's; a pool numbers its workers.
        index = int(os.environ.get(ENV_INDEX) or os.getpid())
    if artifacts:
        # Read where weights are stored (nas.storage.weights); a pool passes it the same way.
        os.environ["NAS_ARTIFACTS"] = os.path.abspath(artifacts)
    if report_fd is None:
        _worker_interactive(url, study, timeout, recycle_after, index)
    else:
        _worker_in_pool(url, study, timeout, recycle_after, index, report_fd)


def _worker_interactive(url: StorageURL, study: str, timeout: float | None, recycle_after: int, index: int) -> None:
    from nas.search import runtime
    from nas.search.engine import join_study
    from nas.storage import open_device_profile

    joined = join_study(url, study, timeout)
    if joined.options.cache and (profile := open_device_profile()):  # told before TensorFlow loads
        profile.engine.dispose()
    runtime.import_tensorflow()
    _warn_unused_gpus()
    from nas.search.cli.display import LiveSearchView
    from nas.search.engine import run_worker

    objectives = list(joined.space.spec.objectives)
    outcome = run_worker(
        joined, LiveSearchView(err, objectives), worker_index=index, recycle_after=recycle_after or None
    )
    _report_end(joined.options, outcome.stopped_by, outcome.finished, outcome.budget, show_front=False)
    if outcome.stopped_by == StoppedBy.RECYCLE:
        err.print(f"Recycled after {outcome.ran + outcome.failed} trials; start the worker again to continue.")


def _worker_in_pool(
    url: StorageURL, study: str, timeout: float | None, recycle_after: int, index: int, fd: int
) -> None:
    """A pool's worker: everything, errors included, goes to the parent over the pipe."""
    import signal

    from nas.search import runtime
    from nas.search.workers import PipeEvents

    # A Ctrl-C (or the stop-now SIGTERM) forwarded while this worker is still starting
    # (importing TensorFlow, loading data) means "start no trial": note it instead of dying
    # with a KeyboardInterrupt or by the signal.
    early_stop: list[bool] = []
    signal.signal(signal.SIGINT, lambda *_: early_stop.append(True))
    signal.signal(signal.SIGTERM, lambda *_: early_stop.append(True))
    events = PipeEvents(fd)
    parent = os.getppid()
    try:
        from nas.search.engine import join_study

        joined = join_study(url, study, timeout)
        runtime.import_tensorflow()
        from nas.search.hardware.gpus import check_placed_gpu

        check_placed_gpu()  # a worker placed on a GPU it cannot see stops here (ERROR to the parent)
        from nas.search.engine import run_worker

        outcome = run_worker(
            joined,
            events,
            worker_index=index,
            recycle_after=recycle_after or None,
            keep_going=lambda: not early_stop and not events.parent_gone and os.getppid() == parent,
        )
        stopped_by = (
            StoppedBy.INTERRUPTED if early_stop and outcome.stopped_by == StoppedBy.ORPHANED else outcome.stopped_by
        )
        events.send(PipeEvent.OUTCOME, stopped_by=stopped_by, ran=outcome.ran, failed=outcome.failed)
    except NasError as exc:
        events.send(PipeEvent.ERROR, text=message(exc))
    except (SearchInterrupted, KeyboardInterrupt) as exc:
        events.send(PipeEvent.OUTCOME, stopped_by=StoppedBy.STOPPED, text=message(exc))


@app.command()
def status(
    storage: StorageOpt = None,
    format: Annotated[Format, typer.Option("--format", help="table or json.")] = Format.table,
    wide: WideOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List the studies in the storage with their progress."""
    from nas.search import runtime
    from nas.search.results import cache_summary, study_summaries
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
            "device, and store the figures (runs TensorFlow).",
        ),
    ] = False,
    cache: Annotated[
        bool, typer.Option(help="With --confirm: read the device's reference baseline from the cache.")
    ] = True,
    wide: WideOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Print the Pareto front of STUDY: objectives, throughput intervals, confirmed figures, params, FLOPs."""
    from nas.search import runtime
    from nas.search.engine import load_existing_study
    from nas.search.results import objective_names, pareto_records, stopped_early_line, to_csv, to_json
    from nas.storage import open_storage, resolve_storage_url

    runtime.set_debug(debug)
    url = resolve_storage_url(storage)
    loaded = load_existing_study(open_storage(url, create=False), study, url)
    if confirm:
        runtime.import_tensorflow()
        _warn_unused_gpus()
        _confirm_here(url, study, cache=cache)
        loaded = load_existing_study(open_storage(url, create=False), study, url)
    records = pareto_records(loaded)
    if format == Format.json:
        print(to_json(records))
    elif format == Format.csv:
        sys.stdout.write(to_csv(records))
    elif not records:
        out.print(f"Study '{study}' has no finished trials yet.")
    else:
        show_pareto(records, objective_names(loaded), f"Pareto front of '{study}' ({url.masked})", wide=wide)
        if line := stopped_early_line(loaded.get_trials(deepcopy=False)):
            out.print(line, highlight=False)


def show_pareto(records: list[dict[str, Any]], objectives: list[str], title: str, *, wide: bool = False) -> None:
    from nas.search.cli.tables import PARETO_LEGEND, PARETO_LEGEND_WIDE, parameter_lines, pareto_columns

    out.print(title, highlight=False)
    show_table(pareto_columns(records, objectives, wide=wide), PARETO_LEGEND_WIDE if wide else PARETO_LEGEND)
    out.print("Parameters:", highlight=False)
    for line in parameter_lines(records):
        out.print("  " + line, highlight=False, soft_wrap=True)


def show_table(columns: list[Any], legend: str) -> None:
    """A table that fits the terminal whole (tables.fitted), the legend, and what was left out."""
    from nas.search.cli.tables import fitted, not_shown_line, print_table

    layout = fitted(columns, out.width)
    print_table(out, layout)
    out.print(legend, highlight=False, soft_wrap=True)
    if line := not_shown_line(layout.dropped):
        out.print(line, highlight=False, soft_wrap=True)


def _add_subcommands() -> None:
    from nas.search.cli.export import export
    from nas.search.cli.finetune import finetune
    from nas.search.cli.report import report
    from nas.search.cli.space import space_app

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

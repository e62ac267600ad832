"""`nas worker`: join a study from this or any machine; a pool's workers and its after-search
process are the same command with the pipe to their parent."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from nas.errors import NasError, SearchInterrupted
from nas.search.cli.console import err, message
from nas.search.cli.ending import report_end, warn_unused_gpus
from nas.search.cli.options import ArtifactsOpt, DebugOpt, RecycleOpt, StorageOpt, check_study
from nas.search.records import PipeEvent, StoppedBy

if TYPE_CHECKING:
    from nas.storage import StorageURL


def worker(
    study: Annotated[str, typer.Option("--study", help="Name of a study `nas search` created.", callback=check_study)],
    storage: StorageOpt = None,
    timeout: Annotated[float | None, typer.Option(min=0, help="Start no trial after S seconds.")] = None,
    recycle_after: RecycleOpt = 0,
    artifacts: ArtifactsOpt = None,
    index: Annotated[int | None, typer.Option(hidden=True)] = None,
    report_fd: Annotated[int | None, typer.Option(hidden=True)] = None,
    finish: Annotated[bool, typer.Option("--finish", hidden=True)] = False,
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
    if finish:
        _finish_in_pool(url, study, report_fd)
    elif report_fd is None:
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
    warn_unused_gpus()
    from nas.search.cli.display import LiveSearchView
    from nas.search.engine import run_worker
    from nas.search.strategies import strategy_for

    objectives = list(joined.space.spec.objectives)
    strategy = strategy_for(joined.space)
    outcome = run_worker(
        joined,
        LiveSearchView(err, objectives, timeout=joined.options.timeout),
        strategy.evaluation,
        worker_index=index,
        recycle_after=recycle_after or None,
    )
    report_end(joined.options, outcome.stopped_by, outcome.finished, outcome.budget, show_front=False)
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
        from nas.search.hardware import check_placed_gpu

        check_placed_gpu()  # a worker placed on a GPU it cannot see stops here (ERROR to the parent)
        from nas.search.engine import run_worker
        from nas.search.strategies import strategy_for

        outcome = run_worker(
            joined,
            events,
            strategy_for(joined.space).evaluation,
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


def _finish_in_pool(url: StorageURL, study: str, fd: int | None) -> None:
    """A pool's after-search steps (WorkerPool.finish): their lines go to the parent over the
    pipe like a worker's."""
    from nas.search import runtime
    from nas.search.cli.display import ConsoleEvents
    from nas.search.engine import SearchEvents, finish_search, join_study
    from nas.search.strategies import strategy_for
    from nas.search.workers import PipeEvents

    events: SearchEvents = ConsoleEvents(err) if fd is None else PipeEvents(fd)
    try:
        joined = join_study(url, study)
        runtime.import_tensorflow()
        finish_search(joined, events, strategy_for(joined.space))
    except NasError as exc:
        if not isinstance(events, PipeEvents):
            raise
        events.send(PipeEvent.ERROR, text=message(exc))

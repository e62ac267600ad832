"""The study driver: create or resume the study, recover orphans, run trials to the budget."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from nas import __version__
from nas.storage import MeasurementCache, StorageURL, open_storage
from nas.storage.engine import GRACE_PERIOD_S, HEARTBEAT_INTERVAL_S

from .data import Dataset
from .device import describe_device, device_label, unsupported_precisions
from .errors import NasError, SearchInterrupted
from .events import SearchEvents
from .hardware import HardwareProfiler
from .recovery import recover_orphans, requeue
from .space import SearchSpace
from .worker import Heartbeat, WorkerIdentity

MAX_CONSECUTIVE_FAILURES = 5


@dataclass(frozen=True)
class SearchOptions:
    storage: StorageURL
    study_name: str
    trials: int
    sampler: str
    seed: int
    timeout: float | None = None
    max_consecutive_failures: int = MAX_CONSECUTIVE_FAILURES
    cache: bool = True  # reuse measurements of the same network on the same device
    screening: bool = True  # reject infeasible candidates before training


@dataclass(frozen=True)
class SearchOutcome:
    study: optuna.Study
    finished: int
    budget: int
    ran: int
    failed: int
    stopped_by: str  # "budget", "timeout", "failures"


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    if name == "tpe":
        # constant_liar: trials running in parallel workers count as pessimistic results, so
        # workers do not all propose the same point.
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "gp":
        try:
            import torch  # noqa: F401  (GPSampler's dependency)
        except ImportError:
            raise NasError("sampler 'gp' needs PyTorch: pip install torch (or use tpe or nsga2)") from None
        return optuna.samplers.GPSampler(seed=seed)
    raise NasError(f"unknown sampler '{name}' (use tpe, nsga2, gp or random)")


def _counts(study: optuna.Study) -> tuple[int, int]:
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
    complete = sum(t.state == TrialState.COMPLETE for t in trials)
    return complete, len(trials) - complete


def open_study(space: SearchSpace, storage: optuna.storages.RDBStorage, name: str) -> optuna.Study:
    """Load the study if it exists (checking it was made from this space), else create it."""
    directions = list(space.spec.objectives.values())
    names = list(space.spec.objectives)
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        study = optuna.create_study(study_name=name, storage=storage, directions=directions)
        study.set_metric_names(names)
        study.set_user_attr("nas_version", __version__)
        study.set_user_attr("space_source", space.source)
        study.set_user_attr("space", json.loads(space.fingerprint()))
        return study
    stored = study.user_attrs.get("space")
    if stored is None:
        raise NasError(f"study '{name}' exists but was not created by nas; choose another --study name")
    if json.dumps(stored, sort_keys=True) != space.fingerprint():
        raise NasError(
            f"study '{name}' was created from a different space "
            f"(from {study.user_attrs.get('space_source')}); use --study NEW_NAME for the changed space"
        )
    return study


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Let the bookkeeping after an interrupt finish even if Ctrl-C is pressed again."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])


def restrict_to_device(space: SearchSpace, device: dict[str, Any], events: SearchEvents) -> SearchSpace:
    """Drop the precision policies this device cannot run well from this worker's space."""
    unsupported = unsupported_precisions(device)
    param = space.spec.compute.precision
    values = [param.value] if param.fixed else list(param.choices)
    kept = [v for v in values if v not in unsupported]
    if kept == values:
        return space
    dropped = "; ".join(f"{v} ({unsupported[v]})" for v in values if v in unsupported)
    if not kept:
        raise NasError(f"compute.precision: nothing this {device_label(device)} can run: {dropped}")
    events.message(f"Warning: removed from this worker's space: {dropped}")
    return space.with_precisions(kept)


def run_search(
    space: SearchSpace, options: SearchOptions, events: SearchEvents, data: Dataset | None = None
) -> SearchOutcome:
    """Run the study to its budget; `data` replaces the space's dataset (Python callers)."""
    from .data import load_dataset
    from .trial import TrialRunner, describe_failure

    # Everything that can reject the input is checked before the database is touched.
    make_sampler(options.sampler, options.seed)
    device_space = restrict_to_device(space, describe_device(), events)
    storage = open_storage(options.storage)
    study = open_study(space, storage, options.study_name)
    for line in recover_orphans(study, GRACE_PERIOD_S):
        events.message(line)
    study.set_user_attr("budget", options.trials)

    complete, _ = _counts(study)
    # A resumed random or NSGA-II sampler with the same seed would replay its first proposals.
    study.sampler = make_sampler(options.sampler, options.seed + len(study.trials))
    events.start(study.study_name, options.trials, complete)
    if complete >= options.trials:
        events.stop()
        return SearchOutcome(study, complete, options.trials, 0, 0, "budget")

    if data is None:
        data = load_dataset(space.spec.dataset)
    study.set_user_attr("dataset", data.summary())
    profiler = HardwareProfiler(space.spec.measure, MeasurementCache(storage.engine) if options.cache else None)
    runner = TrialRunner(
        device_space, data, profiler, seed=options.seed, on_phase=events.phase, screening=options.screening
    )
    worker = WorkerIdentity.current()
    started = time.monotonic()
    ran = failed = consecutive_failures = 0
    stopped_by = "budget"
    try:
        with _sigterm_as_interrupt():
            while True:
                complete, running = _counts(study)
                if complete >= options.trials:
                    break
                if options.timeout is not None and time.monotonic() - started >= options.timeout:
                    stopped_by = "timeout"
                    break
                if complete + running >= options.trials:
                    # The rest of the budget is running elsewhere; wait for it, or for it to die.
                    time.sleep(HEARTBEAT_INTERVAL_S)
                    for line in recover_orphans(study, GRACE_PERIOD_S):
                        events.message(line)
                    continue

                trial = study.ask()
                try:
                    storage.record_heartbeat(trial._trial_id)
                    trial.set_user_attr("worker", worker.to_attr())
                    events.trial_started(trial.number)
                    with Heartbeat(storage, trial._trial_id, HEARTBEAT_INTERVAL_S):
                        outcome = runner.run(trial)
                except KeyboardInterrupt:
                    with _no_interrupts():
                        trial.set_user_attr("fail_reason", "interrupted (Ctrl-C or SIGTERM)")
                        frozen = study.tell(trial, state=TrialState.FAIL)
                        # Not the trial's fault: run it again on resume without using a retry.
                        requeue(study, frozen, count_retry=False)
                    raise SearchInterrupted(
                        f"trial {trial.number} was stopped and queued again; "
                        f"{_counts(study)[0]} finished trials are saved."
                    ) from None
                except Exception as exc:
                    trial.set_user_attr("fail_reason", describe_failure(exc))
                    frozen = study.tell(trial, state=TrialState.FAIL)
                    failed += 1
                    consecutive_failures += 1
                    events.trial_finished(frozen, complete, len(study.best_trials))
                    if consecutive_failures >= options.max_consecutive_failures:
                        stopped_by = "failures"
                        break
                    continue
                frozen = study.tell(trial, outcome.values)
                ran += 1
                consecutive_failures = 0
                events.trial_finished(frozen, complete + 1, len(study.best_trials))
    finally:
        events.stop()
    complete, _ = _counts(study)
    return SearchOutcome(study, complete, options.trials, ran, failed, stopped_by)

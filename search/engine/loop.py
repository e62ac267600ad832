"""The trial loop every worker runs: take the next trial within the budget, run it, record it.

The same loop serves `nas search` in one process, each process of `nas search --workers N`
and `nas worker` on other machines; they coordinate only through the study's database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import optuna
from optuna.trial import TrialState
from sqlalchemy.exc import SQLAlchemyError

from nas.errors import SearchInterrupted
from nas.search.data import Dataset, load_dataset
from nas.search.engine.collector import freeze_survivors
from nas.search.engine.events import SearchEvents, TrialReport
from nas.search.engine.front import pareto_front
from nas.search.engine.interrupts import Interrupts, no_interrupts
from nas.search.engine.liveness import Heartbeat, WorkerIdentity
from nas.search.engine.options import SearchOptions
from nas.search.engine.optuna_private import trial_id
from nas.search.engine.recovery import recover_orphans, requeue
from nas.search.engine.retention import trials_to_keep
from nas.search.engine.samplers import make_sampler, worker_sampler
from nas.search.engine.strategy import EvaluationContext, EvaluationFactory, Strategy, ended_normally, finish_search
from nas.search.engine.study import JoinedStudy, counts, prepare_study, restrict_to_device
from nas.search.engine.trial import TrialRunner, describe_failure
from nas.search.hardware import describe_device
from nas.search.records import StoppedBy, TrialAttr
from nas.search.space import SearchSpace
from nas.storage import GRACE_PERIOD_S, HEARTBEAT_INTERVAL_S, WeightStore, critical, study_lock, with_lock_retries

# How often a worker with nothing to start (the rest of the budget runs elsewhere) looks
# again: to finish promptly, and to take over the trial of a worker that died.
IDLE_POLL_S = 2.0


@dataclass(frozen=True)
class SearchOutcome:
    study: optuna.Study
    finished: int
    budget: int
    ran: int
    failed: int
    stopped_by: StoppedBy


def run_search(
    space: SearchSpace,
    options: SearchOptions,
    events: SearchEvents,
    data: Dataset | None = None,
    *,
    strategy: Strategy,
    evaluation: EvaluationFactory | None = None,
    finish: bool = True,
) -> SearchOutcome:
    """The engine's one entry (`nas search`, `nas.api.search`, the benchmarks): create or
    resume the study, run it to its budget in this process, then, if it ended normally, the
    strategy's after-search steps (`finish=False` skips them). The caller hands the strategy
    (the registry's, for the space: `nas.search.strategies.strategy_for`). `data` replaces the
    space's dataset (Python callers); `evaluation` replaces the strategy's (a tabulated benchmark)."""
    # Everything that can reject the input is checked before the database is touched.
    make_sampler(options.sampler, options.seed)
    device_space = _for_this_device(space, events)
    if data is None:
        data = load_dataset(space.spec.dataset, warn=events.message)  # bad data: nothing written yet
    storage, study = prepare_study(space, options, events)
    make = evaluation or strategy.evaluation
    outcome = _work(study, storage, device_space, options, events, make, data=data)
    if finish and ended_normally(outcome.stopped_by):
        finish_search(JoinedStudy(study, storage, space, options), events, strategy)
    return outcome


def run_worker(
    joined: JoinedStudy,
    events: SearchEvents,
    evaluation: EvaluationFactory,
    *,
    worker_index: int,
    recycle_after: int | None = None,
    keep_going: Callable[[], bool] = lambda: True,
) -> SearchOutcome:
    """Join a study prepared elsewhere and run its trials until the budget is complete (or
    `keep_going` says stop); `evaluation` is the strategy's (`strategy.evaluation`) or a
    tabulated benchmark's."""
    device_space = _for_this_device(joined.space, events)
    return _work(
        joined.study,
        joined.storage,
        device_space,
        joined.options,
        events,
        evaluation,
        worker_index=worker_index,
        recycle_after=recycle_after,
        keep_going=keep_going,
    )


def _for_this_device(space: SearchSpace, events: SearchEvents) -> SearchSpace:
    """The space less the precisions this device cannot run. float32 runs everywhere, so a
    space of float32 alone asks TensorFlow nothing (a tabulated benchmark loads none)."""
    param = space.spec.compute.precision
    if (param.value if param.fixed else None) == "float32":
        return space
    return restrict_to_device(space, describe_device(), events)


def _work(
    study: optuna.Study,
    storage: optuna.storages.RDBStorage,
    space: SearchSpace,
    options: SearchOptions,
    events: SearchEvents,
    evaluation: EvaluationFactory,
    *,
    data: Dataset | None = None,
    worker_index: int = 0,
    recycle_after: int | None = None,
    keep_going: Callable[[], bool] = lambda: True,
) -> SearchOutcome:
    complete, _ = counts(study)
    study.sampler = worker_sampler(options.sampler, options.seed, worker_index, len(study.trials))
    events.start(study.study_name, options.trials, complete)
    if complete >= options.trials:
        events.stop()
        return SearchOutcome(study, complete, options.trials, 0, 0, StoppedBy.BUDGET)

    # --timeout counts from here: a supernet's training, which the evaluation's start does, is
    # part of the search's time (`epochs: auto` fits it in a share of the timeout).
    started = time.monotonic()
    made = evaluation(EvaluationContext(study, storage, space, options, events, data))
    made.start()
    runner = TrialRunner(
        space,
        made,
        on_phase=events.phase,
        screening=options.screening,
        warn=events.message,
        keep_top_k=options.keep_top_k,
    )
    identity = WorkerIdentity.current().to_attr() | made.worker_attrs()
    loop = _TrialLoop(study, storage, runner, options, events, identity, made.weights)
    # Every trial ends with a full garbage collection (freeing its model), and with TensorFlow
    # loaded one took 0.4-0.7 s: most of a screened trial's time. Objects alive now (modules,
    # the dataset) live as long as the worker, so they are moved out of the collector's sight,
    # and so is what each trial leaves behind (collector.py); the collection after each trial
    # then costs milliseconds (benchmarks/load.py, benchmarks/memory.py).
    freeze_survivors()
    try:
        with Interrupts(events) as interrupts:
            stopped_by = loop.run(interrupts, recycle_after, keep_going, started)
    finally:
        events.stop()
    finished = counts(study)[0]
    if finished >= options.trials:
        stopped_by = StoppedBy.BUDGET  # a stop request that came with the last trial changes nothing
    return SearchOutcome(study, finished, options.trials, loop.ran, loop.failed, stopped_by)


class _TrialLoop:
    def __init__(
        self,
        study: optuna.Study,
        storage: optuna.storages.RDBStorage,
        runner: TrialRunner,
        options: SearchOptions,
        events: SearchEvents,
        identity: dict[str, Any],
        weights: WeightStore | None = None,
    ) -> None:
        self.study, self.storage, self.runner, self.weights = study, storage, runner, weights
        self.options, self.events, self.identity = options, events, identity
        self.ran = self.failed = self.consecutive_failures = 0
        self.warned: set[str] = set()  # warnings from recovery, said once per worker, not per trial

    def _next_trial(self) -> tuple[optuna.Trial | None, bool]:
        """(a new running trial or None, whether the budget is complete). Counting and asking
        happen under the study's lock, so no two workers can start the budget's last trial."""
        with study_lock(self.options.storage, self.storage.engine, self.study.study_name):
            complete, running = counts(self.study)
            if complete >= self.options.trials:
                return None, True
            if complete + running >= self.options.trials:
                return None, False  # the rest is running elsewhere: wait for it, or for it to die
            trial = with_lock_retries(self.study.ask)
            self.storage.record_heartbeat(trial_id(trial))
            trial.set_user_attr(TrialAttr.WORKER, self.identity)
            return trial, False

    def run(
        self,
        interrupts: Interrupts,
        recycle_after: int | None,
        keep_going: Callable[[], bool],
        started: float | None = None,
    ) -> StoppedBy:
        """Trials until the budget, the timeout (counted from `started`, default now), a stop or
        a failure."""
        started = time.monotonic() if started is None else started
        while True:
            for line in recover_orphans(self.study, GRACE_PERIOD_S):
                if line not in self.warned:
                    self.events.message(line)
                if line.startswith("Warning"):
                    self.warned.add(line)
            if interrupts.draining:
                return StoppedBy.INTERRUPTED
            if not keep_going():
                return StoppedBy.ORPHANED
            if self.options.timeout is not None and time.monotonic() - started >= self.options.timeout:
                return StoppedBy.TIMEOUT
            if recycle_after is not None and self.ran + self.failed >= recycle_after:
                return StoppedBy.RECYCLE
            trial = None
            try:
                with interrupts.deferred():
                    trial, done = self._next_trial()
            except KeyboardInterrupt:
                # A stop that came while the trial was being asked for: it never started.
                if trial is None:
                    raise
                self._interrupted(trial)
            if done:
                return StoppedBy.BUDGET
            if trial is None:
                time.sleep(IDLE_POLL_S)
                continue
            failed = self._run_one(trial, interrupts)
            freeze_survivors()
            if failed and self.consecutive_failures >= self.options.max_consecutive_failures:
                return StoppedBy.FAILURES

    def _retain_weights(self, weights: WeightStore, front: list[optuna.trial.FrozenTrial]) -> None:
        """Delete the weights of trials that left the front; a failure here costs disk, never
        the worker (the next trial's pass catches up)."""
        try:
            keep = trials_to_keep(self.study, front, self.options.keep_top_k)
            weights.retain(self.study.study_name, keep)
        except (OSError, SQLAlchemyError, optuna.exceptions.StorageInternalError) as exc:
            self.events.message(f"Warning: could not delete dominated trials' weights: {str(exc).splitlines()[0]}")

    def _interrupted(self, trial: optuna.Trial) -> NoReturn:
        """Fail a trial a stop cut short and queue it again, then stop the search."""
        study = self.study
        critical.stop_handled()
        with no_interrupts():
            trial.set_user_attr(TrialAttr.FAIL_REASON, "interrupted (Ctrl-C or SIGTERM)")
            frozen = study.tell(trial, state=TrialState.FAIL)
            # Not the trial's fault: run it again on resume without using a retry.
            requeue(study, frozen, count_retry=False)
        raise SearchInterrupted(
            f"trial {trial.number} was stopped and queued again; {counts(study)[0]} finished trials are saved."
        ) from None

    def _run_one(self, trial: optuna.Trial, interrupts: Interrupts) -> bool:
        """Run and record one trial; True when it failed."""
        study = self.study
        failure: Exception | None = None
        outcome = None
        try:
            self.events.trial_started(trial.number)
            with Heartbeat(self.storage, trial_id(trial), HEARTBEAT_INTERVAL_S):
                outcome = self.runner.run(trial)
        except KeyboardInterrupt:
            self._interrupted(trial)
        except Exception as exc:
            if interrupts.stopped_now:
                self._interrupted(trial)
            failure = exc
        if interrupts.stopped_now:
            # The stop was raised where Python swallows exceptions (a finalizer) and the trial
            # ran on: it was still asked to stop.
            self._interrupted(trial)
        try:
            # The trial has ended: a stop arriving now waits until the study has been told, or
            # the trial would be left RUNNING (and its finished work run again on resume).
            with interrupts.deferred():
                if failure is not None:
                    trial.set_user_attr(TrialAttr.FAIL_REASON, describe_failure(failure))
                    frozen = with_lock_retries(study.tell, trial, state=TrialState.FAIL)
                elif outcome is None or outcome.values is None:  # screened, or stopped at a rung
                    frozen = with_lock_retries(study.tell, trial, state=TrialState.PRUNED)
                else:
                    frozen = with_lock_retries(study.tell, trial, outcome.values)
        except KeyboardInterrupt:
            raise SearchInterrupted(
                f"stopped after trial {trial.number} ended; {counts(study)[0]} finished trials are saved."
            ) from None
        if failure is not None:
            self.failed += 1
            self.consecutive_failures += 1
            self.events.trial_finished(TrialReport.from_trial(frozen), counts(study)[0], len(pareto_front(study)))
            return True
        front = pareto_front(study)  # one non-dominated sort per trial, for retention and the display
        if self.weights is not None:
            self._retain_weights(self.weights, front)
        self.ran += 1
        self.consecutive_failures = 0
        self.events.trial_finished(TrialReport.from_trial(frozen), counts(study)[0], len(front))
        return False

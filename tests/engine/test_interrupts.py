"""A stop (second Ctrl-C, SIGTERM) that lands in the loop's bookkeeping, not in a trial's work,
never leaves a trial RUNNING: each case sends the signal at one exact point of the loop of a
real study on SQLite, with a runner that stands in for the trial's phases."""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy

from nas.errors import SearchInterrupted
from nas.search.engine.evaluation import TrialWork
from nas.search.engine.events import SearchEvents
from nas.search.engine.interrupts import Interrupts
from nas.search.engine.loop import _TrialLoop
from nas.search.engine.options import SearchOptions
from nas.search.engine.recovery import requeue
from nas.search.engine.trial import TrialOutcome
from nas.storage import critical, open_storage, resolve_storage_url
from nas.storage import engine as storage_engine


class _Runner:
    """Finishes every trial at once with fixed objectives; `during` runs inside the trial."""

    def __init__(self, during: Callable[[], None] = lambda: None) -> None:
        self.during, self.ran = during, 0

    def run(self, trial: optuna.Trial) -> TrialOutcome:
        self.ran += 1
        self.during()
        return TrialOutcome([0.9, 1000.0])


def _stop_now() -> None:
    """SIGTERM to this process: Interrupts raises KeyboardInterrupt at once, unless deferred."""
    os.kill(os.getpid(), signal.SIGTERM)


def _loop(tmp_path: Path, runner: _Runner) -> tuple[_TrialLoop, optuna.Study]:
    url = resolve_storage_url(f"sqlite:///{tmp_path / 'nas.db'}")
    storage = open_storage(url)
    study = optuna.create_study(study_name="s", storage=storage, directions=["maximize", "maximize"])
    options = SearchOptions(storage=url, study_name="s", trials=5, sampler="random", seed=0)
    return _TrialLoop(study, storage, runner, options, SearchEvents(), {"host": "test"}), study  # type: ignore[arg-type]


def _run(loop: _TrialLoop) -> None:
    try:
        with Interrupts(SearchEvents()) as interrupts:
            loop.run(interrupts, None, lambda: True)
    except KeyboardInterrupt:  # pytest would take it for the user's own Ctrl-C and stop the suite
        raise AssertionError("the stop left the loop as a bare KeyboardInterrupt, without its bookkeeping") from None


def _states(study: optuna.Study) -> list[str]:
    return [t.state.name for t in study.get_trials()]


def _signal_inside(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, calls: int = 1) -> None:
    """Make `owner.name` send the stop on its `calls`-th call, just before doing its work."""
    original, seen = getattr(owner, name), [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        seen[0] += 1
        if seen[0] == calls:
            _stop_now()
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapped)


def test_a_stop_while_the_study_is_told_lets_the_tell_finish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    loop, study = _loop(tmp_path, _Runner())
    _signal_inside(monkeypatch, study, "tell", calls=2)  # the second trial's tell
    with pytest.raises(SearchInterrupted, match="stopped after trial 1 ended; 2 finished trials are saved"):
        _run(loop)
    assert _states(study) == ["COMPLETE", "COMPLETE"]


def test_a_stop_while_a_trial_is_asked_for_fails_and_requeues_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = _Runner()
    loop, study = _loop(tmp_path, runner)
    _signal_inside(monkeypatch, study, "ask", calls=2)
    with pytest.raises(SearchInterrupted, match="trial 1 was stopped and queued again; 1 finished"):
        _run(loop)
    assert runner.ran == 1  # the asked-for trial never started
    assert _states(study) == ["COMPLETE", "FAIL", "WAITING"]
    failed = study.trials[1]
    assert failed.user_attrs["fail_reason"].startswith("interrupted")
    assert study.trials[2].user_attrs["retry_of"] == 1 and study.trials[2].params == failed.params


def test_a_stop_inside_a_trial_fails_and_requeues_it(tmp_path: Path) -> None:
    loop, study = _loop(tmp_path, _Runner(during=_stop_now))
    with pytest.raises(SearchInterrupted, match="trial 0 was stopped and queued again; 0 finished"):
        _run(loop)
    assert _states(study) == ["FAIL", "WAITING"]


def test_a_stop_while_a_failed_trial_is_told_lets_the_tell_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> None:
        raise RuntimeError("boom")

    loop, study = _loop(tmp_path, _Runner(during=broken))
    _signal_inside(monkeypatch, study, "tell")
    with pytest.raises(SearchInterrupted, match="stopped after trial 0 ended"):
        _run(loop)
    assert _states(study) == ["FAIL"]
    assert study.trials[0].user_attrs["fail_reason"].startswith("RuntimeError: boom")


def test_a_stop_that_another_error_replaces_on_its_way_out_still_requeues(tmp_path: Path) -> None:
    # A finally block that fails while the stop passes through it (a database write, a
    # TensorFlow clean-up) turns the KeyboardInterrupt into another exception.
    def stop_then_fail() -> None:
        try:
            _stop_now()
        finally:
            raise RuntimeError("database is locked")

    loop, study = _loop(tmp_path, _Runner(during=stop_then_fail))
    with pytest.raises(SearchInterrupted, match="trial 0 was stopped and queued again"):
        _run(loop)
    assert _states(study) == ["FAIL", "WAITING"]
    assert study.trials[0].user_attrs["fail_reason"].startswith("interrupted")


class _WritingRunner(_Runner):
    """A trial that records an attribute, as a trial at a rung does."""

    def run(self, trial: optuna.Trial) -> TrialOutcome:
        trial.set_user_attr("rungs", [1])
        return super().run(trial)


def test_a_stop_inside_a_trials_storage_write_waits_for_it_and_leaves_no_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Cut inside SQLAlchemy (here between its commit event and the commit), the write's
    # transaction stayed open and held SQLite's write lock: the stopped trial could not be
    # failed and queued again (CI saw the search take over 120 s to stop).
    monkeypatch.setattr(storage_engine, "SQLITE_BUSY_TIMEOUT_S", 2)  # such a failure then shows in seconds
    loop, study = _loop(tmp_path, _WritingRunner())
    engine = study._storage._backend.engine  # type: ignore[attr-defined]

    writing = [False]

    def on_statement(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        if statement.startswith("INSERT INTO trial_user_attributes") and "rungs" in str(parameters):
            writing[0] = True

    def on_commit(conn: Any) -> None:
        if writing[0]:
            writing[0] = False
            _stop_now()  # handled at the next bytecode: inside SQLAlchemy, before the commit itself

    sqlalchemy.event.listen(engine, "before_cursor_execute", on_statement)
    sqlalchemy.event.listen(engine, "commit", on_commit)
    with pytest.raises(SearchInterrupted, match="trial 0 was stopped and queued again; 0 finished"):
        _run(loop)
    assert _states(study) == ["FAIL", "WAITING"]
    assert study.trials[0].user_attrs["rungs"] == [1]  # the write the stop arrived in finished
    with sqlite3.connect(tmp_path / "nas.db", timeout=0) as con:
        con.execute("BEGIN IMMEDIATE")  # no transaction left holding the write lock


def test_a_second_stop_while_one_waits_for_a_storage_call_stops_at_once() -> None:
    # A database that stops answering must not make the search unstoppable.
    lines: list[str] = []
    events = SearchEvents()
    events.message = lines.append  # type: ignore[method-assign]
    reached = []
    with Interrupts(events) as interrupts, pytest.raises(KeyboardInterrupt), critical.section():
        _stop_now()
        reached.append("held")  # the first waits for the section
        _stop_now()
        reached.append("not stopped")
    assert reached == ["held"] and interrupts.stopped_now
    waiting = "Stopping now: waiting for the database call or training batch under way (Ctrl-C again: stop at once)."
    assert lines == [waiting]
    assert not critical.holding() and not critical.active()


class _UnwritableTrial:
    """A trial whose attribute writes fail, as a database write does when a stop cuts it."""

    def set_user_attr(self, key: str, value: Any) -> None:
        raise RuntimeError("database is locked")


def test_a_phase_cut_short_keeps_its_reason_when_its_durations_cannot_be_written() -> None:
    run = TrialWork(_UnwritableTrial(), candidate=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="the phase's own error"), run.phase("build", lambda _: None):
        raise ValueError("the phase's own error")
    assert "build" in run.durations
    with pytest.raises(RuntimeError, match="database is locked"), run.phase("plan", lambda _: None):
        pass  # a phase that ended normally does report the failed write


def test_a_queued_trial_stopped_before_it_sampled_everything_is_queued_again_whole() -> None:
    """Killed between asking for a queued trial and suggesting all its parameters: the retry
    holds the whole queued configuration, not only what was suggested by then."""
    study = optuna.create_study()
    study.enqueue_trial({"a": 1, "b": 2})
    trial = study.ask()
    trial.suggest_int("a", 0, 5)  # "b" never suggested: the worker died here
    frozen = study.tell(trial, state=optuna.trial.TrialState.FAIL)
    assert requeue(study, frozen)
    retry = study.ask()
    assert (retry.suggest_int("a", 0, 5), retry.suggest_int("b", 0, 5)) == (1, 2)


class _Finalized:
    def __del__(self) -> None:
        _stop_now()


def _swallowed_stop() -> None:
    """A stop handled inside a finalizer, as TensorFlow's garbage collection runs them while a
    model is built: Python prints what the handler raises ("Exception ignored") and goes on."""
    _Finalized()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_stop_a_finalizer_swallowed_is_raised_again_at_the_next_safe_point(tmp_path: Path) -> None:
    steps: list[str] = []

    def during() -> None:
        _swallowed_stop()
        steps.append("ran on")
        critical.checkpoint()  # a phase or a training batch starts here
        steps.append("past the checkpoint")

    loop, study = _loop(tmp_path, _Runner(during=during))
    with pytest.raises(SearchInterrupted, match="trial 0 was stopped and queued again; 0 finished"):
        _run(loop)
    assert steps == ["ran on"]
    assert _states(study) == ["FAIL", "WAITING"]
    critical.checkpoint()  # handled: nothing is left to raise


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_trial_that_ran_on_past_a_swallowed_stop_is_still_stopped(tmp_path: Path) -> None:
    loop, study = _loop(tmp_path, _Runner(during=_swallowed_stop))
    with pytest.raises(SearchInterrupted, match="trial 0 was stopped and queued again; 0 finished"):
        _run(loop)
    assert _states(study) == ["FAIL", "WAITING"]

"""The live view's estimate of the time a search has left, from its budget: the remaining
trials at the pace of those finished, no more than what is left of --timeout."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from nas.search.cli import display
from nas.search.cli.display import BudgetClock, LiveSearchView
from nas.search.cli.display_pool import PoolLiveView
from nas.search.engine import TrialReport
from nas.search.records import PipeEvent
from nas.search.workers import Slot
from nas.search.workers.placement import Placement


def test_nothing_is_estimated_before_a_trial_finishes_without_a_timeout() -> None:
    clock = BudgetClock(timeout=None)
    assert clock.left(0.0) is None
    clock.start(budget=10, finished=0, now=100.0)
    assert clock.left(150.0) is None


def test_the_remaining_trials_at_the_pace_of_those_finished() -> None:
    clock = BudgetClock(timeout=None)
    clock.start(budget=10, finished=2, now=0.0)  # resumed: 2 of 10 done before this run
    clock.finished(3, now=60.0)  # one trial in 60 s: 7 left
    assert clock.left(60.0) == pytest.approx(7 * 60)
    assert clock.left(90.0) == pytest.approx(7 * 60 - 30)  # counts down between trials
    clock.finished(5, now=100.0)  # then two in 40 s (two workers, or short trials): 20 s each
    assert clock.left(100.0) == pytest.approx(5 * 20)
    clock.finished(10, now=200.0)
    assert clock.left(200.0) == 0


def test_the_pace_is_taken_between_finished_trials_not_from_a_long_start() -> None:
    # A supernet trains for half an hour before its first subnet; its subnets take seconds.
    clock = BudgetClock(timeout=None)
    clock.start(budget=100, finished=0, now=0.0)
    clock.finished(1, now=1800.0)
    clock.finished(11, now=1860.0)
    assert clock.left(1860.0) == pytest.approx(89 * 6)


def test_the_timeout_caps_the_estimate() -> None:
    clock = BudgetClock(timeout=600.0)
    clock.start(budget=100, finished=0, now=0.0)
    assert clock.left(100.0) == pytest.approx(500)  # nothing finished yet: the timeout alone
    clock.finished(1, now=200.0)  # 99 trials of 200 s would take hours
    assert clock.left(200.0) == pytest.approx(400)
    assert clock.left(700.0) == 0 and clock.timed_out(700.0)


def test_the_time_left_is_shown_in_the_live_view(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(display.time, "monotonic", lambda: now[0])
    console = Console(file=io.StringIO(), width=150, force_terminal=False)
    view = LiveSearchView(console, ["accuracy", "throughput"], timeout=3600)

    def shown() -> str:
        with console.capture() as captured:
            console.print(view.progress)
        return captured.get()

    view.start("demo", budget=20, finished=0)
    view.live.stop()
    assert "at most 1 h 00 min left" in shown()  # nothing finished yet: the timeout bounds it
    view.trial_started(0)
    now[0] += 120
    view.trial_finished(TrialReport(number=0, complete=True, values=[0.9, 5000.0]), finished=1, pareto_size=1)
    assert "about 38 min left" in shown()  # 19 trials of 2 minutes
    now[0] += 3600
    assert "--timeout reached" in shown()


def test_the_words_say_how_the_time_left_is_known() -> None:
    clock = BudgetClock(timeout=600.0)
    clock.start(budget=3, finished=0, now=0.0)
    clock.finished(1, now=30.0)
    assert clock.text(30.0) == "about 1 min left"  # 2 trials of 30 s
    clock.finished(2, now=500.0)  # slower now: 470 s a trial, but the timeout comes first
    assert clock.text(500.0) == "at most 2 min left"
    assert clock.text(560.0) == "under a minute left"
    clock.finished(3, now=590.0)
    assert clock.text(590.0) == ""  # the budget is complete: nothing left to estimate


def test_the_pool_view_counts_every_workers_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(display.time, "monotonic", lambda: now[0])
    monkeypatch.setattr("nas.search.cli.display_pool.time.monotonic", lambda: now[0])
    view = PoolLiveView(Console(file=io.StringIO(), force_terminal=False), ["accuracy", "throughput"])
    view.start("demo", budget=10, finished=0, slots=[])
    report = TrialReport(number=0, complete=True, values=[0.9, 5000.0]).to_dict()
    slot = Slot(Placement(index=0, gpu=None, cpus=(0,), intra_op_threads=1, inter_op_threads=1))
    for finished, at in ((1, 60.0), (3, 120.0)):  # two workers' trials
        now[0] = at
        view.update(slot, {"event": PipeEvent.TRIAL_FINISHED, "finished": finished, "pareto": 1, "report": report})
    assert view.clock.left(120.0) == pytest.approx(7 * 30)

"""Rich rendering: the live search view and the tables the CLI prints."""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text

from nas.search.engine import SearchEvents, TrialReport
from nas.search.records import Screened
from nas.search.space import human


def _si(value: float | None, unit: str = "") -> str:
    return "-" if value is None else human(value, unit, sep=" ")


class BudgetClock:
    """The time a search has left: its remaining trials at the pace the study has finished
    trials since this view started (every worker's count, so a pool or `nas worker` beside
    others is paced by all of them), and no more than what is left of --timeout, after which
    no trial starts. The pace is taken between finished trials once there are two, so a
    supernet's training before the first subnet does not count as the pace of every subnet."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.budget = 0
        self.started: float | None = None
        self.first: tuple[float, int] | None = None  # (when, finished) at the first trial finished here
        self.last: tuple[float, int] | None = None  # ... and at the latest
        self.at_start = 0

    def start(self, budget: int, finished: int, now: float) -> None:
        self.budget, self.at_start, self.started = budget, finished, now

    def finished(self, finished: int, now: float) -> None:
        self.last = (now, finished)
        if self.first is None:
            self.first = self.last

    def timed_out(self, now: float) -> bool:
        return self.timeout is not None and self.started is not None and now - self.started >= self.timeout

    def _paced(self, now: float) -> float | None:
        """The remaining trials at the pace so far; None before a trial finished here."""
        if self.started is None or self.first is None or self.last is None or self.last[1] <= self.at_start:
            return None
        (t0, n0), (t1, n1) = self.first, self.last
        pace = (t1 - t0) / (n1 - n0) if n1 > n0 else (t0 - self.started) / (n0 - self.at_start)
        return max(0.0, pace * (self.budget - n1) - (now - t1))

    def left(self, now: float) -> float | None:
        """Seconds left, or None while nothing tells (no trial finished here, no --timeout)."""
        if self.started is None:
            return None
        estimates = [] if (paced := self._paced(now)) is None else [paced]
        if self.timeout is not None:
            estimates.append(max(0.0, self.timeout - (now - self.started)))
        return min(estimates) if estimates else None

    def text(self, now: float) -> str:
        """`about 12 min left`; `at most ...` while only --timeout bounds it; empty when done."""
        left = self.left(now)
        if left is None or (self.last is not None and self.last[1] >= self.budget):
            return ""
        if self.timed_out(now):
            return "--timeout reached: the running trials finish"
        paced = self._paced(now)
        bound = "about" if paced is not None and paced <= left else "at most"
        return f"{bound} {_clock(left)} left" if left >= 60 else "under a minute left"


def _clock(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


class TimeLeftColumn(ProgressColumn):
    """The clock's time left, recomputed at every refresh of the live view."""

    def __init__(self, clock: BudgetClock) -> None:
        super().__init__()
        self.clock = clock

    def render(self, task: Task) -> Text:
        return Text(self.clock.text(time.monotonic()), style="progress.remaining")


def trial_progress(console: Console, clock: BudgetClock | None = None) -> Progress:
    """The bar of trials finished out of the budget, with the elapsed time (and the time left)."""
    columns: list[str | ProgressColumn] = [
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("trials"),
        TimeElapsedColumn(),
    ]
    if clock is not None:
        columns.append(TimeLeftColumn(clock))
    return Progress(*columns, console=console)


class ConsoleEvents(SearchEvents):
    """Lines of a step outside the trial loop (fine-tuning, confirming) as they come."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def message(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)


class StepView(ConsoleEvents):
    """A step after the search (`nas train`): its lines as they come, and its progress (the
    running training's epoch) redrawn in place on a terminal, one line each in a log."""

    def __init__(self, console: Console) -> None:
        super().__init__(console)
        self.status = Text("")
        self.live = Live(self.status, console=console, refresh_per_second=4, transient=True)

    def phase(self, text: str) -> None:
        if not self.console.is_terminal:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)
            return
        self.status.plain = text
        if not self.live.is_started:
            self.live.start()
        self.live.refresh()

    def stop(self) -> None:
        if self.live.is_started:
            self.live.stop()


class LiveSearchView(SearchEvents):
    """Progress bar (trial k of N), the running trial's phase, Pareto size, elapsed time.

    On a terminal it redraws in place; in a log (not a TTY) it prints one line per event.
    """

    def __init__(self, console: Console, objectives: list[str], timeout: float | None = None) -> None:
        self.console = console
        self.objectives = objectives
        self.clock = BudgetClock(timeout)
        self.progress = trial_progress(console, self.clock)
        self.status = Text("")
        self.task = self.progress.add_task("search", total=1)
        self.live = Live(Group(self.progress, self.status), console=console, refresh_per_second=4, transient=False)
        self.current: int | None = None
        self.pareto = 0
        self.trial_started_at = 0.0

    def message(self, text: str) -> None:
        self.console.print(f"[yellow]{escape(text)}[/]", soft_wrap=True)

    def start(self, study_name: str, budget: int, finished: int) -> None:
        self.progress.update(self.task, description=f"study {study_name}", total=budget, completed=finished)
        self.clock.start(budget, finished, time.monotonic())
        if finished >= budget:
            self.console.print(f"Budget complete: {finished} of {budget} trials finished.")
            return
        if finished:
            self.console.print(f"Resuming study '{study_name}': {finished} of {budget} trials finished.")
        self.live.start()

    def trial_started(self, number: int) -> None:
        self.current = number
        self.trial_started_at = time.monotonic()
        self._status("starting")

    def phase(self, text: str) -> None:
        self._status(text)

    def _status(self, phase: str) -> None:
        self.status.plain = f"trial #{self.current}: {phase}   |   Pareto front: {self.pareto} trials"
        if self.live.is_started:
            self.live.refresh()

    def trial_finished(self, report: TrialReport, finished: int, pareto_size: int) -> None:
        self.pareto = pareto_size
        self.clock.finished(finished, time.monotonic())
        self.progress.update(self.task, completed=finished)
        self.console.print(trial_line(report, self.objectives, time.monotonic() - self.trial_started_at))
        self._status("done")

    def stop(self) -> None:
        if self.live.is_started:
            self.status.plain = ""
            self.live.stop()


def trial_line(report: TrialReport, objectives: list[str], seconds: float | None = None) -> str:
    """One finished trial as a line of Rich markup, for the log above the live view."""
    seconds = report.seconds if seconds is None else seconds
    took = f" ({seconds:.1f} s)" if seconds is not None else ""
    if report.screened == Screened.HALVING and (half := report.halving):
        return (
            f"trial {report.number}: screened (halving): val acc {half['accuracy']:.3f} on {half['images']:,} "
            f"images, at most {half['upper_bound']:.3f} on all, dominated by trial {half['dominated_by']}{took}"
        )
    if report.screened:
        broken = ", ".join(f"{k} exceeded by {v:.0%}" for k, v in report.constraints.items() if v > 0)
        return f"trial {report.number}: screened out before training ({broken}){took}"
    if report.stopped_early:
        at = report.stopped_early
        return (
            f"trial {report.number}: stopped early at rung {at['rung']} (epoch {at['epoch']}, val acc "
            f"{at['accuracy']:.3f}, ranked {at['position'] + 1} of {at['competitors']}, {at['kept']} go on){took}"
        )
    if report.complete:
        figures = ", ".join(
            f"{name} {format_objective(name, value)}" for name, value in zip(objectives, report.values, strict=False)
        )
        return f"trial {report.number}: {figures}, params {_si(report.params)}, FLOPs {_si(report.flops)}{took}"
    return f"[red]trial {report.number} failed: {escape(str(report.fail_reason))}[/]"


def format_objective(name: str, value: float | None) -> str:
    if value is None:
        return "-"
    if name == "throughput":
        return f"{value:,.0f} img/s"
    if name == "model_size":
        return f"{value:,.0f} B"
    if name == "tflite_latency":
        return f"{value:.3f} ms"
    return f"{value:.4f}"

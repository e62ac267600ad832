"""One live view for all the workers of a pool: overall progress, one row per worker.

On a terminal it redraws in place; in a log (not a TTY) it prints one line per event that
matters (finished trials, workers starting and ending, messages), never per phase.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from nas.search.cli.display import BudgetClock, trial_line, trial_progress
from nas.search.engine import TrialReport
from nas.search.records import PipeEvent, StoppedBy
from nas.search.workers import PoolView, Slot


class PoolLiveView(PoolView):
    def __init__(self, console: Console, objectives: list[str], timeout: float | None = None) -> None:
        self.console = console
        self.objectives = objectives
        self.clock = BudgetClock(timeout)
        self.progress = trial_progress(console, self.clock)
        self.task = self.progress.add_task("search", total=1)
        self.slots: list[Slot] = []
        self.pareto = 0
        self.footer = Text("")
        self.live = Live(console=console, refresh_per_second=4, get_renderable=self._render)

    def _table(self) -> Table:
        table = Table(box=None, pad_edge=False)
        for column in ("worker", "device", "pid", "trial", "phase", "done", "failed"):
            table.add_column(column, justify="right" if column in ("pid", "trial", "done", "failed") else "left")
        for slot in self.slots:
            table.add_row(
                str(slot.placement.index),
                slot.placement.label(),
                str(slot.pid or "-"),
                "-" if slot.trial is None else f"#{slot.trial}",
                slot.phase if slot.process is not None else "ended",
                str(slot.done),
                str(slot.failed),
            )
        return table

    def _render(self) -> Group:
        self.footer.plain = f"Pareto front: {self.pareto} trials"
        return Group(self.progress, self._table(), self.footer)

    def message(self, text: str) -> None:
        self.console.print(f"[yellow]{escape(text)}[/]")

    def start(self, study: str, budget: int, finished: int, slots: list[Slot]) -> None:
        self.slots = slots
        self.progress.update(self.task, description=f"study {study}", total=budget, completed=finished)
        self.clock.start(budget, finished, time.monotonic())
        if finished >= budget:
            self.console.print(f"Budget complete: {finished} of {budget} trials finished.")
            return
        if finished:
            self.console.print(f"Resuming study '{study}': {finished} of {budget} trials finished.")
        self.console.print(f"Starting {len(slots)} workers: " + "; ".join(s.placement.label() for s in slots))
        if self.console.is_terminal:
            self.live.start()

    def update(self, slot: Slot, event: dict[str, Any]) -> None:
        kind = event.get("event")
        who = escape(f"[w{slot.placement.index}]")
        if kind == PipeEvent.TRIAL_FINISHED:
            self.pareto = event["pareto"]
            self.clock.finished(event["finished"], time.monotonic())
            self.progress.update(self.task, completed=event["finished"])
            report = TrialReport.from_dict(event["report"])
            self.console.print(f"{who} {trial_line(report, self.objectives)}")
        elif kind == PipeEvent.MESSAGE:
            self.console.print(f"[yellow]{who} {escape(event['text'])}[/]")
        elif kind == PipeEvent.SPAWNED and slot.started > 1:
            self.console.print(f"{who} new worker process {slot.pid} (process {slot.started} of this slot)")
        elif kind == PipeEvent.OUTCOME and event.get("stopped_by") == StoppedBy.RECYCLE:
            self.console.print(f"{who} worker {slot.pid} exits after {event.get('ran', 0)} trials to free its memory")

    def stop(self) -> None:
        if self.live.is_started:
            self.live.stop()

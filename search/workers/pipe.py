"""Events of a pool's worker process, sent to the parent as JSON lines over a pipe."""

from __future__ import annotations

import json
import os
from typing import Any

from nas.search.engine import SearchEvents, TrialReport
from nas.search.records import PipeEvent


class PipeEvents(SearchEvents):
    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", buffering=1, encoding="utf-8")
        # Set when the parent stopped reading (it died): the worker then finishes its
        # trial and exits instead of searching on unseen.
        self.parent_gone = False

    def send(self, event: str, **payload: Any) -> None:
        if self.parent_gone:
            return
        try:
            self._file.write(json.dumps({"event": event, **payload}) + "\n")
            self._file.flush()
        except OSError:  # BrokenPipeError included
            self.parent_gone = True

    def message(self, text: str) -> None:
        self.send(PipeEvent.MESSAGE, text=text)

    def start(self, study_name: str, budget: int, finished: int) -> None:
        self.send(PipeEvent.START, study=study_name, budget=budget, finished=finished)

    def trial_started(self, number: int) -> None:
        self.send(PipeEvent.TRIAL_STARTED, number=number)

    def phase(self, text: str) -> None:
        self.send(PipeEvent.PHASE, text=text)

    def trial_finished(self, report: TrialReport, finished: int, pareto_size: int) -> None:
        self.send(PipeEvent.TRIAL_FINISHED, report=report.to_dict(), finished=finished, pareto=pareto_size)

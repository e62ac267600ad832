"""What the search driver tells its display; the base class ignores everything."""

from __future__ import annotations

from optuna.trial import FrozenTrial


class SearchEvents:
    def message(self, text: str) -> None:
        """A line worth keeping in the log (recovery, resume, warnings)."""

    def start(self, study_name: str, budget: int, finished: int) -> None:
        """The loop starts with `finished` of `budget` trials already complete."""

    def trial_started(self, number: int) -> None: ...

    def phase(self, text: str) -> None:
        """The running trial entered a phase (build, measure, train epoch k/n...)."""

    def trial_finished(self, trial: FrozenTrial, finished: int, pareto_size: int) -> None: ...

    def stop(self) -> None: ...

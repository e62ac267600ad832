"""What a search loop tells its display; the base class ignores everything.

A finished trial travels as a TrialReport (plain data) rather than a FrozenTrial, so the
same events can cross a pipe from a worker process to the parent's display.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from nas.search.records import TrialAttr


@dataclass(frozen=True)
class TrialReport:
    number: int
    complete: bool  # finished without failing: trained (COMPLETE), screened out or stopped early (PRUNED)
    values: list[float] = field(default_factory=list)
    screened: str | None = None
    stopped_early: dict[str, Any] | None = None  # rung, epoch, accuracy so far (TrialAttr.EARLY_STOPPED)
    halving: dict[str, Any] | None = None  # the subset's figures and bound (TrialAttr.HALVING)
    constraints: dict[str, float] = field(default_factory=dict)
    fail_reason: str | None = None
    params: int | None = None
    flops: int | None = None
    seconds: float | None = None

    @classmethod
    def from_trial(cls, trial: FrozenTrial) -> TrialReport:
        attrs = trial.user_attrs
        seconds = None
        if trial.datetime_start and trial.datetime_complete:
            seconds = (trial.datetime_complete - trial.datetime_start).total_seconds()
        return cls(
            number=trial.number,
            complete=trial.state in (TrialState.COMPLETE, TrialState.PRUNED),
            values=list(trial.values or []),
            screened=attrs.get(TrialAttr.SCREENED),
            stopped_early=attrs.get(TrialAttr.EARLY_STOPPED),
            halving=attrs.get(TrialAttr.HALVING),
            constraints=dict(trial.constraints),
            fail_reason=attrs.get(TrialAttr.FAIL_REASON),
            params=attrs.get(TrialAttr.PARAMS),
            flops=attrs.get(TrialAttr.FLOPS),
            seconds=seconds,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialReport:
        return cls(**data)


class SearchEvents:
    def message(self, text: str) -> None:
        """A line worth keeping in the log (recovery, resume, warnings)."""

    def start(self, study_name: str, budget: int, finished: int) -> None:
        """The loop starts with `finished` of `budget` trials already complete."""

    def trial_started(self, number: int) -> None: ...

    def phase(self, text: str) -> None:
        """The running trial entered a phase (build, measure, train epoch k/n...)."""

    def trial_finished(self, report: TrialReport, finished: int, pareto_size: int) -> None: ...

    def stop(self) -> None: ...

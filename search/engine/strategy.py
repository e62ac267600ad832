"""What the engine asks of a search strategy, and the strategy-neutral steps after a search.

A strategy (one package under `nas.search.strategies`) decides what scores a trial: it makes
the `Evaluation` handed to the engine's loop and names the steps that finish a search. The
engine never looks one up: its callers (the CLI, the Python API, a worker) take it from the
registry and hand it over. This module loads no TensorFlow, since the pool's parent and `nas
space` read it too: an evaluation, which does, is imported by the method that makes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import optuna

from nas.errors import NasError
from nas.search.engine.events import SearchEvents
from nas.search.engine.options import SearchOptions
from nas.search.space import SearchSpace

if TYPE_CHECKING:
    from nas.search.data import Dataset
    from nas.search.engine.evaluation import Evaluation
    from nas.search.engine.final import Start
    from nas.search.engine.study import JoinedStudy
    from nas.search.records import FinalFigures


@dataclass(frozen=True)
class EvaluationContext:
    """What a worker has when it makes its evaluation: the study, its data and its device."""

    study: optuna.Study
    storage: optuna.storages.RDBStorage
    space: SearchSpace  # this worker's (precisions it cannot run removed)
    options: SearchOptions
    events: SearchEvents
    data: Dataset | None  # handed to the engine by a Python caller; None: the space's, loaded by the evaluation


# The engine's seam: the strategy's own by default; a tabulated benchmark hands its table's.
EvaluationFactory = Callable[[EvaluationContext], "Evaluation"]


@dataclass(frozen=True)
class AfterStep:
    """A step that runs once after a search that ended normally (its budget or --timeout).
    `again` is the command that runs it again by hand, for the warning when it fails."""

    title: str
    again: str
    run: Callable[[JoinedStudy, SearchEvents], None]


def _confirm(joined: JoinedStudy, events: SearchEvents) -> None:
    from nas.search.engine.confirm import confirm_front
    from nas.search.hardware import HardwareProfiler
    from nas.storage import MeasurementCache

    measure = joined.space.spec.search_measure()
    profiler = HardwareProfiler(measure, MeasurementCache(joined.storage.engine) if joined.options.cache else None)
    confirm_front(joined.study, profiler, events.message)


CONFIRM = AfterStep("confirming the front", "nas pareto {study} --confirm", _confirm)


class Strategy:
    """A search strategy's engine part. What is not overridden is the strategy-neutral
    behaviour: the front confirmed after the search, `nas train` from fresh weights, no
    fine-tuning."""

    name: ClassVar[str]

    def evaluation(self, ctx: EvaluationContext) -> Evaluation:
        """What scores this worker's trials. Making it trains nothing: work done once before
        the first trial (a supernet's training) is the evaluation's `start`, which the loop
        calls when the search runs."""
        raise NotImplementedError

    def after_search(self, space: SearchSpace) -> list[AfterStep]:
        measure = space.spec.measure
        return [CONFIRM] if measure.confirm and measure.reference else []

    def final_start(self, joined: JoinedStudy, data: Dataset, *, scratch: bool) -> Start:
        """Where `nas train` starts each network: fresh weights here."""
        from nas.search.engine.final import from_scratch

        return from_scratch()

    def train_final(
        self,
        joined: JoinedStudy,
        events: SearchEvents,
        *,
        trials: list[int] | None = None,
        scratch: bool = False,
        again: bool = False,
        seeds: int = 1,
    ) -> dict[str, FinalFigures]:
        """`nas train`: the front (or `trials`) trained with the space's final recipe (`seeds`
        times each) and scored on the test set (engine/final.py)."""
        from nas.search.engine.final import train_final

        def start(data: Dataset) -> Start:
            return self.final_start(joined, data, scratch=scratch)

        return train_final(joined, events, start, trials=trials, again=again, seeds=seeds)

    def finetune(self, joined: JoinedStudy, events: SearchEvents, *, epochs: int | None = None) -> dict[str, Any]:
        raise NasError(
            f"study '{joined.study.study_name}' trained every trial's network itself; "
            "fine-tuning is for supernet studies"
        )

    def describe(self, space: SearchSpace) -> dict[str, Any]:
        """The strategy's settings as `nas space show --format json` reports them."""
        return {"strategy": self.name}

    def summary(self, report: dict[str, Any]) -> str:
        """One line of `nas space show` from describe()'s report."""
        raise NotImplementedError


def ended_normally(stopped_by: str) -> bool:
    """Its budget or --timeout; not Ctrl-C or a run of failures: only then do the after-search
    steps run."""
    from nas.search.records import StoppedBy

    return stopped_by in (StoppedBy.BUDGET, StoppedBy.TIMEOUT)


def finish_search(joined: JoinedStudy, events: SearchEvents, strategy: Strategy) -> None:
    """Run the strategy's after-search steps. A failed step is a warning: the search itself is
    complete and saved, and the step can run again by hand."""
    for step in strategy.after_search(joined.space):
        try:
            step.run(joined, events)
        except NasError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            again = step.again.format(study=joined.study.study_name)
            events.message(f"Warning: {step.title} failed ({first}); run `{again}`")

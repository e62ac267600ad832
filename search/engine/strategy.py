"""Search strategies, chosen once from the space: what scores a trial (the evaluation handed
to the engine's loop), how the sampler is wrapped, and the steps that finish a search.

- `trials`: every candidate trains its own network (KerasEvaluation).
- `supernet`: one weight-sharing network trains first; each trial scores its subnet with the
  inherited weights (engine/supernet.py), and the front is fine-tuned after the search.

The space's half of each strategy (its fingerprint, its checks of the space) is
space/strategies.py, in the room below. A third strategy adds one class here and one there.
This module loads no TensorFlow, since the pool's parent and `nas space` read it too: the
evaluations, which do, are imported by the methods that make them.
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
from nas.search.space.strategies import RULES

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
    """`trials`: every candidate trains its own network."""

    name: ClassVar[str] = "trials"

    def evaluation(self, ctx: EvaluationContext) -> Evaluation:
        from nas.search.engine.keras_evaluation import KerasEvaluation, keras_setup

        return KerasEvaluation(ctx.space, keras_setup(ctx), seed=ctx.options.seed, warn=ctx.events.message)

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
    ) -> dict[str, FinalFigures]:
        """`nas train`: the front (or `trials`) trained with the space's final recipe and
        scored on the test set (engine/final.py)."""
        from nas.search.engine.final import train_final

        return train_final(joined, events, lambda data: self.final_start(joined, data, scratch=scratch), trials=trials)

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
        return "Search strategy: trials (every candidate trained from scratch)"


class SupernetStrategy(Strategy):
    """`supernet`: trials score subnets of one weight-sharing network; the front is fine-tuned."""

    name: ClassVar[str] = "supernet"

    def evaluation(self, ctx: EvaluationContext) -> Evaluation:
        from nas.search.engine.keras_evaluation import keras_setup
        from nas.search.engine.supernet import SupernetEvaluation, fixed_sampler, prepare_supernet

        setup = keras_setup(ctx)
        trained = prepare_supernet(ctx.study, ctx.storage, ctx.space, ctx.options, ctx.events, setup.data)
        # Trials sample only the elastic knobs; the rest stay at what the supernet trained with.
        ctx.study.sampler = fixed_sampler(ctx.study.sampler, trained.elastic)
        return SupernetEvaluation(ctx.space, setup, trained, seed=ctx.options.seed, warn=ctx.events.message)

    def after_search(self, space: SearchSpace) -> list[AfterStep]:
        # Fine-tuning first: the confirmation then measures the networks that will be exported.
        tune = [FINETUNE] if space.spec.search.supernet.finetune.epochs > 0 else []
        return tune + super().after_search(space)

    def final_start(self, joined: JoinedStudy, data: Dataset, *, scratch: bool) -> Start:
        """From the inherited weights (today's fine-tuning, with the final recipe) unless told
        to start from scratch."""
        if scratch:
            return super().final_start(joined, data, scratch=True)
        from nas.search.engine.finetune import inherited_start

        return inherited_start(joined, data)

    def finetune(self, joined: JoinedStudy, events: SearchEvents, *, epochs: int | None = None) -> dict[str, Any]:
        from nas.search.engine.finetune import finetune_front

        return finetune_front(joined, epochs=epochs, say=events.message)

    def describe(self, space: SearchSpace) -> dict[str, Any]:
        from nas.search.space.elastic import elastic_space, progressive_phases
        from nas.search.space.strategies import planned_epochs
        from nas.search.supernet.train import sort_epoch

        settings = space.spec.search.supernet
        elastic = elastic_space(space)  # a space it cannot share was refused when it was loaded
        epochs = planned_epochs(space.spec.search)  # None: auto, decided when the training starts
        progressive = settings.schedule == "progressive" and epochs is not None
        return {
            "strategy": self.name,
            **settings.model_dump(exclude={"fixed"}),
            "phases": progressive_phases(epochs, elastic.dimensions()) if progressive and epochs else None,
            "sort_after": sort_epoch(epochs, settings.sort_channels) if epochs else None,
            "elastic": list(elastic.elastic),
            "fixed": elastic.fixed,
        }

    def summary(self, report: dict[str, Any]) -> str:
        from nas.search.engine.halving import whole_batches
        from nas.search.space.elastic import phase_ranges

        tuned = report["finetune"]["epochs"]
        phases = report["phases"]
        epochs = report["epochs"]
        schedule = report["schedule"] == "progressive"
        return (
            "Search strategy: supernet, "
            + (
                f"{epochs} epochs of "
                if epochs != "auto"
                else f"as many epochs as fit in {report['budget_share']:.0%} of --timeout "
                "(decided by the first epoch's time) of "
            )
            + (
                f"progressive shrinking (epochs by phase: {phase_ranges(phases)})"
                if phases
                else "progressive shrinking"
                if schedule
                else "sandwich training"
            )
            + f", {report['random_subnets'] + 2} subnets per step "
            + ("distilled from the largest" if report["distillation"] == "kl" else "all on the labels")
            + (f", channels sorted by importance after epoch {after}" if (after := report["sort_after"]) else "")
            + (", channels sorted by importance a quarter in" if report["sort_channels"] and epochs == "auto" else "")
            + (", smallest, middle and largest subnet scored after each epoch" if report["reference_subnets"] else "")
            + f", BatchNorm re-calibrated on {report['calibration_batches']} batches"
            + (
                f", subnets scored on {whole_batches(halving['subset'])} validation images first "
                "(successive halving, on sets over twice as large); "
                if (halving := report["halving"])["enabled"]
                else "; "
            )
            + (f"front fine-tuned {tuned} epochs after the search; " if tuned else "front not fine-tuned; ")
            + f"elastic: {', '.join(report['elastic'])}; fixed for the supernet: "
            + (", ".join(f"{k}={v}" for k, v in report["fixed"].items()) or "nothing")
        )


def _finetune(joined: JoinedStudy, events: SearchEvents) -> None:
    strategy_for(joined.space).finetune(joined, events)


FINETUNE = AfterStep("fine-tuning the front", "nas finetune {study}", _finetune)

STRATEGIES: dict[str, Strategy] = {s.name: s for s in (Strategy(), SupernetStrategy())}
assert set(STRATEGIES) == set(RULES), "engine/strategy.py and space/strategies.py register the same names"


def strategy_for(space: SearchSpace) -> Strategy:
    return STRATEGIES[space.spec.search.strategy]


def ended_normally(stopped_by: str) -> bool:
    """Its budget or --timeout; not Ctrl-C or a run of failures: only then do the after-search
    steps run."""
    from nas.search.records import StoppedBy

    return stopped_by in (StoppedBy.BUDGET, StoppedBy.TIMEOUT)


def finish_search(joined: JoinedStudy, events: SearchEvents) -> None:
    """Run the strategy's after-search steps. A failed step is a warning: the search itself is
    complete and saved, and the step can run again by hand."""
    for step in strategy_for(joined.space).after_search(joined.space):
        try:
            step.run(joined, events)
        except NasError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            again = step.again.format(study=joined.study.study_name)
            events.message(f"Warning: {step.title} failed ({first}); run `{again}`")

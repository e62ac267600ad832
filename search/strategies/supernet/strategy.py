"""`supernet` in the engine: trials score subnets of one weight-sharing network (evaluation.py),
and after the search the front is fine-tuned (finetune.py) before the engine confirms it. The
evaluation, which loads TensorFlow, is imported by the method that makes it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from nas.search.engine import AfterStep, EvaluationContext, Strategy
from nas.search.space import SearchSpace
from nas.search.strategies.supernet.elastic import elastic_space, phase_ranges, progressive_phases
from nas.search.strategies.supernet.halving import whole_batches
from nas.search.strategies.supernet.settings import planned_epochs, supernet_settings

if TYPE_CHECKING:
    from nas.search.data import Dataset
    from nas.search.engine import Evaluation, JoinedStudy, SearchEvents, Start


class SupernetStrategy(Strategy):
    """`supernet`: trials score subnets of one weight-sharing network; the front is fine-tuned."""

    name: ClassVar[str] = "supernet"

    def evaluation(self, ctx: EvaluationContext) -> Evaluation:
        from nas.search.strategies.supernet.evaluation import supernet_evaluation

        return supernet_evaluation(ctx)

    def after_search(self, space: SearchSpace) -> list[AfterStep]:
        # Fine-tuning first: the confirmation then measures the networks that will be exported.
        tune = [self.finetune_step()] if supernet_settings(space).finetune.epochs > 0 else []
        return tune + super().after_search(space)

    def final_start(self, joined: JoinedStudy, data: Dataset, *, scratch: bool) -> Start:
        """From the inherited weights (today's fine-tuning, with the final recipe) unless told
        to start from scratch."""
        if scratch:
            return super().final_start(joined, data, scratch=True)
        from nas.search.strategies.supernet.finetune import inherited_start

        return inherited_start(joined, data)

    def finetune(self, joined: JoinedStudy, events: SearchEvents, *, epochs: int | None = None) -> dict[str, Any]:
        from nas.search.strategies.supernet.finetune import finetune_front

        return finetune_front(joined, epochs=epochs, say=events.message)

    def finetune_step(self) -> AfterStep:
        def run(joined: JoinedStudy, events: SearchEvents) -> None:
            self.finetune(joined, events)

        return AfterStep("fine-tuning the front", "nas finetune {study}", run)

    def describe(self, space: SearchSpace) -> dict[str, Any]:
        from nas.search.strategies.supernet.train import sort_epoch

        settings = supernet_settings(space)
        elastic = elastic_space(space)  # a space it cannot share was refused when it was loaded
        epochs = planned_epochs(space)  # None: auto, decided when the training starts
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


STRATEGY = SupernetStrategy()

"""`trials` in the engine: every candidate trains its own network (KerasEvaluation)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from nas.search.engine import EvaluationContext, Strategy

if TYPE_CHECKING:
    from nas.search.engine import Evaluation


class TrialsStrategy(Strategy):
    name: ClassVar[str] = "trials"

    def evaluation(self, ctx: EvaluationContext) -> Evaluation:
        from nas.search.engine import KerasEvaluation, keras_setup

        return KerasEvaluation(ctx.space, keras_setup(ctx), seed=ctx.options.seed, warn=ctx.events.message)

    def summary(self, report: dict[str, Any]) -> str:
        return "Search strategy: trials (every candidate trained from scratch)"


STRATEGY = TrialsStrategy()

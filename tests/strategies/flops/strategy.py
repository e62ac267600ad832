"""`flops` in the engine: a KerasEvaluation whose `train` trains nothing and scores the
network's FLOPs; its `start` makes the study sample at random."""

from __future__ import annotations

from typing import Any, ClassVar

import optuna

from nas.search.engine import EpochCallback, EvaluationContext, KerasEvaluation, Strategy, TrialWork, keras_setup
from nas.search.training import TrainResult

from .settings import SETTINGS


class FlopsEvaluation(KerasEvaluation):
    def __init__(self, ctx: EvaluationContext) -> None:
        super().__init__(ctx.space, keras_setup(ctx), seed=ctx.options.seed, warn=ctx.events.message)
        self.study, self.sampler_seed = ctx.study, ctx.options.seed
        self.scale = SETTINGS.of(ctx.space.spec.search).scale  # type: ignore[attr-defined]

    def start(self) -> None:
        self.study.sampler = optuna.samplers.RandomSampler(seed=self.sampler_seed)

    def train(self, work: TrialWork, on_epoch: EpochCallback) -> TrainResult:
        flops = work.net.flops()
        score = flops / (flops + self.scale)
        return TrainResult(score, 0.0, {"val_accuracy": [score]}, 0.0, 0.0)


class FlopsStrategy(Strategy):
    name: ClassVar[str] = "flops"

    def evaluation(self, ctx: EvaluationContext) -> FlopsEvaluation:
        return FlopsEvaluation(ctx)

    def describe(self, space: Any) -> dict[str, Any]:
        return {"strategy": self.name, "scale": SETTINGS.of(space.spec.search).scale}  # type: ignore[attr-defined]

    def summary(self, report: dict[str, Any]) -> str:
        return f"Search strategy: flops (random architectures scored by FLOPs, half at {report['scale']:g})"


STRATEGY = FlopsStrategy()

"""How many supernet epochs fit in a search's time budget (`search.supernet.epochs: auto`).

The training's cost is measured, not guessed: sandwich steps are timed on the data (the
first step of each spatial shape traces its graph and is counted apart), on a throw-away
optimizer, and the weights are put back afterwards, so the training starts where it would
have. An epoch costs its steps at the median step time, plus one scoring of the reference
subnets where they are scored (timed once). The training traces its own graphs again (its
optimizer's schedule depends on the epochs decided here), so the tracing is counted twice.
The epochs are what fits in the budget's share after the probe, at least 1. The count is
decided once per study and stored; a resumed search keeps it (engine/supernet.py).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nas.search.data import Dataset, pipeline
from nas.search.nets import NetworkPlan, plan_network
from nas.search.space.elastic import ElasticSpace
from nas.search.supernet.network import Supernet
from nas.search.supernet.steps import SANDWICH, SandwichStep, draw_sandwich
from nas.search.training.train import make_optimizer

PROBE_STEPS = 12  # timed steps (after tracing): a median steady to a few per cent
PROBE_SECONDS = 120.0  # stop probing after this long, with the steps timed so far


@dataclass(frozen=True)
class EpochBudget:
    epochs: int
    epoch_seconds: float  # estimated, reference scoring included
    step_seconds: float  # median of the timed steps
    steps_timed: int
    trace_seconds: float  # the probe's steps that traced a graph
    probe_seconds: float

    def describe(self, seconds: float) -> str:
        return (
            f"{self.epochs} epochs fit in {seconds:.0f} s (an epoch about {self.epoch_seconds:.0f} s: "
            f"{self.steps_timed} steps timed at a median {self.step_seconds:.3f} s, "
            f"{self.trace_seconds:.0f} s of tracing; probe {self.probe_seconds:.0f} s)"
        )


def epochs_for_budget(
    supernet: Supernet,
    elastic: ElasticSpace,
    data: Dataset,
    *,
    seconds: float,
    seed: int,
    score: Callable[[Supernet], Any] | None = None,
    random_subnets: int = SANDWICH - 2,
    distillation: str = "kl",
) -> EpochBudget:
    """The epochs of sandwich training that fit in `seconds` on this machine, now."""
    started = time.perf_counter()
    c = supernet.candidate
    steps_per_epoch = math.ceil(len(data.y_train) / c.batch_size)
    state = supernet.get_state()
    optimizer = make_optimizer(c.optimizer, c.learning_rate, steps_per_epoch)
    optimizer.build(supernet.trainable_variables)
    size, distill = random_subnets + 2, distillation == "kl"
    step = SandwichStep(supernet, data.x_train.shape[1:], optimizer, size=size, distill=distill)

    def plan(params: dict[str, Any]) -> NetworkPlan:
        return plan_network(elastic.space.candidate(params, num_classes=c.num_classes, channels=c.channels))

    ends = (plan(elastic.largest), plan(elastic.smallest))
    rng = np.random.default_rng([seed, 0])  # epoch 0: no training epoch draws from this stream
    timed: list[float] = []
    tracing = 0.0
    try:
        for x, y in pipeline(data.x_train, data.y_train, c.batch_size, shuffle_seed=seed):
            sandwich = draw_sandwich(elastic, rng, {}, ends, plan, random_subnets)
            traced = step.is_traced(sandwich)
            t0 = time.perf_counter()
            float(step(x, y, sandwich)[0])  # waits for the step to finish
            took = time.perf_counter() - t0
            if traced:
                timed.append(took)
            else:
                tracing += took
            if len(timed) >= PROBE_STEPS or (timed and time.perf_counter() - started > PROBE_SECONDS):
                break
        scoring = 0.0
        if score is not None:
            t0 = time.perf_counter()
            score(supernet)
            scoring = time.perf_counter() - t0
    finally:
        supernet.set_state(state)
    # A set too small to time a traced step twice: its traced steps over-estimate, safely.
    step_seconds = statistics.median(timed) if timed else tracing / max(1, steps_per_epoch)
    epoch_seconds = step_seconds * steps_per_epoch + scoring
    probe = time.perf_counter() - started
    left = seconds - probe - tracing  # the training traces its graphs again
    return EpochBudget(
        epochs=max(1, int(left // epoch_seconds)) if epoch_seconds > 0 else 1,
        epoch_seconds=epoch_seconds,
        step_seconds=step_seconds,
        steps_timed=len(timed),
        trace_seconds=tracing,
        probe_seconds=probe,
    )

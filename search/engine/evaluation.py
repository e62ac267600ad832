"""The engine's one seam to the world: how a trial's network is built, measured, trained,
deployed and kept.

`TrialRunner` (engine/trial.py) owns every decision of a trial: sampling, planning, the
constraints and screening, early stopping's rungs, what is recorded and told. It reaches the
network only through an `Evaluation`, which the strategy makes (engine/strategy.py) or a
caller hands the engine's entry. `KerasEvaluation` (engine/keras_evaluation.py) does it for
real (Keras, the timing protocol on this device, the tf.data pipeline, LiteRT); a tabulated
benchmark answers the same calls from its table, so replaying a search against the table runs
the engine's real loop and trial code and nothing stands in for it but the figures. No
TensorFlow here: the loop and the trial code load without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import optuna

from nas.search.records import TrialAttr
from nas.search.space import Candidate
from nas.storage import critical

if TYPE_CHECKING:
    from nas.search.deploy import Deployed
    from nas.search.hardware import HardwareCost
    from nas.search.nets import NetworkPlan
    from nas.search.training import TrainResult
    from nas.storage import WeightStore

PhaseCallback = Callable[[str], None]
# (epoch from 1, epochs, that epoch's logs: loss and val_accuracy at least). It may raise to
# end the training there (early stopping); the evaluation lets the exception through.
EpochCallback = Callable[[int, int, dict[str, float]], None]
# (an upper bound of the accuracy the whole validation set would give, what backs it), from an
# evaluation that scores a subset first (the supernet's successive halving). It may raise to
# end the trial there, PRUNED, when even that bound is dominated; the evaluation lets it through.
BoundCallback = Callable[[float, dict[str, Any]], None]


def _no_bound_check(upper: float, record: dict[str, Any]) -> None:
    """A TrialWork made outside a TrialRunner: every subnet is scored in full."""


@dataclass
class TrialWork:
    """What one trial has worked out so far; each phase adds its part."""

    trial: optuna.Trial
    candidate: Candidate
    net_full: NetworkPlan = field(init=False)  # as sampled
    net: NetworkPlan = field(init=False)  # as measured and deployed (channel pruning cuts it)
    model: Any = None  # the Keras model, where the evaluation builds one
    cost: HardwareCost | None = None
    result: TrainResult | None = None
    deployed: Deployed | None = None
    durations: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    history: dict[str, list[float]] = field(default_factory=dict)  # loss and val_accuracy per epoch so far
    rungs: dict[str, dict[str, Any]] = field(default_factory=dict)  # TrialAttr.RUNGS as it grows
    constraints: dict[str, float] = field(default_factory=dict)  # as set on the trial, static and measured
    on_bound: BoundCallback = _no_bound_check  # the runner's: whether a subset's bound stops the trial

    @contextmanager
    def phase(self, name: str, on_phase: PhaseCallback) -> Iterator[None]:
        critical.checkpoint()
        on_phase(name)
        t0 = time.perf_counter()
        ended = False
        try:
            yield
            ended = True
        finally:
            self.durations[name] = round(time.perf_counter() - t0, 4)
            self.durations["total"] = round(time.perf_counter() - self.started, 4)
            try:
                self.trial.set_user_attr(TrialAttr.DURATIONS, self.durations)
            except Exception:
                # A phase cut short (a stop, an error) ends the trial for that reason; a
                # failed write of its durations must not replace it.
                if ended:
                    raise


class Evaluation(Protocol):
    """What a trial asks of its network, in this order; each call may raise (a failed trial).
    Its attributes are what the worker's set-up found: the data's shape, the input pipeline's
    speed and where kept weights go."""

    keeps_weights: bool  # whether `save` keeps the trained network (a "save" phase, retention)
    num_classes: int  # of the data, for sampling
    channels: int
    delivery: float | None  # images/s the input pipeline delivers (the input-bound check); None: unknown
    weights: WeightStore | None  # where `save` keeps them (retention deletes there)

    def start(self) -> None:
        """Work done once before the first trial, when the search runs (a supernet's training);
        making the evaluation did none."""
        ...

    def worker_attrs(self) -> dict[str, Any]:
        """What this worker's device adds to each trial's `worker` attribute."""
        ...

    def scope(self, work: TrialWork) -> AbstractContextManager[None]:
        """Around everything from `build` on (a precision policy; freeing the model after)."""
        ...

    def build(self, work: TrialWork) -> None: ...

    def measure(self, work: TrialWork, *, need_latency: bool) -> HardwareCost: ...

    def peak_flops(self, precision: str) -> tuple[float, str] | None:
        """The device's peak FLOP/s at `precision` and where the figure comes from."""
        ...

    def train(self, work: TrialWork, on_epoch: EpochCallback) -> TrainResult: ...

    def deploy(self, work: TrialWork) -> Deployed: ...

    def save(self, work: TrialWork) -> None: ...

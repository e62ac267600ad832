"""The engine's one seam to the world: how a trial's network is built, measured, trained,
deployed and kept.

`TrialRunner` (engine/trial.py) owns every decision of a trial: sampling, planning, the
constraints and screening, early stopping's rungs, what is recorded and told. It reaches the
network only through an `Evaluation`. `KerasEvaluation` does it for real (Keras, the timing
protocol on this device, the tf.data pipeline, LiteRT); a tabulated benchmark answers the
same calls from its table, so replaying a search against the table runs the engine's real
code and nothing stands in for it but the figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import keras
import optuna
from sqlalchemy.exc import SQLAlchemyError

from nas.search.data import Dataset
from nas.search.deploy import Deployed
from nas.search.engine.stored import deploy_as_trial
from nas.search.hardware import HardwareCost, HardwareProfiler
from nas.search.nets import NetworkPlan, build_plan
from nas.search.records import TrialAttr
from nas.search.space import Candidate, SearchSpace
from nas.search.training import TrainResult, precision_policy, sparsity_report, train_compressed

if TYPE_CHECKING:
    from nas.storage.weights import WeightStore

PhaseCallback = Callable[[str], None]
# (epoch from 1, epochs, that epoch's logs: loss and val_accuracy at least). It may raise to
# end the training there (early stopping); the evaluation lets the exception through.
EpochCallback = Callable[[int, int, dict[str, float]], None]


@dataclass
class TrialWork:
    """What one trial has worked out so far; each phase adds its part."""

    trial: optuna.Trial
    candidate: Candidate
    net_full: NetworkPlan = field(init=False)  # as sampled
    net: NetworkPlan = field(init=False)  # as measured and deployed (channel pruning cuts it)
    model: keras.Model | None = None
    cost: HardwareCost | None = None
    result: TrainResult | None = None
    deployed: Deployed | None = None
    durations: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    history: dict[str, list[float]] = field(default_factory=dict)  # loss and val_accuracy per epoch so far
    rungs: dict[str, dict[str, Any]] = field(default_factory=dict)  # TrialAttr.RUNGS as it grows
    constraints: dict[str, float] = field(default_factory=dict)  # as set on the trial, static and measured

    @contextmanager
    def phase(self, name: str, on_phase: PhaseCallback) -> Iterator[None]:
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
    """What a trial asks of its network, in this order; each call may raise (a failed trial)."""

    keeps_weights: bool  # whether `save` keeps the trained network (a "save" phase, retention)

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


class KerasEvaluation:
    """The real thing: the network built in Keras, timed on this worker's device by the
    profiler (under its lock, through its cache), trained on the dataset, converted and
    scored as deployed, its weights kept for `nas export`."""

    def __init__(
        self,
        space: SearchSpace,
        data: Dataset,
        profiler: HardwareProfiler,
        *,
        seed: int,
        weights: WeightStore | None = None,
        warn: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.space, self.data, self.profiler, self.seed = space, data, profiler, seed
        self.weights, self.warn = weights, warn
        self.keeps_weights = weights is not None

    @contextmanager
    def scope(self, work: TrialWork) -> Iterator[None]:
        try:
            with precision_policy(work.candidate.precision):
                yield
        finally:
            # Without this, every trial's graphs and weights stay alive in the process and a
            # long search grows until it is killed (the classic KerasTuner complaint). With
            # free_memory, clear_session runs the full garbage collection itself.
            work.model = None
            keras.backend.clear_session(free_memory=True)

    def build(self, work: TrialWork) -> None:
        keras.utils.set_random_seed(self.seed + work.trial.number)
        work.model = build_plan(work.net)

    def measure(self, work: TrialWork, *, need_latency: bool) -> HardwareCost:
        assert work.model is not None
        return self.profiler.measure(
            work.model, precision=work.candidate.precision, xla=work.candidate.xla, need_latency=need_latency
        )

    def peak_flops(self, precision: str) -> tuple[float, str] | None:
        return self.profiler.peak_flops(precision)

    def train(self, work: TrialWork, on_epoch: EpochCallback) -> TrainResult:
        assert work.model is not None
        spec, candidate = self.space.spec, work.candidate
        augmentation = spec.dataset.augmentation
        with self.profiler.lock.shared():  # no measuring elsewhere on this device meanwhile
            work.model, result = train_compressed(
                work.model,
                work.net_full,
                work.net,
                candidate,
                self.data,
                seed=self.seed + work.trial.number,
                pruning=spec.compression.pruning,
                augmentation=augmentation if augmentation.active else None,
                on_epoch=on_epoch,
            )
        if candidate.pruning in ("magnitude", "n_m"):
            exclude: list[str] = list(spec.compression.pruning.exclude)
            work.trial.set_user_attr(TrialAttr.SPARSITY, sparsity_report(work.model, exclude))
        return result

    def deploy(self, work: TrialWork) -> Deployed:
        assert work.model is not None
        latency = "tflite_latency" in self.space.spec.objectives
        with self.profiler.lock.shared():
            return deploy_as_trial(work.model, self.space, work.candidate, self.data, latency=latency)

    def save(self, work: TrialWork) -> None:
        """Keep the trained model for `nas export`; a full disk costs the weights, not the trial."""
        assert self.weights is not None and work.model is not None
        trial = work.trial
        try:
            stored = self.weights.save_model(trial.study.study_name, trial.number, work.model)
            trial.set_user_attr(TrialAttr.WEIGHTS_BYTES, stored.bytes)
        except (OSError, SQLAlchemyError) as exc:
            trial.set_user_attr(TrialAttr.WEIGHTS_ERROR, str(exc)[:300])
            self.warn(f"Warning: weights of trial {trial.number} not saved: {exc}")

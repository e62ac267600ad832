"""The real evaluation: the network built in Keras, timed on this worker's device by nas'
protocol, trained on the data set, converted and scored as deployed, its weights kept for
`nas export`; and the worker's set-up it needs (the data, the input pipeline's speed, the
profiler and its cache, the weight store), made once per worker (`keras_setup`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import keras
from sqlalchemy.exc import SQLAlchemyError

from nas.errors import NasError
from nas.search.data import Dataset, delivery_rate, load_dataset
from nas.search.deploy import Deployed
from nas.search.engine.evaluation import EpochCallback, TrialWork
from nas.search.engine.stored import deploy_as_trial
from nas.search.hardware import HardwareCost, HardwareProfiler
from nas.search.nets import build_plan
from nas.search.records import StudyAttr, TrialAttr
from nas.search.runtime import import_tensorflow, placement_attr
from nas.search.space import SearchSpace
from nas.search.training import TrainResult, precision_policy, sparsity_report, train_compressed
from nas.storage import MeasurementCache, WeightStore, default_artifact_root

if TYPE_CHECKING:
    from nas.search.engine.strategy import EvaluationContext


@dataclass(frozen=True)
class KerasSetup:
    """What a worker loads and measures once before its first trial."""

    data: Dataset
    profiler: HardwareProfiler
    weights: WeightStore | None
    delivery: float  # images/s the training pipeline delivers at the space's smallest batch


def keras_setup(ctx: EvaluationContext) -> KerasSetup:
    space, options, study = ctx.space, ctx.options, ctx.study
    data = ctx.data if ctx.data is not None else load_dataset(space.spec.dataset, warn=ctx.events.message)
    expected = space.spec.model.num_classes
    if expected is not None and expected != data.num_classes:
        raise NasError(f"model.num_classes: {expected}, but the dataset has {data.num_classes} classes")
    batch = space.spec.training.batch_size
    smallest = int(batch.value if batch.fixed else min(batch.choices) if batch.choices else batch.low or 32)
    delivery = delivery_rate(data, smallest)
    study.set_user_attr(StudyAttr.DATASET, data.summary())
    study.set_user_attr(StudyAttr.PIPELINE, {"delivery_images_per_s": round(delivery, 1), "batch_size": smallest})
    cache = MeasurementCache(ctx.storage.engine) if options.cache else None
    profiler = HardwareProfiler(space.spec.search_measure(), cache)
    weights = None
    if options.keep_weights:
        weights = WeightStore(ctx.storage.engine, default_artifact_root(options.storage, options.artifacts))
        weights.folder(study.study_name)  # a folder it cannot use stops the search before any training
    return KerasSetup(data, profiler, weights, delivery)


class KerasEvaluation:
    """The real thing: the network built in Keras, timed on this worker's device by the
    profiler (under its lock, through its cache), trained on the dataset, converted and
    scored as deployed, its weights kept for `nas export`."""

    def __init__(
        self, space: SearchSpace, setup: KerasSetup, *, seed: int, warn: Callable[[str], None] = lambda _: None
    ) -> None:
        self.space, self.data, self.profiler, self.seed = space, setup.data, setup.profiler, seed
        self.weights, self.warn = setup.weights, warn
        self.keeps_weights = setup.weights is not None
        self.num_classes, self.channels = setup.data.num_classes, setup.data.channels
        self.delivery: float | None = setup.delivery

    def start(self) -> None:
        """Nothing to do before the first trial: each trains its own network."""

    def worker_attrs(self) -> dict[str, Any]:
        return placement_attr(import_tensorflow())

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

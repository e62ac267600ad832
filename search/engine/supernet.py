"""The supernet strategy in the engine: its training, once per study, and the evaluation its
trials use instead of training a network.

A trial of a supernet study is an ordinary trial (sampled, planned, screened, measured by the
same protocol and cache, deployed, stored), except that its network is the subnet taken out of
the supernet with its inherited weights and its accuracy is that network's on the validation
set after BatchNorm is re-estimated (`accuracy_source: supernet`). So `nas status`, `pareto`,
the report and the dashboard read it like any study.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import keras
import numpy as np
import optuna

from nas.errors import NasError
from nas.search.data import Dataset, pipeline
from nas.search.engine.evaluation import EpochCallback, TrialWork
from nas.search.engine.events import SearchEvents
from nas.search.engine.halving import SCORE_BATCH, first_images, upper_bound
from nas.search.engine.keras_evaluation import KerasEvaluation, KerasSetup
from nas.search.engine.options import SearchOptions
from nas.search.engine.stored import converts
from nas.search.records import StudyAttr, TrialAttr
from nas.search.runtime import import_tensorflow
from nas.search.space import SearchSpace
from nas.search.space.elastic import ElasticSpace, elastic_space, phase_ranges, progressive_phases
from nas.search.space.strategies import planned_epochs
from nas.search.supernet.budget import epochs_for_budget
from nas.search.supernet.extract import extract, inherit, recalibrate
from nas.search.supernet.network import Supernet
from nas.search.supernet.train import (
    DecideEpochs,
    SupernetTraining,
    checkpoint_progress,
    load_checkpoint,
    sort_epoch,
    train_supernet,
)
from nas.search.training import TrainResult
from nas.storage import StorageURL, study_lock
from nas.storage.paths import own_folder, safe_name
from nas.storage.weights import default_artifact_root

CHECKPOINT = "supernet.npz"


@dataclass(frozen=True)
class TrainedSupernet:
    supernet: Supernet
    elastic: ElasticSpace
    training: SupernetTraining


def checkpoint_path(url: StorageURL, artifacts: str | None, study_name: str) -> Path:
    root = default_artifact_root(url, artifacts)
    return own_folder(root, safe_name(study_name, "study")) / CHECKPOINT


def fixed_sampler(sampler: optuna.samplers.BaseSampler, elastic: ElasticSpace) -> optuna.samplers.BaseSampler:
    """Trials sample only the elastic parameters; the training knobs are stored with the
    values the supernet trained with, so every stored trial rebuilds with the space as it is."""
    if not elastic.fixed:
        return sampler
    return optuna.samplers.PartialFixedSampler(elastic.fixed, sampler)


def prepare_supernet(
    study: optuna.Study,
    storage: optuna.storages.RDBStorage,
    space: SearchSpace,
    options: SearchOptions,
    events: SearchEvents,
    data: Dataset,
) -> TrainedSupernet:
    """The study's trained supernet: trained here (or resumed from its last checkpoint) by the
    first worker to get the supernet's lock; the others wait for it and load the result."""
    elastic = elastic_space(space)
    settings = space.spec.search.supernet
    path = checkpoint_path(options.storage, options.artifacts, study.study_name)
    largest = elastic.space.candidate(elastic.largest, num_classes=data.num_classes, channels=data.channels)
    supernet = Supernet(largest, seed=options.seed)
    with study_lock(options.storage, storage.engine, f"{study.study_name}/supernet"):
        training = SupernetTraining(planned_epochs(space.spec.search) or 0, space=space.fingerprint())
        if path.exists():
            held = checkpoint_progress(path)
            if held.space and held.space != training.space:
                raise NasError(
                    f"{path} holds a supernet trained for another space (an earlier study of the name "
                    f"'{study.study_name}'); delete it, or keep this study's files elsewhere with {{artifacts}}"
                )
            training.done, training.history = held.done, held.history
            training.epochs = training.epochs or held.epochs
        score = ReferenceSubnets(elastic, data, settings.calibration_batches) if settings.reference_subnets else None
        decide = None if training.epochs else _epochs_decider(study, elastic, options, events)
        sort_after = sort_epoch(training.epochs, settings.sort_channels) if training.epochs else 0
        if training.epochs and training.done >= training.epochs:
            load_checkpoint(path, supernet)  # an unfinished one train_supernet loads, with the optimizer
            events.message(f"supernet: trained ({training.done} epochs), loaded from {path}")
            return TrainedSupernet(supernet, elastic, training)
        progressive = settings.schedule == "progressive"
        phases = progressive_phases(training.epochs, elastic.dimensions()) if progressive and training.epochs else []
        if training.done:
            events.message(f"supernet: resuming from epoch {training.done} of {training.epochs} ({path})")
        else:
            count = f"{training.epochs} epochs" if training.epochs else "1 epoch, then as many as fit the budget"
            events.message(
                f"supernet: training {count} ("
                + (f"progressive shrinking, epochs by phase: {phase_ranges(phases)}; " if phases else "")
                + ("progressive shrinking; " if progressive and not phases else "")
                + f"sandwich of {settings.random_subnets + 2} subnets per step"
                + (", distilled from the largest" if settings.distillation == "kl" else ", all on the labels")
                + (f", channels sorted by importance after epoch {sort_after}" if sort_after else "")
                + "), fixed: "
                + ", ".join(f"{k}={v}" for k, v in elastic.fixed.items())
            )

        def on_epoch(epoch: int, epochs: int, figures: dict[str, Any]) -> None:
            record: dict[str, Any] = (study.user_attrs.get(StudyAttr.SUPERNET) or {}) | {
                "epochs": epochs,
                "done": epoch,
                "history": training.history,
                "fixed": elastic.fixed,
                "checkpoint": str(path),
            }
            study.set_user_attr(StudyAttr.SUPERNET, record)
            phase = f" ({figures['phase']} phase)" if "phase" in figures else ""
            scored = figures.get("reference_accuracy")
            events.message(
                f"supernet: epoch {epoch}/{epochs}{phase}, loss {figures['loss']:.3f}, train accuracy largest "
                f"{figures['largest_accuracy']:.3f} smallest {figures['smallest_accuracy']:.3f}"
                + (f"; validation accuracy {', '.join(f'{k} {v:.3f}' for k, v in scored.items())}" if scored else "")
                + f" ({figures['seconds']:.0f} s)"
            )

        train_supernet(
            supernet,
            elastic,
            data,
            training,
            path,
            seed=options.seed,
            on_epoch=on_epoch,
            sort_channels=settings.sort_channels,
            schedule=settings.schedule,
            score=score,
            random_subnets=settings.random_subnets,
            distillation=settings.distillation,
            decide=decide,
        )
    return TrainedSupernet(supernet, elastic, training)


def _epochs_decider(
    study: optuna.Study, elastic: ElasticSpace, options: SearchOptions, events: SearchEvents
) -> DecideEpochs:
    """`epochs: auto`: after the first epoch, the count that fits in `budget_share` of
    --timeout (budget.py), said and kept on the study with its figures."""
    if options.timeout is None:
        raise NasError(
            "search.supernet.epochs: auto needs a time budget to fit the epochs in; give --timeout, or set the epochs"
        )
    share = elastic.space.spec.search.supernet.budget_share
    started = time.monotonic()  # the search's clock started moments before (loading the data)

    def decide(first: float, tracing: float, minimum: int) -> int:
        assert options.timeout is not None
        spent = time.monotonic() - started
        budget = epochs_for_budget(first, tracing, spent, share * options.timeout, minimum)
        events.message(f"supernet: {budget.describe()}")
        study.set_user_attr(StudyAttr.SUPERNET, {"epochs": budget.epochs, "budget": asdict(budget)})
        return budget.epochs

    return decide


class ReferenceSubnets:
    """The training's progress as a user can watch it: after each epoch, the smallest, a
    middle (ElasticSpace.middle) and the largest subnet scored as a trial scores its subnet
    (extracted, BatchNorm re-calibrated on the same batches, validation accuracy)."""

    def __init__(self, elastic: ElasticSpace, data: Dataset, calibration: int) -> None:
        self.data = data
        subnets = {"smallest": elastic.smallest, "middle": elastic.middle(), "largest": elastic.largest}
        c = elastic.space.candidate(elastic.largest, num_classes=data.num_classes, channels=data.channels)
        self.candidates = {
            name: elastic.space.candidate(params, num_classes=data.num_classes, channels=data.channels)
            for name, params in subnets.items()
        }
        self.batches = calibration_batches(data, c.batch_size, calibration)
        self.models: dict[str, keras.Model] = {}

    def __call__(self, supernet: Supernet) -> dict[str, float]:
        out = {}
        for name, candidate in self.candidates.items():
            model = self.models.get(name)
            if model is None:  # built once, its weights inherited again each epoch
                model = self.models[name] = extract(supernet, candidate)
            else:
                inherit(supernet, model)
            recalibrate(model, self.batches)
            out[name] = round(evaluate(model, self.data)[1], 5)
        return out


def calibration_batches(data: Dataset, batch_size: int, count: int) -> list[Any]:
    """A fixed training subset: every subnet's statistics come from the same images."""
    batches = []
    for x, y in pipeline(data.x_train, data.y_train, batch_size, shuffle_seed=0):
        batches.append((x, y))
        if len(batches) == count:
            break
    return batches


def traced_forward(model: keras.Model) -> Any:
    """`model`'s inference pass as one traced graph for any batch size. Eagerly, each of the
    validation set's 40 batches runs the subnet op by op from Python, which on 2 CPU cores cost
    more than the trace (benchmarks/subnet_cost.py; issue 47's subnets per hour)."""
    tf = import_tensorflow()
    spec = tf.TensorSpec((None, *model.input_shape[1:]), tf.float32)
    return tf.function(lambda images: model(images, training=False), input_signature=[spec])


@dataclass
class Scored:
    """A running sum over validation images: cross-entropy, correct predictions, images."""

    loss_sum: float = 0.0
    correct: int = 0
    count: int = 0
    # One trace per model: halving scores the same subnet twice (its subset, then the rest).
    _forwards: dict[int, Any] = field(default_factory=dict, repr=False)

    def add(self, model: keras.Model, x: np.ndarray, y: np.ndarray) -> Scored:
        forward = self._forwards.get(id(model))
        if forward is None:
            forward = self._forwards[id(model)] = traced_forward(model)
        for images, batch_labels in pipeline(x, y, SCORE_BATCH, shuffle_seed=None):
            probs = np.asarray(forward(images))
            labels = np.asarray(batch_labels)
            picked = np.clip(probs[np.arange(len(labels)), labels], 1e-7, 1.0)
            self.loss_sum += float(-np.log(picked).sum())
            self.correct += int((probs.argmax(axis=-1) == labels).sum())
            self.count += len(labels)
        return self

    def figures(self) -> tuple[float, float]:
        """(loss, accuracy) over the images scored."""
        count = max(1, self.count)
        return self.loss_sum / count, self.correct / count


def evaluate(model: keras.Model, data: Dataset) -> tuple[float, float]:
    """(validation loss, validation accuracy) of `model`."""
    return Scored().add(model, data.x_val, data.y_val).figures()


class SupernetEvaluation(KerasEvaluation):
    """The seam for a supernet study: `build` extracts the subnet, `train` re-calibrates its
    BatchNorm and scores it (on a subset first under halving); measuring, deploying and keeping
    are the real ones."""

    def __init__(self, space: SearchSpace, setup: KerasSetup, trained: TrainedSupernet, **kwargs: Any) -> None:
        super().__init__(space, setup, **kwargs)
        self.trained = trained
        data = setup.data
        settings = space.spec.search.supernet
        self.calibration = calibration_batches(
            data, trained.supernet.candidate.batch_size, settings.calibration_batches
        )
        self.halving = settings.halving
        self.first, warning = first_images(settings.halving, data.y_val, SCORE_BATCH)
        if warning:
            self.warn(warning)
        elif self.first:
            self.warn(
                f"supernet: successive halving: each subnet is scored on {self.first} of the {len(data.y_val)} "
                "validation images first, on the rest only if it may reach the front"
            )

    def _halves(self, work: TrialWork) -> bool:
        """Whether this subnet is scored on the subset first: only where the accuracy it is told
        is its Keras model's. A converted one (quantized, or for model_size or tflite_latency) is
        told its TFLite accuracy, which the Keras model's subset does not bound."""
        return bool(self.first) and not converts(self.space, work.candidate)

    def build(self, work: TrialWork) -> None:
        work.model = extract(self.trained.supernet, work.candidate)

    def train(self, work: TrialWork, on_epoch: EpochCallback) -> TrainResult:
        assert work.model is not None
        started = time.perf_counter()
        work.trial.set_user_attr(TrialAttr.ACCURACY_SOURCE, "supernet")
        recalibrate(work.model, self.calibration)
        data, scored = self.data, Scored()
        if self._halves(work):
            n, z = self.first, self.halving.z
            scored.add(work.model, data.x_val[:n], data.y_val[:n])
            record: dict[str, Any] = {
                "images": n,
                "of": len(data.y_val),
                "correct": scored.correct,
                "accuracy": scored.correct / n,
                "upper_bound": upper_bound(scored.correct, n, z),
                "z": z,
                "seconds": round(time.perf_counter() - started, 4),
            }
            work.on_bound(record["upper_bound"], record)  # raises when the trial stops here
            scored.add(work.model, data.x_val[n:], data.y_val[n:])  # the same batches, the same sums
        else:
            scored.add(work.model, data.x_val, data.y_val)
        loss, accuracy = scored.figures()
        seconds = round(time.perf_counter() - started, 4)
        history = {"val_loss": [loss], "val_accuracy": [accuracy], "seconds": [seconds]}
        return TrainResult(accuracy, loss, history, seconds, 0.0)

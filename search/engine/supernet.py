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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import keras
import numpy as np
import optuna

from nas.search.data import Dataset, pipeline
from nas.search.engine.evaluation import EpochCallback, TrialWork
from nas.search.engine.events import SearchEvents
from nas.search.engine.keras_evaluation import KerasEvaluation, KerasSetup
from nas.search.engine.options import SearchOptions
from nas.search.records import StudyAttr, TrialAttr
from nas.search.space import SearchSpace
from nas.search.space.elastic import ElasticSpace, elastic_space, phase_ranges, progressive_phases
from nas.search.supernet.extract import extract, inherit, recalibrate
from nas.search.supernet.network import Supernet
from nas.search.supernet.train import (
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
        training = SupernetTraining(settings.epochs)
        sort_after = sort_epoch(settings.epochs, settings.sort_channels)
        if path.exists():
            held = checkpoint_progress(path)
            training.done, training.history = held.done, held.history
        if training.done >= training.epochs:
            load_checkpoint(path, supernet)  # an unfinished one train_supernet loads, with the optimizer
            events.message(f"supernet: trained ({training.done} epochs), loaded from {path}")
            return TrainedSupernet(supernet, elastic, training)
        progressive = settings.schedule == "progressive"
        phases = progressive_phases(settings.epochs, elastic.dimensions()) if progressive else []
        if training.done:
            events.message(f"supernet: resuming from epoch {training.done} of {training.epochs} ({path})")
        else:
            events.message(
                f"supernet: training {training.epochs} epochs ("
                + (f"progressive shrinking, epochs by phase: {phase_ranges(phases)}; " if progressive else "")
                + "sandwich of 4 subnets per step"
                + (f", channels sorted by importance after epoch {sort_after}" if sort_after else "")
                + "), fixed: "
                + ", ".join(f"{k}={v}" for k, v in elastic.fixed.items())
            )

        def on_epoch(epoch: int, epochs: int, figures: dict[str, Any]) -> None:
            record: dict[str, Any] = {
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

        score = ReferenceSubnets(elastic, data, settings.calibration_batches) if settings.reference_subnets else None
        train_supernet(
            supernet,
            elastic,
            data,
            training,
            path,
            seed=options.seed,
            on_epoch=on_epoch,
            sort_after=sort_after,
            schedule=settings.schedule,
            score=score,
        )
    return TrainedSupernet(supernet, elastic, training)


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


def evaluate(model: keras.Model, data: Dataset) -> tuple[float, float]:
    """(validation loss, validation accuracy) of `model`."""
    loss_sum, correct = 0.0, 0
    for x, y in pipeline(data.x_val, data.y_val, 256, shuffle_seed=None):
        probs = np.asarray(model(x, training=False))
        labels = np.asarray(y)
        picked = np.clip(probs[np.arange(len(labels)), labels], 1e-7, 1.0)
        loss_sum += float(-np.log(picked).sum())
        correct += int((probs.argmax(axis=-1) == labels).sum())
    count = max(1, len(data.y_val))
    return loss_sum / count, correct / count


class SupernetEvaluation(KerasEvaluation):
    """The seam for a supernet study: `build` extracts the subnet, `train` re-calibrates its
    BatchNorm and scores it; measuring, deploying and keeping are the real ones."""

    def __init__(self, space: SearchSpace, setup: KerasSetup, trained: TrainedSupernet, **kwargs: Any) -> None:
        super().__init__(space, setup, **kwargs)
        self.trained = trained
        data = setup.data
        settings = space.spec.search.supernet
        self.calibration = calibration_batches(
            data, trained.supernet.candidate.batch_size, settings.calibration_batches
        )

    def build(self, work: TrialWork) -> None:
        work.model = extract(self.trained.supernet, work.candidate)

    def train(self, work: TrialWork, on_epoch: EpochCallback) -> TrainResult:
        assert work.model is not None
        started = time.perf_counter()
        recalibrate(work.model, self.calibration)
        loss, accuracy = evaluate(work.model, self.data)
        seconds = round(time.perf_counter() - started, 4)
        work.trial.set_user_attr(TrialAttr.ACCURACY_SOURCE, "supernet")
        history = {"val_loss": [loss], "val_accuracy": [accuracy], "seconds": [seconds]}
        return TrainResult(accuracy, loss, history, seconds, 0.0)

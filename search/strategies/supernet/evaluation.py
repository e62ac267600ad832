"""The supernet strategy in the engine: its training, once per study, and the evaluation its
trials use instead of training a network.

A trial of a supernet study is an ordinary trial (sampled, planned, screened, measured by the
same protocol and cache, deployed, stored), except that its network is the subnet taken out of
the supernet with its inherited weights and its accuracy is that network's on the validation
set after BatchNorm is re-estimated (`accuracy_source: supernet`). So `nas status`, `pareto`,
the report and the dashboard read it like any study.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import keras
import optuna

from nas.errors import NasError
from nas.search.data import Dataset, pipeline
from nas.search.engine import (
    EpochCallback,
    EvaluationContext,
    KerasEvaluation,
    KerasSetup,
    SearchEvents,
    SearchOptions,
    TrialWork,
    converts,
    keras_setup,
    matches_moved,
)
from nas.search.records import StudyAttr, TrialAttr
from nas.search.space import SearchSpace
from nas.search.strategies.supernet.budget import epochs_for_budget
from nas.search.strategies.supernet.elastic import ElasticSpace, elastic_space, phase_ranges, progressive_phases
from nas.search.strategies.supernet.extract import extract, inherit, recalibrate
from nas.search.strategies.supernet.halving import first_images, upper_bound
from nas.search.strategies.supernet.network import Supernet
from nas.search.strategies.supernet.settings import planned_epochs, supernet_settings
from nas.search.strategies.supernet.train import (
    DecideEpochs,
    SupernetTraining,
    checkpoint_progress,
    load_checkpoint,
    sort_epoch,
    train_supernet,
)
from nas.search.training import SCORE_BATCH, Scored, TrainResult, evaluate
from nas.storage import StorageURL, default_artifact_root, own_folder, safe_name, study_lock

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
    settings = supernet_settings(space)
    path = checkpoint_path(options.storage, options.artifacts, study.study_name)
    supernet = Supernet.of(elastic, num_classes=data.num_classes, channels=data.channels, seed=options.seed)
    with study_lock(options.storage, storage.engine, f"{study.study_name}/supernet"):
        training = SupernetTraining(planned_epochs(space) or 0, space=space.fingerprint())
        if path.exists():
            held = checkpoint_progress(path)
            root = default_artifact_root(options.storage, options.artifacts)
            if held.space and not matches_moved(space, json.loads(held.space), study, root):
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
    share = supernet_settings(elastic.space).budget_share
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


def supernet_evaluation(ctx: EvaluationContext) -> SupernetEvaluation:
    """The strategy's evaluation for this worker; its `start` trains the supernet (or loads
    it), then trials sample only the elastic knobs, the rest staying at what it trained with."""
    setup = keras_setup(ctx)

    def train() -> TrainedSupernet:
        trained = prepare_supernet(ctx.study, ctx.storage, ctx.space, ctx.options, ctx.events, setup.data)
        ctx.study.sampler = fixed_sampler(ctx.study.sampler, trained.elastic)
        return trained

    return SupernetEvaluation(ctx.space, setup, train, seed=ctx.options.seed, warn=ctx.events.message)


class SupernetEvaluation(KerasEvaluation):
    """The seam for a supernet study: `start` gets the trained supernet, `build` extracts the
    subnet, `train` re-calibrates its BatchNorm and scores it (on a subset first under
    halving); measuring, deploying and keeping are the real ones."""

    def __init__(
        self, space: SearchSpace, setup: KerasSetup, train: Callable[[], TrainedSupernet], **kwargs: Any
    ) -> None:
        super().__init__(space, setup, **kwargs)
        self._train = train
        self.halving = supernet_settings(space).halving

    def start(self) -> None:
        self.trained = self._train()
        data = self.data
        settings = supernet_settings(self.space)
        self.calibration = calibration_batches(
            data, self.trained.supernet.candidate.batch_size, settings.calibration_batches
        )
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

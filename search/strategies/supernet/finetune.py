"""Finishing a supernet study: the front's subnets fine-tuned from their inherited weights.

An inherited accuracy ranks subnets; it is not what the network reaches once trained on its
own. After the search each member of the front (at most MAX_FINETUNED, most accurate first)
is taken out of the supernet again, its BatchNorm re-calibrated as its trial's was, and
trained `search.supernet.finetune.epochs` epochs with the space's training pipeline (a cosine
schedule from a tenth of the rate the supernet trained with, or `finetune.learning_rate`), then scored
as its trial was (converted first where the trial's accuracy was the converted model's).

The figures are stored on the study (StudyAttr.FINETUNED) beside the inherited accuracy,
which stays the trial's objective value (Optuna does not change a finished trial), and the
fine-tuned model replaces the trial's stored weights, so `nas export` converts and checks the
fine-tuned network. The architecture does not change, so neither does its throughput; the
front's confirmation after the search (`measure.confirm`) measures it again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import keras
import optuna
from sqlalchemy.exc import SQLAlchemyError

from nas.errors import ConversionError, NasError, TrainingDiverged
from nas.search.data import Dataset, load_dataset
from nas.search.engine import JoinedStudy, Start, deploy_as_trial, finetuned, objective_names, pareto_front
from nas.search.records import StudyAttr
from nas.search.space import Candidate, SearchSpace
from nas.search.strategies.supernet.elastic import elastic_space
from nas.search.strategies.supernet.evaluation import calibration_batches, checkpoint_path
from nas.search.strategies.supernet.extract import extract, recalibrate
from nas.search.strategies.supernet.network import Supernet
from nas.search.strategies.supernet.settings import planned_epochs, supernet_settings
from nas.search.strategies.supernet.train import checkpoint_progress, load_checkpoint
from nas.search.training import TrainResult, precision_policy, train_and_evaluate
from nas.storage import WeightStore, default_artifact_root, study_lock

MAX_FINETUNED = 16
# Fine-tuning starts its cosine schedule at a tenth of the rate the supernet trained with: on
# benchmarks/supernet.py's front (3 epochs) the full rate cost 0.5-1.5 points of the inherited
# accuracy, a tenth kept it within 0.5 (RESULTS.md).
RATE_FACTOR = 0.1


def finetune_rate(trained_with: float, setting: float | None) -> float:
    """`search.supernet.finetune.learning_rate`, or a tenth of the supernet's rate."""
    return setting if setting is not None else trained_with * RATE_FACTOR


def epochs_text(count: int) -> str:
    return f"{count} epoch" + ("" if count == 1 else "s")


def _front(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    names = objective_names(study)
    if "accuracy" not in names:
        raise NasError(f"study '{study.study_name}' has no accuracy objective to fine-tune for")
    first = names.index("accuracy")
    front = [t for t in pareto_front(study) if t.values]
    return sorted(front, key=lambda t: (-t.values[first], t.number))[:MAX_FINETUNED]


def _trained_supernet(study: optuna.Study, space: SearchSpace, data: Dataset, path: Path, seed: int) -> Supernet:
    name = study.study_name
    if not path.is_file():
        raise NasError(f"study '{name}' has no supernet checkpoint at {path}; run `nas search` on it first")
    held = checkpoint_progress(path)
    done, planned = held.done, planned_epochs(space) or held.epochs
    if done < planned:
        raise NasError(f"study '{name}': its supernet has trained {done} of {planned} epochs; run `nas search` on it")
    elastic = elastic_space(space)
    supernet = Supernet.of(elastic, num_classes=data.num_classes, channels=data.channels, seed=seed)
    load_checkpoint(path, supernet)
    return supernet


def finetune_front(
    joined: JoinedStudy, *, epochs: int | None = None, say: Callable[[str], None] = lambda _: None
) -> dict[str, dict[str, Any]]:
    """Fine-tune the front's members that have no figure for these epochs and rate yet; store
    each as it ends (an interrupted run keeps the finished ones). Returns all the figures.
    Under the study's fine-tuning lock: two searches of one study ending together (two
    machines) fine-tune each subnet once, and neither overwrites the other's figures. Only the
    supernet strategy calls it (engine/strategy.py)."""
    space, storage, url = joined.space, joined.storage, joined.options.storage
    name = joined.study.study_name
    if (epochs if epochs is not None else supernet_settings(space).finetune.epochs) == 0:
        return dict(finetuned(joined.study))
    with study_lock(url, storage.engine, f"{name}/finetune"):
        fresh = optuna.load_study(study_name=name, storage=storage)  # what another process stored meanwhile
        return _finetune(fresh, joined, epochs, say)


def _finetune(
    study: optuna.Study, joined: JoinedStudy, epochs: int | None, say: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    space, storage, url, options = joined.space, joined.storage, joined.options.storage, joined.options
    name = study.study_name
    settings = supernet_settings(space).finetune
    epochs = settings.epochs if epochs is None else epochs
    figures = dict(finetuned(study))
    data = load_dataset(space.spec.dataset, warn=say)
    seed = options.seed
    names = objective_names(study)
    front = _front(study)
    supernet = _trained_supernet(study, space, data, checkpoint_path(url, options.artifacts, name), seed)
    batches = supernet_settings(space).calibration_batches
    calibration = calibration_batches(data, supernet.candidate.batch_size, batches)
    store = None
    if options.keep_weights:  # not after `nas search --no-weights`
        store = WeightStore(storage.engine, default_artifact_root(url, options.artifacts))
    todo = []
    for t in front:
        candidate = space.candidate(t.params, num_classes=data.num_classes, channels=data.channels)
        rate = finetune_rate(candidate.learning_rate, settings.learning_rate)
        held = figures.get(str(t.number))
        if not held or (held["epochs"], held["learning_rate"]) != (epochs, rate):
            todo.append((t, replace(candidate, epochs=epochs, learning_rate=rate)))
    if not todo:
        return figures
    say(f"Fine-tuning {len(todo)} subnets of the front from their inherited weights: {epochs_text(epochs)} each")
    for t, candidate in todo:
        inherited = t.values[names.index("accuracy")]
        try:
            with precision_policy(candidate.precision):
                model, result = finetune_subnet(supernet, candidate, calibration, data, seed=seed + t.number)
                deployed = deploy_as_trial(model, space, candidate, data)
                kept = _keep(store, name, t.number, model, say)
        except (TrainingDiverged, ConversionError) as exc:
            # That subnet keeps its inherited weights and figure; the rest of the front goes on.
            say(f"Warning: trial {t.number} not fine-tuned: {exc}")
            continue
        finally:
            keras.backend.clear_session(free_memory=True)
        accuracy = deployed.accuracy if deployed.accuracy is not None else result.accuracy
        figures[str(t.number)] = {
            "inherited": inherited,
            "accuracy": accuracy,
            "keras_accuracy": result.accuracy,
            "val_accuracy": [round(a, 5) for a in result.history["val_accuracy"]],
            "epochs": epochs,
            "learning_rate": candidate.learning_rate,
            "seconds": round(result.seconds, 2),
            "weights_kept": kept,
        }
        study.set_user_attr(
            StudyAttr.FINETUNED,
            {"finetuned_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "trials": figures},
        )
        say(
            f"trial {t.number}: accuracy {inherited:.4f} inherited, {accuracy:.4f} fine-tuned "
            f"({epochs_text(epochs)}, {result.seconds:.0f} s)"
        )
    return figures


def finetune_subnet(
    supernet: Supernet, candidate: Candidate, calibration: list[Any], data: Dataset, *, seed: int
) -> tuple[keras.Model, TrainResult]:
    """The subnet `candidate` (its epochs and rate: the fine-tuning's) out of the supernet,
    re-calibrated as its trial was, then trained on (benchmarks/supernet.py uses it too)."""
    keras.utils.set_random_seed(seed)
    model = extract(supernet, candidate)
    recalibrate(model, calibration)
    return model, train_and_evaluate(model, candidate, data, seed=seed)


def _keep(store: WeightStore | None, study: str, number: int, model: keras.Model, say: Callable[[str], None]) -> bool:
    """The fine-tuned model in place of the trial's inherited weights; a full disk costs the
    weights (export then says so), not the figures."""
    if store is None:
        return False
    try:
        store.save_model(study, number, model)
    except (OSError, SQLAlchemyError) as exc:
        say(f"Warning: fine-tuned weights of trial {number} not saved: {exc}")
        return False
    return True


def inherited_start(joined: JoinedStudy, data: Dataset) -> Start:
    """`nas train` on a supernet study: each subnet starts from its inherited weights,
    re-calibrated as its trial's were, at a tenth of the rate its trial trained with. The
    supernet is loaded for the first network trained, not before (there may be none)."""
    space, options = joined.space, joined.options
    loaded: list[tuple[Supernet, list[Any]]] = []

    def model(candidate: Candidate, seed: int) -> keras.Model:
        if not loaded:
            path = checkpoint_path(options.storage, options.artifacts, joined.study.study_name)
            supernet = _trained_supernet(joined.study, space, data, path, options.seed)
            batches = supernet_settings(space).calibration_batches
            loaded.append((supernet, calibration_batches(data, supernet.candidate.batch_size, batches)))
        supernet, calibration = loaded[0]
        keras.utils.set_random_seed(seed)
        subnet = extract(supernet, candidate)
        recalibrate(subnet, calibration)
        return subnet

    return Start("inherited", model, lambda rate: finetune_rate(rate, None))

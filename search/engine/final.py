"""`nas train`: the finishing step of both strategies. The chosen architectures (the front, or
the trials asked for) are trained again with the space's `final:` recipe (longer, warm-up and
cosine decay, label smoothing, augmentation, on training + validation data by default), from
scratch, or in a supernet study from their inherited weights; then each is scored once on the
test set, its throughput measured again, and the model kept for `nas export`.

The test set is read here and nowhere else: nothing the search chose was chosen by it. Each
training writes a checkpoint after every epoch, so a killed `nas train` resumes where it
stopped (a trial with a pruning schedule starts its training again: its masks are not
checkpointed). Figures are stored per trial as each ends (StudyAttr.FINAL), with the recipe
that made them: asked again with the same recipe, a finished trial is not trained again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import keras
import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.errors import ConversionError, NasError, TrainingDiverged
from nas.search.data import Dataset, load_dataset
from nas.search.engine.events import SearchEvents
from nas.search.engine.front import final_figures, noise_aware_front, objective_names
from nas.search.engine.stored import candidate_plans, deploy_as_trial, trial_plans
from nas.search.engine.study import JoinedStudy
from nas.search.hardware import HardwareProfiler
from nas.search.nets import build_plan
from nas.search.records import FinalFigures, FinalTraining
from nas.search.space import AugmentationSpec, Candidate, FinalSpec
from nas.search.training import EpochCheckpoint, evaluate, precision_policy, train_and_evaluate, train_compressed
from nas.storage import default_artifact_root, own_folder, safe_name, sha256_file, study_lock


@dataclass(frozen=True)
class Start:
    """Where a final training starts: fresh weights, or a strategy's own (a supernet's
    inherited ones). `rate` turns the trial's learning rate into the final recipe's default."""

    name: str  # "scratch" or "inherited", stored with the recipe
    model: Callable[[Candidate, int], keras.Model]  # (candidate, seed) -> the network to train
    rate: Callable[[float], float]


def from_scratch() -> Start:
    def model(candidate: Candidate, seed: int) -> keras.Model:
        keras.utils.set_random_seed(seed)
        return build_plan(candidate_plans(candidate)[1])

    return Start("scratch", model, lambda rate: rate)


def choose(study: optuna.Study, asked: list[int] | None, limit: int) -> list[FrozenTrial]:
    """The trials asked for, or the front's members, most accurate first (at most `limit`)."""
    done = {t.number: t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.values}
    if asked:
        missing = [n for n in asked if n not in done]
        if missing:
            raise NasError(
                f"{{trials}}: trial {missing[0]} is not a finished trial of study '{study.study_name}' "
                f"(finished: {', '.join(map(str, sorted(done))) or 'none'})"
            )
        return [done[n] for n in asked]
    names = objective_names(study)
    if not done:
        raise NasError(f"study '{study.study_name}' has no finished trials to train; run `nas search` first")
    first = names.index("accuracy") if "accuracy" in names else 0
    front = [t for t in noise_aware_front(study) if t.number in done]  # what `nas pareto` shows
    return sorted(front, key=lambda t: (-t.values[first], t.number))[:limit]


def final_data(data: Dataset, use: str) -> tuple[Dataset, Dataset]:
    """(what the final training reads, the test set in the place a scorer reads). With
    train+validation the validation images join the training set and nothing is scored
    between epochs; the test set is never among them."""
    if data.x_test is None or data.y_test is None:
        raise NasError(
            "dataset: no test set to score the final training on; add dataset.test_path to the space file and run "
            "`nas search` on it once (it changes nothing the search read), or search with dataset.test_fraction "
            "(a new study: it changes the training data); Keras' data sets bring their own"
        )
    train = data
    if use == "train+validation":
        train = replace(
            data,
            x_train=np.concatenate([data.x_train, data.x_val]),
            y_train=np.concatenate([data.y_train, data.y_val]),
            x_val=data.x_val[:0],
            y_val=data.y_val[:0],
        )
    test = replace(data, x_val=data.x_test, y_val=data.y_test, x_train=data.x_train[:0], y_train=data.y_train[:0])
    return replace(train, x_test=None, y_test=None), test


def final_recipe(spec: FinalSpec, candidate: Candidate, augmentation: AugmentationSpec, **more: Any) -> dict[str, Any]:
    """What a final training is, stored with its figures and its checkpoint: the same recipe
    gives the same training (benchmarks/fashion_references.py gives the references this one)."""
    return {
        **more,
        "epochs": candidate.epochs,
        "warmup_epochs": spec.warmup_epochs,
        "learning_rate": candidate.learning_rate,
        "batch_size": candidate.batch_size,
        "optimizer": candidate.optimizer,
        "label_smoothing": spec.label_smoothing,
        "augmentation": augmentation.recorded(),
        "data": spec.data,
        "seed": spec.seed,
    }


def train_final(
    joined: JoinedStudy,
    events: SearchEvents,
    make_start: Callable[[Dataset], Start],
    *,
    trials: list[int] | None = None,
    again: bool = False,
) -> dict[str, FinalFigures]:
    """Train, score and keep each chosen trial; returns every trial's final figures. Under the
    study's lock for it: two `nas train` of one study never train one trial twice at once."""
    name = joined.study.study_name
    url = joined.options.storage
    with study_lock(url, joined.storage.engine, f"{name}/final"):
        study = optuna.load_study(study_name=name, storage=joined.storage)
        return _train_final(study, joined, events, make_start, trials, again)


def _train_final(
    study: optuna.Study,
    joined: JoinedStudy,
    events: SearchEvents,
    make_start: Callable[[Dataset], Start],
    asked: list[int] | None,
    again: bool,
) -> dict[str, FinalFigures]:
    space, options = joined.space, joined.options
    recipe_spec = space.spec.final
    chosen = choose(study, asked, recipe_spec.trials)
    data = load_dataset(space.spec.dataset, warn=events.message)
    train, test = final_data(data, recipe_spec.data)
    start = make_start(data)
    root = default_artifact_root(options.storage, options.artifacts)
    folder = own_folder(own_folder(root, safe_name(study.study_name, "study")), "final")
    figures = dict(final_figures(study))
    names = objective_names(study)
    augmentation = recipe_spec.augmentation or space.spec.dataset.augmentation
    profiler = HardwareProfiler(space.spec.measure, None)  # measured again, never read from the cache
    todo = []
    for t in chosen:
        candidate, _, _ = trial_plans(space, t.params, data.num_classes, data.channels)
        candidate = replace(
            candidate,
            epochs=recipe_spec.epochs,
            batch_size=recipe_spec.batch_size or candidate.batch_size,
            learning_rate=recipe_spec.learning_rate or start.rate(candidate.learning_rate),
        )
        recipe = final_recipe(recipe_spec, candidate, augmentation, start=start.name)
        held = figures.get(str(t.number))
        if held and held.recipe == recipe and not again:
            if not Path(held.model).is_file():
                events.message(
                    f"trial {t.number}: final-trained with this recipe already (figures kept), but its model is not "
                    f"at {held.model}: `nas export` cannot export it until it is trained again"
                )
            continue
        todo.append((t, candidate, recipe))
    if not todo:
        return figures
    numbers = ", ".join(str(t.number) for t, _, _ in todo)
    events.message(
        f"Final training of {len(todo)} trial{'s' * (len(todo) != 1)} ({numbers}): "
        f"{recipe_spec.epochs} epochs each from {'inherited weights' if start.name == 'inherited' else 'scratch'}, "
        f"on {len(train.y_train):,} images; then the test set ({len(test.y_val):,} images)"
    )
    for t, candidate, recipe in todo:
        seed = recipe_spec.seed + t.number
        checkpoint = EpochCheckpoint(folder / f"trial-{t.number}.ckpt.npz", recipe)
        if (done := checkpoint.progress()) and candidate.pruning == "none":
            events.message(f"trial {t.number}: resuming its final training after epoch {done} of {candidate.epochs}")

        def on_epoch(epoch: int, epochs: int, logs: dict[str, float], number: int = t.number) -> None:
            text = f"final training of trial {number}: epoch {epoch}/{epochs}, loss {logs['loss']:.4f}"
            text += f", train accuracy {logs['accuracy']:.4f}"
            if not np.isnan(logs["val_accuracy"]):
                text += f", validation accuracy {logs['val_accuracy']:.4f}"
            events.phase(text)

        try:
            with precision_policy(candidate.precision):
                model = start.model(candidate, seed)
                if candidate.pruning == "none":
                    result = train_and_evaluate(
                        model,
                        candidate,
                        train,
                        seed=seed,
                        on_epoch=on_epoch,
                        augmentation=augmentation if augmentation.active else None,
                        label_smoothing=recipe_spec.label_smoothing,
                        warmup_epochs=recipe_spec.warmup_epochs,
                        checkpoint=checkpoint,
                    )
                else:
                    net_full, net = candidate_plans(candidate)
                    model, result = train_compressed(
                        model,
                        net_full,
                        net,
                        candidate,
                        train,
                        seed=seed,
                        pruning=space.spec.compression.pruning,
                        augmentation=augmentation if augmentation.active else None,
                        on_epoch=on_epoch,
                        label_smoothing=recipe_spec.label_smoothing,
                        warmup_epochs=recipe_spec.warmup_epochs,
                    )
                _, keras_test = evaluate(model, test)
                deployed = deploy_as_trial(model, space, candidate, test)  # scored on the test set
                cost = profiler.measure(model, precision=candidate.precision, xla=candidate.xla)
                model_file = folder / f"trial-{t.number}.keras"
                partial = model_file.with_name(model_file.name + ".partial.keras")
                model.save(partial)
                partial.replace(model_file)
        except (TrainingDiverged, ConversionError) as exc:
            # That trial has no final figures; the others go on (a checkpoint of another recipe
            # or a diverged run is no start for the next try).
            checkpoint.remove()
            events.message(f"Warning: trial {t.number} not final-trained: {exc}")
            continue
        finally:
            keras.backend.clear_session(free_memory=True)
        primary = cost.primary
        test_accuracy = deployed.accuracy if deployed.accuracy is not None else keras_test
        figures[str(t.number)] = FinalFigures(
            recipe=recipe,
            test_accuracy=round(test_accuracy, 6),
            keras_test_accuracy=round(keras_test, 6),
            search_accuracy=t.values[names.index("accuracy")] if "accuracy" in names else None,
            history={k: [round(v, 5) for v in vs] for k, vs in result.history.items()},
            seconds=round(sum(result.history["seconds"]), 1),
            throughput=round(primary.images_per_s, 2),
            throughput_low=primary.low,
            throughput_high=primary.high,
            device=cost.device.get("name"),
            model=str(model_file),
            sha256=sha256_file(model_file),
        )
        record = FinalTraining(trained_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), trials=figures)
        study.set_user_attr(FinalTraining.KEY, record.to_attr())
        checkpoint.remove()
        events.message(
            f"trial {t.number}: test accuracy {test_accuracy:.4f} after {candidate.epochs} epochs "
            f"({figures[str(t.number)].seconds:.0f} s), {primary.images_per_s:,.0f} images/s"
        )
    return figures


def final_model_file(study: optuna.Study, number: int) -> Path | None:
    """The kept final-trained model of a trial (checked against its hash), or None."""
    held = final_figures(study).get(str(number))
    if not held:
        return None
    path = Path(held.model)
    if not path.is_file():
        raise NasError(f"the final-trained model of trial {number} is missing at {path}; run `nas train` again")
    if sha256_file(path) != held.sha256:
        raise NasError(f"the final-trained model of trial {number} at {path} does not match its recorded hash")
    return path

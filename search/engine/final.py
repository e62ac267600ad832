"""`nas train`: the finishing step of both strategies. The chosen architectures (the front, or
the trials asked for) are trained again with the space's `final:` recipe (longer, warm-up and
cosine decay, label smoothing, augmentation, on training + validation data by default), from
scratch, or in a supernet study from their inherited weights; then each is scored once on the
test set, its throughput measured again, and the model kept for `nas export`.

The test set is read here and nowhere else: nothing the search chose was chosen by it. Each
training writes a checkpoint after every epoch, so a killed `nas train` resumes where it
stopped (a trial with a pruning schedule starts its training again: its masks are not
checkpointed). Figures are stored per trial as each ends (StudyAttr.FINAL), with the recipe
that made them: asked again with the same recipe, a finished trial is not trained again
(`again` trains it again).

With `seeds` N each trial is trained N times, seed k with `final_seed`; the trial's figures are
their mean and spread, and its kept model the seed's closest to the mean. Seeds already trained
with the same recipe are kept, so asking for more trains only those missing.

Model files are stored relative to the artifacts folder, so a study copied with its artifacts to
another folder or machine finds them there (`stored_model_path` also reads the absolute paths
stored before).
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
from nas.search.engine.data_paths import located
from nas.search.engine.events import SearchEvents
from nas.search.engine.front import final_figures, noise_aware_front, objective_names
from nas.search.engine.stored import candidate_plans, deploy_as_trial, trial_plans
from nas.search.engine.study import JoinedStudy
from nas.search.hardware import HardwareProfiler
from nas.search.nets import build_plan
from nas.search.records import FinalFigures, FinalRun, FinalTraining
from nas.search.space import AugmentationSpec, Candidate, FinalSpec, SearchSpace
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


# Between a trial's seeds: above any trial number, so no two (trial, seed) pairs share a seed.
SEED_STRIDE = 1_000_003


def final_seed(recipe_seed: int, number: int, k: int) -> int:
    """The seed of trial `number`'s seed k: seed 0's is the recipe's seed plus the trial's number,
    as every final training's was before seeds."""
    return (recipe_seed + number + SEED_STRIDE * k) % 2**32


def _file_name(number: int, k: int, suffix: str) -> str:
    """Seed 0's files keep the names they had before seeds."""
    return f"trial-{number}{f'-seed-{k}' if k else ''}{suffix}"


def stored_model_path(stored: str, root: Path) -> Path:
    """Where a final model's stored path points on this machine: a relative path (today's) under
    the artifacts folder; an absolute one (stored before) where it is, else, as for a study copied
    to another folder or machine, under the artifacts folder by its last three parts
    (<study>/final/<file>)."""
    path = Path(stored)
    if not path.is_absolute():
        return root / path
    if path.is_file():
        return path
    return root.joinpath(*path.parts[-3:])


@dataclass(frozen=True)
class _Todo:
    trial: FrozenTrial
    candidate: Candidate
    recipe: dict[str, Any]
    kept: list[FinalRun]  # seeds trained before with this recipe
    missing: list[int]  # seeds to train
    dropped: list[FinalRun]  # seeds of the stored record this one replaces (--again, another recipe)

    def label(self) -> str:
        """`3`, or `3: seeds 1, 2` where others than seed 0 alone are trained."""
        if self.missing == [0]:
            return str(self.trial.number)
        return f"{self.trial.number}: seed{'s' * (len(self.missing) > 1)} {', '.join(map(str, self.missing))}"


def train_final(
    joined: JoinedStudy,
    events: SearchEvents,
    make_start: Callable[[Dataset], Start],
    *,
    trials: list[int] | None = None,
    again: bool = False,
    seeds: int = 1,
) -> dict[str, FinalFigures]:
    """Train, score and keep each chosen trial (`seeds` times); returns every trial's final
    figures. Under the study's lock for it: two `nas train` of one study never train one trial
    twice at once."""
    if seeds < 1:
        raise NasError(f"{{seeds}}: {seeds} is not a number of seeds (1 or more)")
    name = joined.study.study_name
    url = joined.options.storage
    with study_lock(url, joined.storage.engine, f"{name}/final"):
        study = optuna.load_study(study_name=name, storage=joined.storage)
        return _train_final(study, joined, events, make_start, trials, again, seeds)


def _train_final(
    study: optuna.Study,
    joined: JoinedStudy,
    events: SearchEvents,
    make_start: Callable[[Dataset], Start],
    asked: list[int] | None,
    again: bool,
    seeds: int,
) -> dict[str, FinalFigures]:
    options = joined.options
    root = default_artifact_root(options.storage, options.artifacts)
    space = located(joined.space, study, root)  # a copied study's data, found from the artifacts folder
    recipe_spec = space.spec.final
    chosen = choose(study, asked, recipe_spec.trials)
    data = load_dataset(space.spec.dataset, warn=events.message)
    train, test = final_data(data, recipe_spec.data)
    start = make_start(data)
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
        kept = list(held.runs) if held and held.recipe == recipe and not again else []
        missing = [k for k in range(seeds) if k not in {run.seed for run in kept}]
        if held and not missing:
            if not (path := stored_model_path(held.model, root)).is_file():
                events.message(
                    f"trial {t.number}: final-trained with this recipe already (figures kept), but its model is not "
                    f"at {path}: `nas export` cannot export it until it is trained again"
                )
            continue
        dropped = [run for run in held.runs if run.seed not in missing] if held and not kept else []
        todo.append(_Todo(t, candidate, recipe, kept, missing, dropped))
    if not todo:
        return figures
    events.message(
        f"Final training of {len(todo)} trial{'s' * (len(todo) != 1)} ({'; '.join(job.label() for job in todo)}): "
        f"{recipe_spec.epochs} epochs each from {'inherited weights' if start.name == 'inherited' else 'scratch'}, "
        f"on {len(train.y_train):,} images; then the test set ({len(test.y_val):,} images)"
    )
    for job in todo:
        t, candidate, recipe = job.trial, job.candidate, job.recipe
        search_accuracy = t.values[names.index("accuracy")] if "accuracy" in names else None
        runs, dropped = list(job.kept), job.dropped
        for k in job.missing:
            which = f"trial {t.number}" + (f" seed {k}" if seeds > 1 or k else "")
            run = _train_seed(
                space, candidate, recipe, train, test, start, profiler, events, folder, root, t.number, k, which
            )
            if run is None:
                continue
            runs.append(run)
            figures[str(t.number)] = FinalFigures.of_runs(recipe, search_accuracy, runs)
            record = FinalTraining(trained_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), trials=figures)
            study.set_user_attr(FinalTraining.KEY, record.to_attr())
            for gone in dropped:  # no record names their files now (another seed's are replaced as trained)
                if (path := stored_model_path(gone.model, root)).parent == folder:
                    path.unlink(missing_ok=True)
            dropped = []
            events.message(
                f"{which}: test accuracy {run.test_accuracy:.4f} after {candidate.epochs} epochs "
                f"({run.seconds:.0f} s), {run.throughput:,.0f} images/s"
            )
        if len(runs) > 1 and (mean := figures.get(str(t.number))) is not None:
            events.message(
                f"trial {t.number}: test accuracy {mean.test_accuracy:.4f} ± {mean.test_accuracy_sd:.4f}, "
                f"{mean.throughput:,.0f} ± {mean.throughput_sd:,.0f} images/s over {len(runs)} seeds "
                f"(mean ± standard deviation; seed {mean.kept_seed}'s model kept, the closest to the mean)"
            )
    return figures


def _train_seed(
    space: SearchSpace,
    candidate: Candidate,
    recipe: dict[str, Any],
    train: Dataset,
    test: Dataset,
    start: Start,
    profiler: HardwareProfiler,
    events: SearchEvents,
    folder: Path,
    root: Path,
    number: int,
    k: int,
    which: str,
) -> FinalRun | None:
    """Train, score, measure and keep seed k of one trial; None where it diverged or did not convert."""
    recipe_spec = space.spec.final
    augmentation = recipe_spec.augmentation or space.spec.dataset.augmentation
    seed = final_seed(recipe_spec.seed, number, k)
    checkpoint = EpochCheckpoint(folder / _file_name(number, k, ".ckpt.npz"), recipe)
    if (done := checkpoint.progress()) and candidate.pruning == "none":
        events.message(f"{which}: resuming its final training after epoch {done} of {candidate.epochs}")

    def on_epoch(epoch: int, epochs: int, logs: dict[str, float]) -> None:
        text = f"final training of {which}: epoch {epoch}/{epochs}, loss {logs['loss']:.4f}"
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
            model_file = folder / _file_name(number, k, ".keras")
            partial = model_file.with_name(model_file.name + ".partial.keras")
            model.save(partial)
            partial.replace(model_file)
    except (TrainingDiverged, ConversionError) as exc:
        # That seed has no final figures; the others go on (a checkpoint of another recipe
        # or a diverged run is no start for the next try).
        checkpoint.remove()
        events.message(f"Warning: {which} not final-trained: {exc}")
        return None
    finally:
        keras.backend.clear_session(free_memory=True)
    checkpoint.remove()
    primary = cost.primary
    test_accuracy = deployed.accuracy if deployed.accuracy is not None else keras_test
    return FinalRun(
        seed=k,
        test_accuracy=round(test_accuracy, 6),
        keras_test_accuracy=round(keras_test, 6),
        history={key: [round(v, 5) for v in values] for key, values in result.history.items()},
        seconds=round(sum(result.history["seconds"]), 1),
        throughput=round(primary.images_per_s, 2),
        throughput_low=primary.low,
        throughput_high=primary.high,
        device=cost.device.get("name"),
        model=model_file.relative_to(root).as_posix(),
        sha256=sha256_file(model_file),
    )


def final_model_file(study: optuna.Study, number: int, root: Path) -> Path | None:
    """The kept final-trained model of a trial (checked against its hash), or None; `root`:
    the artifacts folder its stored path is relative to."""
    held = final_figures(study).get(str(number))
    if not held:
        return None
    path = stored_model_path(held.model, root)
    if not path.is_file():
        raise NasError(
            f"the final-trained model of trial {number} is missing at {path}; run `nas train` again, or pass "
            "{artifacts} with a copy of the artifacts folder it was trained with"
        )
    if sha256_file(path) != held.sha256:
        raise NasError(f"the final-trained model of trial {number} at {path} does not match its recorded hash")
    return path

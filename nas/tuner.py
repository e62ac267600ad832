"""A KerasTuner Oracle backed by an Optuna study in nas' storage.

An existing KerasTuner HyperModel and Tuner run on Optuna's samplers and a real database
(true multi-objective Pareto front, resumable, readable by `nas`, optuna-dashboard and the
`optuna` CLI) by swapping the oracle:

    from nas.tuner import OptunaOracle

    tuner = keras_tuner.Tuner(
        hypermodel=build_model,
        oracle=OptunaOracle(
            objective=[keras_tuner.Objective("val_accuracy", "max"), keras_tuner.Objective("val_loss", "min")],
            max_trials=20,
            study_name="my-tuning",
            storage="sqlite:///nas.db",
        ),
        directory="kt",
        project_name="my-tuning",
    )

It behaves as KerasTuner's own oracles do: `max_trials` counts this project's trials, a
configuration already tried is not run again and a finite space that is used up ends the
search, `max_retries_per_trial` retries a crashed trial (Optuna sees only its final attempt),
the project directory decides whether a run resumes (`overwrite=True` discards the project's
earlier trials from the study too) and a project written by another oracle is refused.

KerasTuner's hyperparameters map to Optuna distributions (Choice and Boolean: categorical;
Int and Float: ranges, log when `sampling="log"`; Fixed: not sampled); conditional ones are
sampled only when active, as KerasTuner defines them. As with KerasTuner's own oracles, a
hyperparameter the model declares for the first time during a trial takes its default there
and is searched from the next trial on.

What differs on purpose: with several objectives `get_best_trials()` returns the Pareto front
of this project's trials (KerasTuner sums the objectives into one score), ordered by the first
objective, best first, ties broken by the next objectives; `get_best_trials(n)` returns at
most `n` of them.

The oracle only proposes and records: it measures nothing, so a KerasTuner search knows no
throughput unless a trial reports one. `MeasuredThroughput`, a Keras callback, reports nas'
measured throughput of each trial's model as the metric `throughput`, which an objective can
then name:

    tuner = keras_tuner.Tuner(
        hypermodel=build_model,
        oracle=OptunaOracle(
            objective=[keras_tuner.Objective("val_accuracy", "max"), keras_tuner.Objective("throughput", "max")],
            max_trials=20, study_name="my-tuning", storage="sqlite:///nas.db",
        ),
        directory="kt", project_name="my-tuning",
    )
    tuner.search(x, y, validation_data=(x_val, y_val), epochs=5, callbacks=[MeasuredThroughput(batch_size=64)])
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import random
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar, cast

import keras
import keras_tuner
import optuna
import pydantic
import sqlalchemy
from keras_tuner.src.engine import hyperparameters as hp_module
from keras_tuner.src.engine import trial as trial_module
from optuna.trial import FrozenTrial, TrialState

from nas.errors import NasError
from nas.search.engine import make_sampler
from nas.search.records import TunerAttr
from nas.storage import StorageURL, open_storage, resolve_storage_url, study_lock, with_lock_retries

__all__ = ["MeasuredThroughput", "OptunaOracle"]

F = TypeVar("F", bound=Callable[..., Any])


# One lock per database for creating the schema and creating, checking or deleting studies:
# tuners started together on a new SQLite file otherwise race on CREATE TABLE.
DATABASE_LOCK = "nas.tuner: schema and studies"
# A finite space with more configurations than this is treated as unbounded (KerasTuner's
# collision limit alone then ends the search).
ENUMERATION_LIMIT = 10_000
# Sampler seeds of successive openings of one study lie this far apart.
SEED_STRIDE = 7919


def _synchronized(func: F) -> F:
    """KerasTuner's per-oracle lock (it also converts the legacy `end_trial(id, status)`)."""
    return cast(F, keras_tuner.synchronized(func))


def _suggest(trial: optuna.Trial, hp: Any) -> Any:
    if isinstance(hp, hp_module.Fixed):
        return hp.value
    if isinstance(hp, hp_module.Boolean):
        return trial.suggest_categorical(hp.name, [False, True])
    if isinstance(hp, hp_module.Choice):
        return trial.suggest_categorical(hp.name, list(hp.values))
    log = getattr(hp, "sampling", "linear") == "log"
    if isinstance(hp, hp_module.Int):
        # KerasTuner's step is a factor on a log scale; Optuna's log ranges take no step.
        return trial.suggest_int(hp.name, hp.min_value, hp.max_value, step=1 if log else (hp.step or 1), log=log)
    if isinstance(hp, hp_module.Float):
        step = None if log or not hp.step else hp.step
        return trial.suggest_float(hp.name, hp.min_value, hp.max_value, step=step, log=log)
    raise TypeError(f"unsupported KerasTuner hyperparameter {type(hp).__name__} ({hp.name})")


def _domain(hp: Any, limit: int) -> list[Any] | None:
    """Every value `_suggest` can give `hp`; None when unbounded or larger than `limit`."""
    if isinstance(hp, hp_module.Fixed):
        return [hp.value]
    if isinstance(hp, hp_module.Boolean):
        return [False, True]
    if isinstance(hp, hp_module.Choice):
        return list(hp.values)
    log = getattr(hp, "sampling", "linear") == "log"
    if isinstance(hp, hp_module.Int):
        step = 1 if log else (hp.step or 1)
        if (hp.max_value - hp.min_value) // step + 1 > limit:
            return None
        return list(range(hp.min_value, hp.max_value + 1, step))
    if isinstance(hp, hp_module.Float) and hp.step and not log:
        # As Optuna's stepped float: low + k * step up to the last step inside the range.
        count = math.floor((hp.max_value - hp.min_value) / hp.step + 1e-9) + 1
        return None if count > limit else [hp.min_value + k * hp.step for k in range(count)]
    return None


class _Unbounded(Exception):
    pass


def _configurations(space: list[Any], limit: int = ENUMERATION_LIMIT) -> list[dict[str, Any]] | None:
    """Every distinct set of active values of a finite space (as `populate_space` samples
    them: a conditional hyperparameter only where its parents allow); None when the space is
    unbounded or has more than `limit` configurations."""
    found: list[dict[str, Any]] = []

    def walk(index: int, values: dict[str, Any]) -> None:
        if len(found) > limit:
            raise _Unbounded
        if index == len(space):
            found.append(dict(values))
            return
        hp = space[index]
        if not all(condition.is_active(values) for condition in hp.conditions):
            walk(index + 1, values)
            return
        domain = _domain(hp, limit)
        if domain is None:
            raise _Unbounded
        for value in domain:
            walk(index + 1, {**values, hp.name: value})

    try:
        walk(0, {})
    except _Unbounded:
        return None
    return found if len(found) <= limit else None


def _pareto_front(points: list[tuple[float, ...]]) -> list[int]:
    """Indices of the points no other point dominates (every value minimized)."""

    def dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
        return all(x <= y for x, y in zip(a, b, strict=True)) and a != b

    return [i for i, p in enumerate(points) if not any(dominates(q, p) for q in points)]


class OptunaOracle(keras_tuner.Oracle):  # type: ignore[misc]
    """KerasTuner Oracle whose proposals and results live in an Optuna study.

    The study is opened when the Tuner reloads the project (resume) or at the first trial of a
    new project; its directions and objective names must match the oracle's.
    """

    def __init__(
        self,
        objective: Any,
        max_trials: int,
        *,
        study_name: str,
        storage: str | None = None,
        sampler: str = "tpe",
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(objective=objective, max_trials=max_trials, seed=seed, **kwargs)
        objectives = getattr(self.objective, "objectives", [self.objective])
        self.objective_names: list[str] = [o.name for o in objectives]
        self.directions = [
            optuna.study.StudyDirection.MAXIMIZE if o.direction == "max" else optuna.study.StudyDirection.MINIMIZE
            for o in objectives
        ]
        self.study_name = study_name
        self.sampler_name = sampler
        self.sampler_seed = seed
        make_sampler(sampler, seed)  # an unknown sampler fails here, not at the first trial
        self.url: StorageURL = resolve_storage_url(storage)
        with self._database_lock(None):
            # KerasTuner tracks its own running trials: no Optuna heartbeat thread.
            self.storage = open_storage(self.url, heartbeat_interval=None)
        self._study: optuna.Study | None = None
        self.optuna_numbers: dict[str, int] = {}  # KerasTuner trial id -> Optuna trial number

    # -- the study ---------------------------------------------------------------------------

    @property
    def study(self) -> optuna.Study:
        if self._study is None:
            raise RuntimeError("the Optuna study is opened when the Tuner reloads its project or starts a trial")
        return self._study

    @contextlib.contextmanager
    def _database_lock(self, engine: sqlalchemy.Engine | None) -> Iterator[None]:
        path = self.url.sqlite_path
        if path is not None and not path.parent.is_dir():
            raise ValueError(f"storage '{self.url}': folder {path.parent} does not exist")
        # SQLite is locked with a file beside the database; servers need a connection.
        own = sqlalchemy.create_engine(self.url.raw) if engine is None else None
        try:
            with study_lock(self.url, engine or cast(sqlalchemy.Engine, own), DATABASE_LOCK):
                yield
        finally:
            if own is not None:
                own.dispose()

    def _project(self) -> str:
        return os.path.abspath(os.path.join(str(self._directory), self._project_name))

    def _open_study(self, resumed: bool) -> optuna.Study:
        """Load or create the study for this project, once: on a resume it must hold the
        project's trials; on a fresh start, trials of an earlier run of this project (the
        Tuner's `overwrite=True`, or a deleted project directory) are discarded with it."""
        if self._study is not None:
            return self._study
        project = self._project()
        with self._database_lock(self.storage.engine):
            try:
                study: optuna.Study | None = optuna.load_study(study_name=self.study_name, storage=self.storage)
            except KeyError:
                study = None
            if study is not None and not resumed and self._discard_earlier_run(study, project):
                study = None
            if study is None:
                study = self._create_study()
            else:
                self._check_study(study)
            if resumed:
                self._check_resumed(study, project)
            openings = int(study.user_attrs.get(TunerAttr.STUDY_OPENINGS, 0))
            study.set_user_attr(TunerAttr.STUDY_OPENINGS, openings + 1)
            # Continue the sampler instead of replaying it: a new seed per opening, apart from
            # every earlier one and from tuners opening the study at the same time.
            study.sampler = make_sampler(
                self.sampler_name, self.sampler_seed + len(study.trials) + SEED_STRIDE * openings
            )
        self._study = study
        if resumed:
            # KerasTuner saves a finished trial before Optuna is told: a crash in between left
            # it running in the study.
            for trial_id in self.end_order:
                self._tell(self.trials[trial_id])
        return study

    def _create_study(self) -> optuna.Study:
        study = optuna.create_study(
            study_name=self.study_name, storage=self.storage, directions=self.directions, load_if_exists=True
        )
        self._check_study(study)
        return study

    def _discard_earlier_run(self, study: optuna.Study, project: str) -> bool:
        trials = study.get_trials(deepcopy=False)
        if not any(t.user_attrs.get(TunerAttr.TRIAL_PROJECT) == project for t in trials):
            return False
        others = sorted({str(t.user_attrs.get(TunerAttr.TRIAL_PROJECT, "no project")) for t in trials} - {project})
        if others:
            raise ValueError(
                f"study '{self.study_name}' holds trials of this project's earlier run and of "
                f"other projects ({', '.join(others)}); they cannot be discarded alone. "
                "Use another study_name, or resume with overwrite=False"
            )
        optuna.delete_study(study_name=self.study_name, storage=self.storage)
        return True

    def _check_study(self, study: optuna.Study) -> None:
        name = self.study_name
        trials = study.get_trials(deepcopy=False)
        ours = TunerAttr.STUDY_MARK in study.user_attrs or any(TunerAttr.TRIAL_ID in t.user_attrs for t in trials)
        if not ours and (trials or "space" in study.user_attrs):
            raise ValueError(f"study '{name}' was not made by OptunaOracle (by `nas search`?); choose another name")
        if study.directions != self.directions:
            stored = [d.name.lower() for d in study.directions]
            wanted = [d.name.lower() for d in self.directions]
            raise ValueError(f"study '{name}' directions are {stored}, this oracle's {wanted}: use another study")
        if study.metric_names is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names(self.objective_names)
        elif study.metric_names != self.objective_names:
            raise ValueError(f"study '{name}' has objectives {study.metric_names}, not {self.objective_names}")
        if TunerAttr.STUDY_MARK not in study.user_attrs:
            study.set_user_attr(TunerAttr.STUDY_MARK, True)

    def _check_resumed(self, study: optuna.Study, project: str) -> None:
        trials = study.get_trials(deepcopy=False)
        for trial_id, number in self.optuna_numbers.items():
            if number >= len(trials) or trials[number].user_attrs.get(TunerAttr.TRIAL_ID) != trial_id:
                raise RuntimeError(
                    f"project {project} ran its trials in study '{self.study_name}', which no longer "
                    f"holds them ({self.url}); pass overwrite=True to the Tuner to start again"
                )

    # -- proposing ---------------------------------------------------------------------------

    def _sample(self, trial: optuna.Trial) -> dict[str, Any]:
        hps = hp_module.HyperParameters()
        values: dict[str, Any] = {}
        for hp in self.hyperparameters.space:
            hps.merge([hp])
            if hps.is_active(hp):  # conditional hyperparameters only when their parent allows
                values[hp.name] = hps.values[hp.name] = _suggest(trial, hp)
        return values

    def populate_space(self, trial_id: str) -> dict[str, Any]:
        study = self._open_study(resumed=False)
        stopped = {"status": trial_module.TrialStatus.STOPPED, "values": None}
        configurations = _configurations(self.hyperparameters.space)
        untried = None if configurations is None else [c for c in configurations if not self._duplicate(c)]
        if untried == []:
            return stopped  # the space is used up
        attrs: dict[str, Any] = {TunerAttr.TRIAL_ID: trial_id, TunerAttr.TRIAL_PROJECT: self._project()}
        for _ in range(self._max_collisions + 1):
            trial = with_lock_retries(study.ask)
            for key, value in attrs.items():
                trial.set_user_attr(key, value)
            values = self._sample(trial)
            if not self._duplicate(values):
                self.optuna_numbers[trial_id] = trial.number
                return {"status": trial_module.TrialStatus.RUNNING, "values": values}
            # Already tried: not run. Recorded as failed so it leaves the sampler's history.
            twin = next((t for t, n in self.optuna_numbers.items() if self._id_to_hash[t] == self._hash(values)), "?")
            trial.set_user_attr(TunerAttr.TRIAL_DUPLICATE, twin)
            with_lock_retries(study.tell, trial, state=TrialState.FAIL)
            if untried:
                # A finite space: the next trial takes an untried configuration, so the
                # space is used up in as many trials as it has configurations.
                choice = random.Random(self.sampler_seed + trial.number).choice(untried)
                study.enqueue_trial(choice, user_attrs=attrs)
        return stopped  # as KerasTuner: too many proposals in a row were already tried

    def _hash(self, values: dict[str, Any]) -> str:
        return cast(str, self._compute_values_hash(values))

    # -- results -----------------------------------------------------------------------------

    @_synchronized
    def end_trial(self, trial: Any) -> None:
        try:
            super().end_trial(trial)
        finally:
            # Also when KerasTuner stops the search for consecutive failures (it raises there).
            ended = self.trials[trial.trial_id]
            self._tell(ended)
        if ended.status == trial_module.TrialStatus.INVALID:  # a retry is queued: not told yet
            self._record_attempt(ended)

    def _frozen(self, trial_id: str) -> FrozenTrial | None:
        number = self.optuna_numbers.get(trial_id)
        if number is None or self._study is None:
            return None
        return self._study.get_trials(deepcopy=False)[number]

    def _tell(self, trial: Any) -> None:
        """Tell Optuna a trial's final outcome, once; a trial waiting for a retry stays running."""
        if trial.status not in (trial_module.TrialStatus.COMPLETED, trial_module.TrialStatus.FAILED):
            return
        frozen = self._frozen(trial.trial_id)
        if frozen is None or frozen.state != TrialState.RUNNING:
            return
        if trial.status == trial_module.TrialStatus.COMPLETED:
            values = [trial.metrics.get_best_value(name) for name in self.objective_names]
            if all(v is not None and math.isfinite(v) for v in values):
                with_lock_retries(self.study.tell, frozen.number, values)
                return
        if trial.message:
            self._set_attr(frozen, TunerAttr.TRIAL_LAST_ERROR, trial.message.strip().splitlines()[-1])
        with_lock_retries(self.study.tell, frozen.number, state=TrialState.FAIL)

    def _record_attempt(self, trial: Any) -> None:
        frozen = self._frozen(trial.trial_id)
        if frozen is None or frozen.state != TrialState.RUNNING:
            return
        self._set_attr(
            frozen, TunerAttr.TRIAL_FAILED_ATTEMPTS, int(frozen.user_attrs.get(TunerAttr.TRIAL_FAILED_ATTEMPTS, 0)) + 1
        )
        if trial.message:
            self._set_attr(frozen, TunerAttr.TRIAL_LAST_ERROR, trial.message.strip().splitlines()[-1])

    def _set_attr(self, frozen: FrozenTrial, key: str, value: Any) -> None:
        # Through the storage: an optuna.Trial object would run the sampler's before_trial.
        with_lock_retries(self.storage.set_trial_user_attr, frozen._trial_id, key, value)

    def get_best_trials(self, num_trials: int | None = None) -> list[Any]:
        """One objective: KerasTuner's ranking (`num_trials`, default 1, best first). Several:
        the Pareto front of this project's completed trials, ordered by the first objective,
        best first, ties broken by the next objectives; at most `num_trials` when given."""
        if len(self.objective_names) == 1:
            return cast(list[Any], super().get_best_trials(1 if num_trials is None else num_trials))
        signs = [-1.0 if d == optuna.study.StudyDirection.MAXIMIZE else 1.0 for d in self.directions]
        done: list[Any] = []
        points: list[tuple[float, ...]] = []
        for trial in self.trials.values():
            if trial.status != trial_module.TrialStatus.COMPLETED:
                continue
            values = [trial.metrics.get_best_value(name) for name in self.objective_names]
            if all(v is not None and math.isfinite(v) for v in values):
                done.append(trial)
                points.append(tuple(s * v for s, v in zip(signs, values, strict=True)))
        front = sorted(_pareto_front(points), key=lambda i: (points[i], done[i].trial_id))
        best = [done[i] for i in front]
        return best if num_trials is None else best[:num_trials]

    # -- the project directory ---------------------------------------------------------------

    def reload(self) -> None:
        super().reload()
        self._open_study(resumed=True)

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = super().get_state()
        state["optuna_numbers"] = self.optuna_numbers
        state["optuna_study"] = self.study_name
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        # KeyError is what KerasTuner's reload turns into "pass overwrite=True".
        if "optuna_numbers" not in state:
            raise KeyError("the project was written by another oracle, not OptunaOracle")
        study = state.get("optuna_study", self.study_name)
        if study != self.study_name:
            raise KeyError(f"the project was tuned in study '{study}', not '{self.study_name}'")
        super().set_state(state)
        self.optuna_numbers = dict(state["optuna_numbers"])


# -- nas' measured throughput as a KerasTuner metric ---------------------------------------------

THROUGHPUT = "throughput"  # the metric's name, for keras_tuner.Objective("throughput", "max")


@functools.cache
def _profiler(settings: str) -> Any:
    """One profiler per measuring settings in this process, as each nas worker has one: the
    device's reference baseline is measured once, not once per trial."""
    from nas.search.hardware import HardwareProfiler
    from nas.search.space import MeasureSpec

    return HardwareProfiler(MeasureSpec.model_validate_json(settings), None)


class MeasuredThroughput(keras.callbacks.Callback):  # type: ignore[misc]
    """Puts nas' measured throughput of the model being trained (images/s at `batch_size`) into
    every epoch's logs as `throughput`, so a KerasTuner objective can name it.

    Measured the way `nas search` measures a trial: a traced forward pass on this process's
    device, warmed up, timed rounds interleaved with a fixed reference network, the median
    ratio times the device's baseline, under nas' device lock. `measure` takes the keys of a
    space file's `measure:` (rounds, round_seconds, warmup_seconds, reference, ...). Measured
    once per fit, after the first epoch (a subclassed model is built by then): a network's
    speed does not depend on its weights. Callbacks given to `tuner.search(...)` run before
    KerasTuner's own, so its objective and its best-epoch checkpoint see the figure.
    """

    def __init__(self, batch_size: int = 64, measure: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        settings = {**dict(measure or {}), "batch_sizes": [batch_size], "latency": False}
        try:
            from nas.search.space import MeasureSpec

            self.settings = MeasureSpec(**settings).model_dump_json()
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(map(str, error["loc"])) or "measure"
            raise NasError(f"MeasuredThroughput: {where}: {error['msg']}") from None
        self.images_per_s: float | None = None

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.images_per_s is None:
            policy = keras.config.dtype_policy().name
            cost = _profiler(self.settings).measure(self.model, precision=policy, xla=False)
            self.images_per_s = float(cost.primary.images_per_s)
        if logs is not None:
            logs[THROUGHPUT] = self.images_per_s

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

KerasTuner's hyperparameters map to Optuna distributions (Choice and Boolean: categorical;
Int and Float: ranges, log when `sampling="log"`; Fixed: not sampled); conditional ones are
sampled only when active, as KerasTuner defines them. As with KerasTuner's own oracles, a
hyperparameter the model declares for the first time during a trial takes its default there
and is searched from the next trial on. `get_best_trials()` returns the Pareto
front. Running the tuner again on the same directory and study resumes both.
"""

from __future__ import annotations

import warnings
from typing import Any

import keras_tuner
import optuna
from keras_tuner.src.engine import hyperparameters as hp_module
from keras_tuner.src.engine import trial as trial_module
from optuna.trial import TrialState

from nas.search.engine import make_sampler
from nas.storage import open_storage, resolve_storage_url

__all__ = ["OptunaOracle"]


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


class OptunaOracle(keras_tuner.Oracle):  # type: ignore[misc]
    """KerasTuner Oracle whose proposals and results live in an Optuna study."""

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
        self.objective_names = [o.name for o in objectives]
        directions = [
            optuna.study.StudyDirection.MAXIMIZE if o.direction == "max" else optuna.study.StudyDirection.MINIMIZE
            for o in objectives
        ]
        url = resolve_storage_url(storage)
        self.study = optuna.create_study(
            study_name=study_name,
            # KerasTuner tracks its own running trials: no Optuna heartbeat thread.
            storage=open_storage(url, heartbeat_interval=None),
            directions=directions,
            sampler=make_sampler(sampler, seed),
            load_if_exists=True,
        )
        if self.study.metric_names is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                self.study.set_metric_names(self.objective_names)
        elif self.study.metric_names != self.objective_names:
            raise ValueError(
                f"study '{study_name}' has objectives {self.study.metric_names}, not {self.objective_names}"
            )
        self.optuna_numbers: dict[str, int] = {}  # KerasTuner trial id -> Optuna trial number

    def populate_space(self, trial_id: str) -> dict[str, Any]:
        trial = self.study.ask()
        trial.set_user_attr("keras_tuner_trial", trial_id)
        hps = hp_module.HyperParameters()
        values: dict[str, Any] = {}
        for hp in self.hyperparameters.space:
            hps.merge([hp])
            if hps.is_active(hp):  # conditional hyperparameters only when their parent allows
                values[hp.name] = hps.values[hp.name] = _suggest(trial, hp)
        self.optuna_numbers[trial_id] = trial.number
        return {"status": trial_module.TrialStatus.RUNNING, "values": values}

    def end_trial(self, trial: Any) -> None:
        super().end_trial(trial)
        number = self.optuna_numbers.get(trial.trial_id)
        if number is None:
            return
        frozen = self.study.get_trials(deepcopy=False)[number]
        if frozen.state != TrialState.RUNNING:
            return  # a retry of a trial already told
        ended = self.trials[trial.trial_id]
        if ended.status == trial_module.TrialStatus.COMPLETED:
            values = [ended.metrics.get_best_value(name) for name in self.objective_names]
            if all(v is not None for v in values):
                self.study.tell(number, values)
                return
        self.study.tell(number, state=TrialState.FAIL)

    def get_best_trials(self, num_trials: int = 1) -> list[Any]:
        """The Pareto front (best first objective first); at least `num_trials` trials when
        there are that many, topped up with KerasTuner's own ranking."""
        by_number = {n: tid for tid, n in self.optuna_numbers.items() if tid in self.trials}
        front = sorted(
            self.study.best_trials, key=lambda t: t.values[0], reverse=self.study.directions[0].name == "MAXIMIZE"
        )
        best = [self.trials[by_number[t.number]] for t in front if t.number in by_number]
        if len(best) < num_trials:
            chosen = {t.trial_id for t in best}
            best += [t for t in super().get_best_trials(len(self.trials)) if t.trial_id not in chosen]
        return best[: max(num_trials, len(front))]

    def get_state(self) -> dict[str, Any]:
        state: dict[str, Any] = super().get_state()
        state["optuna_numbers"] = self.optuna_numbers
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.optuna_numbers = dict(state.get("optuna_numbers", {}))

"""OptunaOracle as a drop-in for KerasTuner's oracles: real KerasTuner Tuners, real Optuna,
real SQLite.

Most tests use KerasTuner's "tune any function" recipe (a Tuner whose `run_trial` returns
metrics computed from the hyperparameters), so many trials run in a second; one test trains
real Keras models on scikit-learn's digits for the ordinary workflow.
"""

from __future__ import annotations

import re
import runpy
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import keras
import keras_tuner
import optuna
import pytest
from keras_tuner.src.engine import oracle as oracle_module
from optuna.trial import TrialState

from nas.errors import NasError
from nas.tuner import MeasuredThroughput, OptunaOracle

from ..helpers import QUICK_MEASURE, REPO

MAX = keras_tuner.Objective("score", "max")
Formula = Callable[[dict[str, Any]], dict[str, float]]


def plane(hp: keras_tuner.HyperParameters) -> dict[str, Any]:
    return {"x": hp.Float("x", 0.0, 1.0), "y": hp.Float("y", 0.0, 1.0)}


def six_configurations(hp: keras_tuner.HyperParameters) -> dict[str, Any]:
    """2 x (off, or on with 2 rates): 6 distinct configurations, one hyperparameter conditional."""
    values = {"a": hp.Choice("a", [1, 2]), "flag": hp.Boolean("flag")}
    if values["flag"]:
        with hp.conditional_scope("flag", [True]):
            values["rate"] = hp.Choice("rate", [0.1, 0.2])
    return values


def total(values: dict[str, Any]) -> dict[str, float]:
    return {"score": float(values["x"] + values["y"])}


class FormulaTuner(keras_tuner.Tuner):
    """A real KerasTuner Tuner whose trial evaluates a formula of its hyperparameters; trials
    named in `fail_first` raise on their first attempt, those in `fail_always` on every one."""

    def __init__(
        self,
        *args: Any,
        formula: Formula,
        fail_first: frozenset[str] = frozenset(),
        fail_always: frozenset[str] = frozenset(),
        **kwargs: Any,
    ) -> None:
        self.formula, self.fail_first, self.fail_always = formula, set(fail_first), set(fail_always)
        self.attempts: Counter[str] = Counter()
        super().__init__(*args, **kwargs)

    def run_trial(self, trial: Any, *args: Any, **kwargs: Any) -> keras.callbacks.History:
        self.attempts[trial.trial_id] += 1
        if trial.trial_id in self.fail_always or (
            trial.trial_id in self.fail_first and self.attempts[trial.trial_id] == 1
        ):
            raise RuntimeError(f"trial {trial.trial_id} crashed")
        # What `fit` returns (KerasTuner takes a plain dict for one objective only).
        history = keras.callbacks.History()
        history.history = {k: [v] for k, v in self.formula(self.hypermodel.build(trial.hyperparameters)).items()}
        return history


def tuner(
    folder: Path,
    *,
    max_trials: int,
    project: str = "p",
    study: str = "s",
    objective: Any = MAX,
    hypermodel: Callable[[keras_tuner.HyperParameters], Any] = plane,
    formula: Formula = total,
    overwrite: bool = False,
    oracle: Any = None,
    fail_first: frozenset[str] = frozenset(),
    fail_always: frozenset[str] = frozenset(),
    **oracle_kwargs: Any,
) -> FormulaTuner:
    if oracle is None:
        oracle = OptunaOracle(
            objective=objective,
            max_trials=max_trials,
            study_name=study,
            storage=storage_url(folder),
            **oracle_kwargs,
        )
    return FormulaTuner(
        oracle=oracle,
        hypermodel=hypermodel,
        formula=formula,
        fail_first=fail_first,
        fail_always=fail_always,
        directory=str(folder / "kt"),
        project_name=project,
        overwrite=overwrite,
    )


def storage_url(folder: Path) -> str:
    return f"sqlite:///{folder / 'kt.db'}"


def load(folder: Path, study: str = "s") -> optuna.Study:
    return optuna.load_study(study_name=study, storage=storage_url(folder))


def scores(trials: list[Any]) -> list[float]:
    return [t.score for t in trials]


def test_get_best_trials_is_at_most_n_best_first_on_one_objective(tmp_path: Path) -> None:
    ties = tuner(
        tmp_path,
        max_trials=6,
        hypermodel=lambda hp: {"a": hp.Choice("a", [0, 1, 2, 3, 4, 5])},
        formula=lambda v: {"score": float(min(v["a"], 3))},  # a = 3, 4 and 5 tie for best
    )
    ties.search(verbose=0)
    assert len(load(tmp_path).best_trials) == 3  # Optuna's best set holds every tie
    assert scores(ties.oracle.get_best_trials(2)) == [3.0, 3.0]
    assert scores(ties.oracle.get_best_trials(4)) == [3.0, 3.0, 3.0, 2.0]
    assert scores(ties.oracle.get_best_trials()) == [3.0]  # KerasTuner's default: one
    assert len(ties.get_best_hyperparameters(2)) == 2


def test_several_objectives_give_the_front_best_first(tmp_path: Path) -> None:
    both = tuner(
        tmp_path,
        max_trials=10,
        objective=[MAX, keras_tuner.Objective("cost", "min")],
        formula=lambda v: {"score": v["y"], "cost": v["x"]},
    )
    both.search(verbose=0)
    trials = list(both.oracle.trials.values())
    point = {t.trial_id: (t.metrics.get_best_value("score"), t.metrics.get_best_value("cost")) for t in trials}

    def dominated(a: str) -> bool:
        (s, c) = point[a]
        return any(s2 >= s and c2 <= c and (s2, c2) != (s, c) for s2, c2 in point.values())

    expected = sorted((t for t in point if not dominated(t)), key=lambda t: -point[t][0])
    assert 1 < len(expected) < len(trials) and expected != sorted(expected)  # not simply in trial order
    assert [t.trial_id for t in both.oracle.get_best_trials()] == expected
    assert [t.trial_id for t in both.oracle.get_best_trials(1)] == expected[:1]
    assert [t.trial_id for t in both.oracle.get_best_trials(len(expected) - 1)] == expected[:-1]
    numbers = both.oracle.optuna_numbers
    assert sorted(numbers[t] for t in expected) == sorted(t.number for t in load(tmp_path).best_trials)


def test_a_finite_space_is_used_up_without_repeats(tmp_path: Path) -> None:
    finite = tuner(tmp_path, max_trials=15, hypermodel=six_configurations, formula=lambda v: {"score": float(v["a"])})
    finite.search(verbose=0)
    tried = [tuple(sorted(t.hyperparameters.values.items())) for t in finite.oracle.trials.values()]
    assert len(tried) == 6 and len(set(tried)) == 6
    study = load(tmp_path)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len({tuple(sorted(t.params.items())) for t in complete}) == len(complete) == 6
    assert all("rate" not in t.params for t in complete if not t.params["flag"])
    # Proposals that repeated a tried configuration were not run: failed, saying so. At most
    # one per trial (the next proposal is an untried configuration), none once it is used up.
    others = [t for t in study.trials if t.state != TrialState.COMPLETE]
    assert all(t.state == TrialState.FAIL and "keras_tuner_duplicate_of" in t.user_attrs for t in others)
    assert len(others) < 6


def test_resume_continues_the_sampler_instead_of_replaying_it(tmp_path: Path) -> None:
    tuner(tmp_path, max_trials=3).search(verbose=0)
    first = [t.params["x"] for t in load(tmp_path).trials]
    again = tuner(tmp_path, max_trials=6)  # the same project and study: resumes both
    assert sorted(again.oracle.trials) == ["0", "1", "2"]
    again.search(verbose=0)
    study = load(tmp_path)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 6
    assert [t.params["x"] for t in study.trials[:3]] == first
    assert not {t.params["x"] for t in study.trials[3:]} & set(first)
    assert sorted(again.oracle.trials) == ["0", "1", "2", "3", "4", "5"]


def test_a_retried_trial_is_told_its_final_attempt(tmp_path: Path) -> None:
    flaky = tuner(tmp_path, max_trials=3, max_retries_per_trial=1, fail_first=frozenset({"1"}))
    flaky.search(verbose=0)
    assert flaky.attempts["1"] == 2
    study = load(tmp_path)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 3
    retried = study.trials[flaky.oracle.optuna_numbers["1"]]
    assert retried.user_attrs["keras_tuner_failed_attempts"] == 1
    assert "trial 1 crashed" in retried.user_attrs["keras_tuner_last_error"]
    assert "1" in [t.trial_id for t in flaky.oracle.get_best_trials(3)]
    assert retried.values == [flaky.oracle.trials["1"].score]


def test_a_trial_that_fails_every_attempt_is_failed_in_the_study(tmp_path: Path) -> None:
    broken = tuner(
        tmp_path, max_trials=3, max_retries_per_trial=1, max_consecutive_failed_trials=1, fail_always=frozenset({"0"})
    )
    with pytest.raises(RuntimeError, match="consecutive failures"):
        broken.search(verbose=0)
    assert broken.attempts["0"] == 2
    (trial,) = load(tmp_path).trials
    assert trial.state == TrialState.FAIL and "trial 0 crashed" in trial.user_attrs["keras_tuner_last_error"]


def test_overwrite_discards_the_old_study(tmp_path: Path) -> None:
    tuner(tmp_path, max_trials=3).search(verbose=0)
    fresh = tuner(tmp_path, max_trials=2, overwrite=True)
    fresh.search(verbose=0)
    study = load(tmp_path)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2
    assert [t.params["x"] for t in study.trials] == [t.hyperparameters["x"] for t in fresh.oracle.trials.values()]
    assert [s.study_name for s in optuna.get_all_study_summaries(storage_url(tmp_path))] == ["s"]
    # A study shared with another project cannot lose only this project's trials.
    tuner(tmp_path, max_trials=1, project="other").search(verbose=0)
    with pytest.raises(ValueError, match="other projects"):
        tuner(tmp_path, max_trials=2, overwrite=True).search(verbose=0)


def test_resuming_a_project_whose_study_is_gone_is_refused(tmp_path: Path) -> None:
    tuner(tmp_path, max_trials=2).search(verbose=0)
    optuna.delete_study(study_name="s", storage=storage_url(tmp_path))
    with pytest.raises(RuntimeError, match="no longer holds them"):
        tuner(tmp_path, max_trials=3)


def test_reopening_a_study_checks_directions_and_objectives(tmp_path: Path) -> None:
    tuner(tmp_path, max_trials=2).search(verbose=0)
    with pytest.raises(ValueError, match="directions"):
        tuner(tmp_path, max_trials=3, project="q", objective=keras_tuner.Objective("score", "min")).search(verbose=0)
    with pytest.raises(ValueError, match="directions"):  # resuming the project: at once
        tuner(tmp_path, max_trials=3, objective=keras_tuner.Objective("score", "min"))
    with pytest.raises(ValueError, match="objectives"):
        tuner(
            tmp_path,
            max_trials=3,
            project="r",
            objective=keras_tuner.Objective("loss", "max"),
            formula=lambda v: {"loss": 1.0},
        ).search(verbose=0)
    plain = optuna.create_study(study_name="plain", storage=storage_url(tmp_path), direction="maximize")
    plain.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    with pytest.raises(ValueError, match="not made by OptunaOracle"):
        tuner(tmp_path, max_trials=3, project="t", study="plain").search(verbose=0)
    assert len(load(tmp_path).trials) == 2 and len(load(tmp_path, "plain").trials) == 1


def test_a_project_of_another_oracle_is_refused(tmp_path: Path) -> None:
    random_search = keras_tuner.oracles.RandomSearchOracle(objective=MAX, max_trials=2, seed=1)
    tuner(tmp_path, max_trials=2, oracle=random_search).search(verbose=0)
    with pytest.raises(RuntimeError, match="overwrite=True"):
        tuner(tmp_path, max_trials=4)
    taken_over = tuner(tmp_path, max_trials=2, overwrite=True)
    taken_over.search(verbose=0)
    assert len(taken_over.oracle.get_best_trials(2)) == 2 and len(load(tmp_path).trials) == 2


def test_tuners_opening_a_new_database_together(tmp_path: Path) -> None:
    studies = ["shared", "shared", "shared", "own"]
    start = threading.Barrier(len(studies))
    tuners: dict[int, FormulaTuner] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            start.wait()
            tuners[index] = tuner(tmp_path, max_trials=2, project=f"p{index}", study=studies[index])
            tuners[index].search(verbose=0)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(studies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    shared = load(tmp_path, "shared")
    assert [t.state for t in shared.trials] == [TrialState.COMPLETE] * 6
    numbers = [n for i in range(3) for n in tuners[i].oracle.optuna_numbers.values()]
    assert sorted(numbers) == list(range(6))  # every tuner's trials are its own
    assert [t.state for t in load(tmp_path, "own").trials] == [TrialState.COMPLETE] * 2


def test_legacy_end_trial_tells_optuna_under_the_oracle_lock(tmp_path: Path) -> None:
    oracle = tuner(tmp_path, max_trials=2).oracle
    trial = oracle.create_trial("tuner0")
    oracle.update_trial(trial.trial_id, {"score": 0.5})
    locked = []
    tell = oracle.study.tell

    def watched_tell(*args: Any, **kwargs: Any) -> Any:
        locked.append(oracle_module.LOCKS[oracle].locked())
        return tell(*args, **kwargs)

    oracle.study.tell = watched_tell
    oracle.end_trial(trial.trial_id, "COMPLETED")  # KerasTuner's legacy signature
    assert locked == [True]
    (told,) = load(tmp_path).trials
    assert told.state == TrialState.COMPLETE and told.values == [0.5]


def test_best_so_far_is_shown_up_to_date(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tuner(tmp_path, max_trials=5).search(verbose=1)
    out = capsys.readouterr().out
    shown = [float(v) for v in re.findall(r"^score: (\S+)$", out, re.M)]
    best = [None if v == "None" else float(v) for v in re.findall(r"^Best score So Far: (\S+)$", out, re.M)]
    assert len(shown) == len(best) == 5
    assert best == [max(shown[: i + 1]) for i in range(5)]


@pytest.mark.slow  # trains
def test_the_keras_tuner_workflow_on_real_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    data = {"x": x[:300], "y": y[:300], "validation_data": (x[300:400], y[300:400]), "epochs": 1, "verbose": 0}

    def build(hp: keras_tuner.HyperParameters) -> keras.Model:
        model = keras.Sequential(
            [keras.Input((64,)), keras.layers.Dense(hp.Choice("units", [8, 16]), "relu"), keras.layers.Dense(10)]
        )
        model.compile(
            keras.optimizers.Adam(hp.Choice("learning_rate", [1e-2, 3e-3])),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        return model

    def keras_tuner_for(max_trials: int) -> keras_tuner.Tuner:
        oracle = OptunaOracle(
            objective=keras_tuner.Objective("val_accuracy", "max"),
            max_trials=max_trials,
            study_name="digits",
            storage=storage_url(tmp_path),
        )
        return keras_tuner.Tuner(hypermodel=build, oracle=oracle, directory=str(tmp_path / "kt"), project_name="d")

    first = keras_tuner_for(3)
    first.search(**data)
    models = first.get_best_models(2)
    best = first.oracle.get_best_trials(2)
    assert len(models) == 2 and scores(best) == sorted(scores(best), reverse=True)
    assert models[0].predict(x[:5], verbose=0).shape == (5, 10)
    assert first.get_best_hyperparameters()[0].values == best[0].hyperparameters.values
    first.results_summary(2)
    summary = capsys.readouterr().out
    assert "Showing 2 best trials" in summary and all(f"Trial {t.trial_id} summary" in summary for t in best)
    assert_told(first.oracle, load(tmp_path, "digits"))

    again = keras_tuner_for(10)  # overwrite=False: reloads the project and the study
    assert len(again.oracle.trials) == 3
    assert again.get_best_models(1)[0].predict(x[:5], verbose=0).shape == (5, 10)
    again.search(**data)  # 4 configurations in all: the fourth runs, then the space is used up
    assert len(again.oracle.trials) == 4
    assert [t.state for t in load(tmp_path, "digits").trials].count(TrialState.COMPLETE) == 4
    assert_told(again.oracle, load(tmp_path, "digits"))


def assert_told_values(oracle: OptunaOracle, study: optuna.Study) -> None:
    """Optuna was told each objective's value KerasTuner kept for the trial."""
    for trial in oracle.trials.values():
        told = study.trials[oracle.optuna_numbers[trial.trial_id]]
        assert told.values == [trial.metrics.get_best_value(name) for name in oracle.objective_names]


def assert_told(oracle: OptunaOracle, study: optuna.Study) -> None:
    """Each KerasTuner trial is its own Optuna trial, with its values and its score."""
    assert len(set(oracle.optuna_numbers.values())) == len(oracle.trials)
    for trial in oracle.trials.values():
        told = study.trials[oracle.optuna_numbers[trial.trial_id]]
        assert told.params == trial.hyperparameters.values and told.values == [trial.score]


@pytest.mark.slow  # trains
def test_the_example_script_runs_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    example = str(REPO / "examples" / "keras_tuner_oracle.py")
    monkeypatch.chdir(tmp_path)
    for trials in (1, 2):
        monkeypatch.setattr(sys, "argv", [example, "--trials", str(trials), "--storage", "sqlite:///kt.db"])
        runpy.run_path(example, run_name="__main__")
        study = optuna.load_study(study_name="keras-tuner-digits", storage="sqlite:///kt.db")
        assert [t.state for t in study.trials] == [TrialState.COMPLETE] * trials
    front = [line for line in capsys.readouterr().out.splitlines() if line.startswith("front: ")]
    assert len(front) >= 2  # one line per front trial, after each run


@pytest.mark.slow  # trains
def test_measured_throughput_is_a_second_objective(tmp_path: Path) -> None:
    """The oracle measures nothing; MeasuredThroughput reports nas' measured images/s of each
    trial's model as the metric `throughput`, and the study's front is over both objectives."""
    import numpy as np
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)

    def build(hp: keras_tuner.HyperParameters) -> keras.Model:
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(hp.Choice("units", [8, 512]), "relu")])
        model.add(keras.layers.Dense(10))
        model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
        return model

    objectives = [keras_tuner.Objective("val_accuracy", "max"), keras_tuner.Objective("throughput", "max")]
    oracle = OptunaOracle(objective=objectives, max_trials=2, study_name="fast", storage=storage_url(tmp_path))
    search = keras_tuner.Tuner(hypermodel=build, oracle=oracle, directory=str(tmp_path / "kt"), project_name="f")
    measured = MeasuredThroughput(batch_size=32, measure={k: v for k, v in QUICK_MEASURE.items() if k != "batch_sizes"})
    search.search(x[:300], y[:300], validation_data=(x[300:400], y[300:400]), epochs=2, verbose=0, callbacks=[measured])

    study = load(tmp_path, "fast")
    assert study.metric_names == ["val_accuracy", "throughput"]
    figures = {t.params["units"]: t.values[1] for t in study.trials}
    assert set(figures) == {8, 512} and all(v > 0 for v in figures.values())
    # Each trial's own model measured (a figure kept from the first trial would repeat).
    assert figures[8] != figures[512]
    assert_told_values(search.oracle, study)


def test_measured_throughput_refuses_bad_settings_in_one_line() -> None:
    with pytest.raises(NasError, match=r"^MeasuredThroughput: rounds: Input should be greater than or equal to 3$"):
        MeasuredThroughput(measure={"rounds": 1})
    with pytest.raises(NasError, match=r"^MeasuredThroughput: roundz: Extra inputs are not permitted$"):
        MeasuredThroughput(measure={"roundz": 5})

"""Which finished trials' weights are saved: exactly those the retention pass after the trial
is told would keep, judged before it is told (a study in memory: milliseconds)."""

from __future__ import annotations

import random
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa

from nas.errors import NasError
from nas.search.engine.retention import kept_on_finish, trials_to_keep
from nas.search.records import TrialAttr
from nas.search.results.export import _weights_file
from nas.storage.models import Base
from nas.storage.weights import WeightStore

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _study(directions: list[str]) -> optuna.Study:
    return optuna.create_study(directions=directions)


def _finish(study: optuna.Study, values: list[float], constraints: dict[str, float] | None = None) -> int:
    trial = study.ask()
    for name, value in (constraints or {}).items():
        trial.set_constraint(name, value)
    study.tell(trial, values)
    return trial.number


def test_a_trial_dominated_when_it_finishes_is_not_worth_saving_and_says_by_whom() -> None:
    study = _study(["maximize", "maximize"])
    first = _finish(study, [0.9, 100.0])
    trial = study.ask()
    assert kept_on_finish(study, trial.number, [0.8, 90.0], {}, 0) == f"trial {first} dominated it when it finished"
    assert kept_on_finish(study, trial.number, [0.8, 120.0], {}, 0) is None  # faster: a new front member
    assert kept_on_finish(study, trial.number, [0.9, 100.0], {}, 0) is None  # equal values dominate nothing
    assert kept_on_finish(study, trial.number, [0.8, 90.0], {}, 1) == f"trial {first} dominated it when it finished"
    assert kept_on_finish(study, trial.number, [0.8, 90.0], {}, 2) is None  # second most accurate of two


def test_directions_and_constraints_count_as_in_best_trials() -> None:
    study = _study(["maximize", "minimize"])
    _finish(study, [0.95, 10.0], {"min_throughput": 1.0})  # infeasible: dominates nothing
    trial = study.ask()
    assert kept_on_finish(study, trial.number, [0.9, 20.0], {}, 0) is None
    assert kept_on_finish(study, trial.number, [0.9, 20.0], {"min_throughput": 0.5}, 3) == "it broke a constraint"
    feasible = _finish(study, [0.9, 15.0], {"min_throughput": -1.0})
    assert kept_on_finish(study, trial.number, [0.9, 20.0], {}, 0) == f"trial {feasible} dominated it when it finished"


@pytest.mark.parametrize("seed", range(40))
def test_the_verdict_before_telling_matches_retention_after_it(seed: int) -> None:
    """Random studies on a coarse grid (ties in every objective), with constraints, parallel
    trials told out of order and a top k: whatever kept_on_finish says before a trial is told,
    trials_to_keep says after."""
    rng = random.Random(seed)
    study = _study([rng.choice(["maximize", "minimize"]) for _ in range(rng.choice([1, 2, 3]))])
    top_k = rng.choice([0, 0, 1, 3])
    constrained = rng.random() < 0.5
    running: list[optuna.Trial] = []
    for _ in range(25):
        while len(running) < rng.choice([1, 2, 4]):
            running.append(study.ask())
        trial = running.pop(rng.randrange(len(running)))
        values = [float(rng.randint(0, 4)) for _ in study.directions]
        constraints = {"c": float(rng.choice([-1, -1, -1, 1]))} if constrained else {}
        verdict = kept_on_finish(study, trial.number, values, constraints, top_k)
        for name, value in constraints.items():
            trial.set_constraint(name, value)
        study.tell(trial, values)
        kept = trial.number in trials_to_keep(study, study.best_trials, top_k)
        assert (verdict is None) == kept, (values, constraints, verdict)


def test_export_says_why_a_skipped_trial_has_no_weights(tmp_path: Path) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    Base.metadata.create_all(engine)
    store = WeightStore(engine, tmp_path / "artifacts")
    trial = optuna.trial.create_trial(
        values=[0.5, 10.0], user_attrs={TrialAttr.WEIGHTS_SKIPPED: "trial 0 dominated it when it finished"}
    )
    trial.number = 3
    with pytest.raises(NasError, match="weights of trial 3 were never saved: trial 0 dominated it when it finished"):
        _weights_file(store, "s", trial, None)
    plain = optuna.trial.create_trial(values=[0.5, 10.0])
    with pytest.raises(NasError, match="has no stored weights"):
        _weights_file(store, "s", plain, None)

"""The noise-aware front: dominance only beyond the throughput's interval, overlaps named,
checked on hand-made cases and against the pair-by-pair definition on random studies."""

from __future__ import annotations

import random
from typing import Any

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from nas.search.results import pareto_records
from nas.search.results.pareto import noise_aware_front

from ..helpers import brute_force_front, brute_force_noise_front


def _trial(accuracy: float, throughput: float, low: float | None, high: float | None) -> Any:
    figure = {"images_per_s": throughput, "low": low, "high": high}
    return create_trial(
        state=TrialState.COMPLETE,
        values=[accuracy, throughput],
        params={"x": accuracy},
        distributions={"x": FloatDistribution(0, 1)},
        user_attrs={"hardware": {"throughput": {"64": figure}}},
    )


def _study(*trials: Any) -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "maximize"])
    study.set_metric_names(["accuracy", "throughput"])
    study.add_trials(list(trials))
    return study


def test_a_trial_beaten_only_within_the_interval_stays_marked() -> None:
    study = _study(
        _trial(0.90, 1030, 980, 1080),  # 0: on the front
        _trial(0.85, 1000, 950, 1050),  # 1: slower by medians only: within noise
        _trial(0.80, 500, 490, 510),  # 2: slower beyond any doubt: dominated
        _trial(0.88, 1030, 980, 1080),  # 3: the same measurement as 0 (same network), less accurate: dominated
        _trial(0.70, 2000, 1900, 2100),  # 4: on the front, apart from everyone
    )
    records = {r["trial"]: r for r in pareto_records(study)}
    assert set(records) == {0, 1, 4}
    assert records[0]["on_front"] and records[4]["on_front"] and not records[1]["on_front"]
    assert records[0]["overlaps"] == [1] and records[1]["overlaps"] == [0] and records[4]["overlaps"] == []
    assert (records[1]["throughput_low"], records[1]["throughput_high"]) == (950, 1050)
    assert [r["trial"] for r in pareto_records(study)] == [0, 1, 4]  # best accuracy first


def test_figures_without_an_interval_compare_as_exact() -> None:
    study = _study(_trial(0.9, 1000, None, None), _trial(0.8, 990, None, None), _trial(0.7, 2000, None, None))
    assert {t.number for t in noise_aware_front(study)} == {0, 2} == {t.number for t in study.best_trials}


def test_matches_the_definition_on_random_studies() -> None:
    rng = random.Random(3)
    for _ in range(20):
        trials = []
        for _ in range(rng.randint(1, 40)):
            throughput = rng.uniform(100, 1000)
            width = rng.choice([0.0, 0.02, 0.1, 0.3]) * throughput
            shared = trials and rng.random() < 0.2  # another trial of an already measured network
            if shared:
                source = rng.choice(trials)
                figure = source.user_attrs["hardware"]["throughput"]["64"]
                trials.append(_trial(rng.random(), figure["images_per_s"], figure["low"], figure["high"]))
            else:
                trials.append(_trial(round(rng.random(), 2), throughput, throughput - width, throughput + width))
        study = _study(*trials)
        names, directions = ["accuracy", "throughput"], study.directions
        ours = {t.number for t in noise_aware_front(study)}
        assert ours == brute_force_noise_front(study.trials, directions, names)
        assert brute_force_front(study.trials, directions) <= ours  # never smaller than the plain front

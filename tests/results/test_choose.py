"""Choosing by figures (`--where`, `--best`; results/choose.py) on hand-made studies: the front
of the trials that meet the constraints, the best member by a figure, the closest trial when
none meets them, and one-line errors for what cannot be parsed."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import optuna
import pytest

from nas.errors import NasError
from nas.search.records import FinalFigures, FinalTraining
from nas.search.results import Choice

from ..helpers import brute_force_noise_front, finished_trial


def _trial(accuracy: float, throughput: float, params: int, width: float = 0.01) -> Any:
    figure = {"images_per_s": throughput, "low": throughput * (1 - width), "high": throughput * (1 + width)}
    hardware = {"throughput": {"64": figure}}
    return finished_trial(accuracy, throughput, hardware=hardware, params=params, model_bytes=4 * params)


def _study(*trials: Any, name: str = "s") -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "maximize"], study_name=name)
    study.set_metric_names(["accuracy", "throughput"])
    study.add_trials(list(trials))
    return study


def _final(study: optuna.Study, **test_accuracy: float) -> None:
    """`nas train`'s record with these test accuracies (trial number -> accuracy)."""
    figures = {
        number: FinalFigures(
            recipe={"epochs": 1}, test_accuracy=accuracy, keras_test_accuracy=accuracy, search_accuracy=None,
            history={}, seconds=1.0, throughput=1.0, throughput_low=None, throughput_high=None, device=None,
            model="m.keras", sha256="0",
        )
        for number, accuracy in test_accuracy.items()
    }  # fmt: skip
    study.set_user_attr(FinalTraining.KEY, FinalTraining("2026-01-01T00:00:00+00:00", figures).to_attr())


def _five() -> optuna.Study:
    return _study(
        _trial(0.95, 1000, 500_000),  # 0
        _trial(0.90, 3000, 200_000),  # 1
        _trial(0.85, 6000, 100_000),  # 2
        _trial(0.80, 5500, 50_000),  # 3: dominated by 2, but the only one with at most 60k parameters
        _trial(0.70, 9000, 300_000),  # 4
    )


def _chosen(study: optuna.Study, where: Sequence[str] | str = (), best: str | None = None) -> list[int]:
    return [r["trial"] for r in Choice.parse(where, best).records(study)]


def test_where_keeps_the_front_of_the_trials_that_meet_it() -> None:
    study = _five()
    assert sorted(_chosen(study)) == [0, 1, 2, 4]  # no constraint: the front, as `nas pareto`
    assert sorted(_chosen(study, ["throughput>=5000"])) == [2, 4]
    assert _chosen(study, ["params<=60000"]) == [3]  # dominated only by trials the constraint removes
    assert _chosen(study, ["params<=100000", "accuracy>=0.8"]) == [2]  # AND: 3 meets both, and 2 dominates it
    assert _chosen(study, "throughput>=5000", best="accuracy") == [2]
    assert _chosen(study, best="throughput") == [4]
    assert _chosen(study, ["accuracy > 0.9"]) == [0]  # strict: 0.90 is out
    assert _chosen(study, ["accuracy==0.9"]) == [1]
    # Each record is pareto()'s, with the figures the constraints read.
    (record,) = Choice.parse(["throughput>=5000"], "accuracy").records(study)
    assert record["params"] == 100_000 and record["throughput"] == 6000 and record["on_front"]


def test_words_for_a_figure() -> None:
    study = _five()
    assert _chosen(study, ["Parameters <= 60000"]) == _chosen(study, ["params<=60000"]) == [3]
    assert _chosen(study, ["size<=200000"]) == [3]  # no model_size objective: float32 bytes (4 per parameter)
    _final(study, **{"1": 0.91, "2": 0.93})
    assert _chosen(study, best="Test accuracy") == _chosen(study, best="test-accuracy") == [2]
    assert _chosen(study, ["test_accuracy>0.92"]) == [2]  # a trial not final-trained does not meet it


def test_best_breaks_ties_by_the_objectives() -> None:
    # The same accuracy; 1 is faster by its median, within the noise of 0's interval.
    study = _study(_trial(0.9, 1000, 1, width=0.2), _trial(0.9, 1100, 2, width=0.2))
    assert sorted(_chosen(study)) == [0, 1]
    assert _chosen(study, best="accuracy") == [1]
    assert _chosen(study, best="params") == [0]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        (["throughput>=10000"], "no trial of study 's' meets it; the closest is trial 4 (throughput 9,000)"),
        (
            ["throughput>=7000", "accuracy>=0.9"],
            "no trial of study 's' meets them all; the closest is trial 2 (throughput 6,000, accuracy 0.85)",
        ),
        (["params<10000"], "the closest is trial 3 (params 50,000)"),
        (["test_accuracy>=0.5"], "no trial of study 's' has test_accuracy (only trials final-trained by `nas train`"),
    ],
)
def test_a_constraint_no_trial_meets_names_the_closest(where: list[str], expected: str) -> None:
    with pytest.raises(NasError) as caught:
        Choice.parse(where).records(_five())
    assert expected in str(caught.value) and str(caught.value).startswith("where " + where[0])


@pytest.mark.parametrize(
    ("where", "best", "expected"),
    [
        (["speed>=5"], None, "where 'speed>=5': unknown figure 'speed' (figures: accuracy, throughput,"),
        (["throughput=>5"], None, "where 'throughput=>5': not a constraint such as 'throughput>=5000'"),
        (["throughput>=5k"], None, "where 'throughput>=5k': '5k' is not a number"),
        (["throughput>=nan"], None, "'nan' is not a number"),
        ([">=5"], None, "not a constraint such as"),
        ([], "fastest", "objective 'fastest': unknown figure 'fastest' (figures: accuracy, throughput,"),
    ],
)
def test_what_cannot_be_parsed_is_one_line_naming_the_figures(
    where: list[str], best: str | None, expected: str
) -> None:
    with pytest.raises(NasError) as caught:
        Choice.parse(where, best)
    message = str(caught.value)
    assert expected in message and len(message.splitlines()) == 1
    # The CLI writes the options as flags.
    assert caught.value.render(lambda name: "--" + name).startswith("--where" if where else "--best")


def test_best_by_a_figure_no_front_member_has() -> None:
    with pytest.raises(
        NasError, match=r"objective test_accuracy: no front member of study 's' has test_accuracy \(only"
    ):
        Choice.parse(best="test_accuracy").records(_five())
    with pytest.raises(NasError, match="study 'empty' has no finished trials yet"):
        Choice.parse(best="accuracy").records(_study(name="empty"))


def test_matches_the_definition_on_random_studies() -> None:
    """The chosen front is the noise-aware front, by its definition, of the trials that meet
    the constraints."""
    rng = random.Random(5)
    for _ in range(20):
        trials = [
            _trial(round(rng.random(), 2), rng.uniform(100, 1000), rng.randint(1, 100), width=rng.choice([0, 0.05]))
            for _ in range(rng.randint(1, 30))
        ]
        study = _study(*trials)
        bound = rng.randint(1, 100)
        meeting = [t for t in study.trials if t.user_attrs["params"] <= bound]
        try:
            ours = set(_chosen(study, [f"params<={bound}"]))
        except NasError:
            assert not meeting
            continue
        assert ours == brute_force_noise_front(meeting, study.directions, ["accuracy", "throughput"])

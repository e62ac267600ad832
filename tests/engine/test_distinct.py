"""The sampler wrapper that keeps a search from training a configuration the study already has."""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution
from optuna.trial import FrozenTrial, TrialState

from nas.search.engine.distinct import DistinctSampler
from nas.search.engine.samplers import make_sampler

SPACE: dict[str, BaseDistribution] = {
    "kernel": CategoricalDistribution([3, 5, 7]),
    "width": CategoricalDistribution([0.5, 1.0, 1.5]),
    "se": CategoricalDistribution([False, True]),
}


class Stubborn(optuna.samplers.RandomSampler):
    """Proposes one configuration jointly, every time, as a sampler sure of its favourite."""

    def __init__(self, favourite: dict[str, Any], space: dict[str, BaseDistribution] = SPACE) -> None:
        super().__init__(seed=0)
        self.favourite, self.space = favourite, space

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.space

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {k: v for k, v in self.favourite.items() if k in search_space}


def _ask(study: optuna.Study, space: dict[str, BaseDistribution] = SPACE) -> optuna.Trial:
    trial = study.ask()
    for name, distribution in space.items():
        trial._suggest(name, distribution)
    return trial


FAVOURITE = {"kernel": 5, "width": 1.0, "se": True}


def test_a_repeated_proposal_is_replaced_by_a_configuration_not_yet_seen() -> None:
    sampler = DistinctSampler(Stubborn(FAVOURITE), seed=1)
    study = optuna.create_study(sampler=sampler)
    first = _ask(study)
    assert first.params == FAVOURITE
    study.tell(first, 1.0)
    running = _ask(study)  # not told yet: a running configuration counts too
    seen = [first.params, running.params]
    for _ in range(16):
        trial = _ask(study)
        seen.append(trial.params)
        study.tell(trial, 0.5)
    # 3 x 3 x 2 = 18 configurations, 18 trials: every one once.
    assert len({tuple(sorted(p.items())) for p in seen}) == 18
    assert sampler.replaced == 17
    last = _ask(study)  # the space is exhausted: the sampler's own proposal, trained again
    assert last.params == FAVOURITE


def test_a_failed_configuration_may_be_tried_again() -> None:
    study = optuna.create_study(sampler=DistinctSampler(Stubborn(FAVOURITE), seed=1))
    first = _ask(study)
    study.tell(first, state=TrialState.FAIL)
    assert _ask(study).params == FAVOURITE


def test_parameters_fixed_around_it_do_not_hide_a_repeat() -> None:
    """A supernet search fixes the training knobs with PartialFixedSampler: every trial holds
    them, the wrapper sees only the sampled part, and still finds the repeat."""
    inner = DistinctSampler(Stubborn(FAVOURITE, {**SPACE, "lr": CategoricalDistribution([0.01])}), seed=1)
    study = optuna.create_study(sampler=optuna.samplers.PartialFixedSampler({"lr": 0.01}, inner))
    space = {**SPACE, "lr": CategoricalDistribution([0.01])}
    first = _ask(study, space)
    study.tell(first, 1.0)
    second = _ask(study, space)
    assert first.params["lr"] == second.params["lr"] == 0.01
    assert second.params != first.params


def test_a_continuous_repeat_is_the_samplers_choice() -> None:
    space = {"lr": FloatDistribution(1e-4, 1e-1, log=True)}
    study = optuna.create_study(sampler=DistinctSampler(Stubborn({"lr": 0.01}, space), seed=1))
    for _ in range(2):
        trial = _ask(study, space)
        assert trial.params == {"lr": 0.01}
        study.tell(trial, 1.0)


def _distinct_configurations(sampler: optuna.samplers.BaseSampler, trials: int) -> int:
    """Configurations a two-objective TPE study of the small space trained in `trials` trials."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    for _ in range(trials):
        trial = _ask(study)
        p = trial.params
        study.tell(trial, [p["kernel"] / 7 + p["se"] * 0.1, p["width"] - p["kernel"] / 10])
    return len({tuple(sorted(t.params.items())) for t in study.trials})


def test_nas_samplers_do_not_repeat_where_optunas_own_do() -> None:
    plain = optuna.samplers.TPESampler(seed=0, multivariate=True, constant_liar=True)
    assert _distinct_configurations(plain, 16) < 16  # what the wrapper is for
    for name in ("tpe", "nsga2"):
        assert _distinct_configurations(make_sampler(name, 0), 16) == 16, name

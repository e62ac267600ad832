"""A sampler wrapper that does not hand out a configuration the study already has.

On a discrete space a model-based sampler keeps proposing its favourite points: replayed on
the table benchmark (benchmarks/replay.py), multivariate TPE re-proposed a finished
configuration in 5-10 of 45 trials, each of which would train the same network again for a
figure the study already holds. Optuna's samplers do not skip them (its FAQ leaves it to the
objective) and KerasTuner's oracles redraw a repeated random draw up to 20 times, then end
the search; this wrapper asks the sampler again and, if it insists, moves to the nearest
configurations not yet seen, so the search goes on.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.trial import FrozenTrial, TrialState

from nas.search.engine.optuna_private import cached_trials

# A configuration is "had" while it runs, once it finished and once it was pruned (screened
# or stopped at a rung: it would be again); a failed one may be tried again.
HAD = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
RESAMPLES = 3  # fresh proposals from the sampler before moving to neighbours
NEIGHBOURS = 64  # random neighbours tried, from one changed parameter to several


def _key(params: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(params.items()))


class DistinctSampler(BaseSampler):
    """Delegates to `inner`; a relative proposal equal to a configuration the study had is
    replaced (by a fresh proposal, then by the proposal with one, two, ... parameters changed
    at random), and kept only when no unseen configuration turns up. Only the jointly
    sampled part is compared (with the same parameters of earlier trials): what the sampler
    draws one by one is its own, and parameters fixed around it (PartialFixedSampler) are
    the same in every trial."""

    def __init__(self, inner: BaseSampler, seed: int | None = None) -> None:
        self.inner = inner
        self.rng = random.Random(seed)
        self.replaced = 0  # proposals replaced so far, for tests and benchmarks

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        proposal = self.inner.sample_relative(study, trial, search_space) or self._draw(search_space)
        if not proposal:
            return proposal
        names = set(proposal)
        had = {
            _key({n: t.params[n] for n in names})
            for t in cached_trials(study, HAD)
            if t.number != trial.number and names <= t.params.keys()
        }
        if _key(proposal) not in had:
            return proposal
        for _ in range(RESAMPLES):
            fresh = self.inner.sample_relative(study, trial, search_space)
            if set(fresh) == names and _key(fresh) not in had:
                self.replaced += 1
                return fresh
        for attempt in range(NEIGHBOURS):
            near = self._neighbour(proposal, search_space, changes=1 + attempt * len(names) // NEIGHBOURS)
            if near is not None and _key(near) not in had:
                self.replaced += 1
                return near
        return proposal  # the space near it is exhausted: train it again

    def _draw(self, space: dict[str, BaseDistribution]) -> dict[str, Any]:
        """A configuration drawn uniformly at random, jointly, where the sampler draws its first
        trials one parameter at a time (TPE's and GP's start-up, NSGA-II's first generation:
        the same uniform draw, but one whose repeats can be seen). Empty when a parameter is
        continuous: then the sampler draws as it would."""
        values = {name: _values(distribution) for name, distribution in space.items()}
        if not values or not all(values.values()):
            return {}
        return {name: self.rng.choice(options) for name, options in values.items()}

    def _neighbour(
        self, proposal: dict[str, Any], space: dict[str, BaseDistribution], *, changes: int
    ) -> dict[str, Any] | None:
        """The proposal with `changes` parameters set to other values of their distribution."""
        movable = [n for n in proposal if _other_values(space[n], proposal[n])]
        if not movable:
            return None
        near = dict(proposal)
        for name in self.rng.sample(movable, min(changes, len(movable))):
            near[name] = self.rng.choice(_other_values(space[name], proposal[name]))
        return near

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        return self.inner.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(
        self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()
        self.rng = random.Random()


def _values(distribution: BaseDistribution) -> list[Any]:
    """Every value a discrete distribution holds (none for a continuous one, where a repeat is
    a sampler's choice, not a collision; nor for a range too wide to list)."""
    if isinstance(distribution, optuna.distributions.CategoricalDistribution):
        return list(distribution.choices)
    if isinstance(distribution, optuna.distributions.IntDistribution) and not distribution.log:
        span = range(distribution.low, distribution.high + 1, distribution.step)
        return list(span) if len(span) <= 1024 else []
    return []


def _other_values(distribution: BaseDistribution, value: Any) -> list[Any]:
    return [v for v in _values(distribution) if v != value]

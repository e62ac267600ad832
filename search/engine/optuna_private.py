"""Every use of Optuna's private API, in one place, so an Optuna upgrade is checked here.

We drive trials with ask/tell from several processes and must (a) record heartbeats and fail
orphaned trials with a reason, which needs a trial's storage id, and (b) find trials with a
stale heartbeat, which Optuna only offers through fail_stale_trials() (it fails them without
a chance to say why). Pinned to Optuna 5 (pyproject); the engine's tests exercise each call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import optuna
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial

log = logging.getLogger("nas")


def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    """The storage's id of a trial (Trial and FrozenTrial keep it private)."""
    return int(trial._trial_id)


def study_storage(study: optuna.Study) -> optuna.storages.BaseStorage:
    return study._storage


def stale_trial_ids(study: optuna.Study) -> set[int] | None:
    """Ids of RUNNING trials whose heartbeat is older than the storage's grace period; None
    when this storage or Optuna version cannot tell (the caller says so)."""
    finder = getattr(study._storage, "_get_stale_trial_ids", None)
    if finder is None:
        return None
    try:
        return set(finder(study._study_id))
    except Exception as exc:  # a private call: any failure means "cannot tell", never a crash
        log.warning("could not query stale heartbeats: %s", exc)
        return None


def cached_trials(study: optuna.Study, states: tuple[optuna.trial.TrialState, ...]) -> list[FrozenTrial]:
    """The study's trials as its sampler sees them during one ask: Optuna caches the list per
    ask for its own samplers, so a sampler wrapper reading it costs no second storage query."""
    return study._get_trials(deepcopy=False, states=states, use_cache=True)


def front_trials(study: optuna.Study) -> list[FrozenTrial]:
    """`study.best_trials` without its deep copy of every trial: Optuna 5 copies the whole
    study on each call (3 s at 3,000 trials on 2 cores, benchmarks/sampler_cost.py), which the
    engine did twice per trial. The same trials in the same order, not copies: read them only."""
    return pareto_front_of(study.get_trials(deepcopy=False), study.directions)


def pareto_front_of(trials: Sequence[FrozenTrial], directions: Sequence[StudyDirection]) -> list[FrozenTrial]:
    """best_trials of these trials alone: the COMPLETE, feasible ones no other dominates by
    value, in their order. Feasibility is filtered always: a trial without constraints is
    feasible, so this is what best_trials gives with or without constraints in the study."""
    from optuna.study._multi_objective import _get_pareto_front_trials_by_trials

    return _get_pareto_front_trials_by_trials(trials, directions, consider_constraint=True)

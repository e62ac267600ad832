"""Which trials' weights to keep: the Pareto front, plus optionally the k most accurate.

Deleting the rest is safe while the search goes on: a trial that left the front is
dominated for good (trials are never removed), and one that left the top k never returns.
"""

from __future__ import annotations

import optuna
from optuna.study import StudyDirection
from optuna.trial import TrialState


def _feasible(trial: optuna.trial.FrozenTrial) -> bool:
    return all(v <= 0 for v in trial.constraints.values())


def trials_to_keep(study: optuna.Study, front: list[optuna.trial.FrozenTrial], top_k: int) -> set[int]:
    """The front's trials (`study.best_trials`, which the caller already has), plus the top k."""
    keep = {t.number for t in front}
    if top_k > 0:
        done = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE and _feasible(t)]
        sign = -1.0 if study.directions[0] == StudyDirection.MAXIMIZE else 1.0
        done.sort(key=lambda t: sign * t.values[0])
        keep |= {t.number for t in done[:top_k]}
    return keep

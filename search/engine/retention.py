"""Which trials' weights to keep: the Pareto front, plus optionally the k most accurate.

Deleting the rest is safe while the search goes on: a trial that left the front is
dominated for good (trials are never removed), and one that left the top k never returns.
For the same reason a trial that finishes outside both is never saved at all: the next pass
would delete its file, and saving a Keras model costs a fifth of a second per trial.

A study measured on several devices has one front per device (engine/front.py): a trial is
only ever judged against trials measured on its own device, so a faster device never takes
the weights of another device's front (the top k too, where its objective is measured).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import optuna
from optuna.study import StudyDirection
from optuna.trial import TrialState

from nas.search.engine.front import MEASURED, by_device, objective_names, same_device


def _feasible(trial: optuna.trial.FrozenTrial) -> bool:
    return all(v <= 0 for v in trial.constraints.values())


def _top_k_per_device(study: optuna.Study) -> bool:
    """Whether the top k ranks an objective measured on a device: then k per device."""
    return objective_names(study)[0] in MEASURED


def trials_to_keep(study: optuna.Study, front: list[optuna.trial.FrozenTrial], top_k: int) -> set[int]:
    """The front's trials (front.pareto_front, which the caller already has), plus the top k."""
    keep = {t.number for t in front}
    if top_k > 0:
        done = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE and _feasible(t)]
        sign = -1.0 if study.directions[0] == StudyDirection.MAXIMIZE else 1.0
        for group in by_device(study, done) if _top_k_per_device(study) else [done]:
            group.sort(key=lambda t: sign * t.values[0])
            keep |= {t.number for t in group[:top_k]}
    return keep


def _dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[StudyDirection]) -> bool:
    """Optuna's dominance (study.best_trials): no worse in every objective, and not equal."""
    signs = [1.0 if d == StudyDirection.MINIMIZE else -1.0 for d in directions]
    a_loss = [s * v for s, v in zip(signs, a, strict=True)]
    b_loss = [s * v for s, v in zip(signs, b, strict=True)]
    return a_loss != b_loss and all(x <= y for x, y in zip(a_loss, b_loss, strict=True))


def kept_on_finish(
    study: optuna.Study,
    number: int,
    values: Sequence[float],
    constraints: dict[str, float],
    top_k: int,
    device: Mapping[str, Any] | None = None,
) -> str | None:
    """None when trial `number`, finishing with `values` and `constraints` as measured on
    `device` (its stored description), would be in `trials_to_keep` once told; otherwise why
    not. Judged on the trials finished so far: a trial told meanwhile by another worker can
    only take it off the front, never put it on."""
    if any(v > 0 for v in constraints.values()):
        return "it broke a constraint"  # best_trials and the top k count feasible trials only
    done = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.number != number and _feasible(t)
    ]
    rivals = same_device(study, done, device)
    dominating = next((t for t in rivals if _dominates(t.values, values, study.directions)), None)
    if dominating is None:
        return None
    if top_k > 0:
        done = rivals if _top_k_per_device(study) else done
        sign = -1.0 if study.directions[0] == StudyDirection.MAXIMIZE else 1.0
        mine = (sign * values[0], number)  # trials_to_keep's sort is stable: ties go by number
        if sum(1 for t in done if (sign * t.values[0], t.number) < mine) < top_k:
            return None
    return f"trial {dominating.number} dominated it when it finished"

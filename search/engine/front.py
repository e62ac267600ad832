"""The study's front as the engine, the after-search steps and the results read it: objective
names, the noise-aware front (a measured throughput is an interval, hardware/intervals.py: a
trial dominates another only beyond it), and the figures stored after the search."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.search.records import Confirmation, ConfirmedFigure, FinalFigures, FinalTraining, StudyAttr, TrialAttr

NOISY = "throughput"  # the objective measured with an interval


def objective_names(study: optuna.Study) -> list[str]:
    return study.metric_names or [f"objective{i}" for i in range(len(study.directions))]


def throughput_interval(trial: FrozenTrial) -> tuple[float, float] | None:
    """The 95% interval of the trial's objective throughput (the first batch size), or None
    for figures measured before intervals were kept."""
    figures = ((trial.user_attrs.get(TrialAttr.HARDWARE) or {}).get("throughput") or {}).values()
    first = next(iter(figures), None) or {}
    low, high = first.get("low"), first.get("high")
    return (float(low), float(high)) if low is not None and high is not None else None


def _ends(
    study: optuna.Study, rows: list[tuple[list[float], tuple[float, float] | None]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For rows of (objective values, throughput interval): the values maximised, each row's
    worst and best case (equal but for the noisy objective) and which stored measurement each
    row's throughput is (rows sharing one compare it as exact)."""
    names = objective_names(study)
    signs = np.array([1.0 if d == optuna.study.StudyDirection.MAXIMIZE else -1.0 for d in study.directions])
    values = np.array([v for v, _ in rows], dtype=float).reshape(len(rows), len(signs)) * signs
    worst, best = values.copy(), values.copy()
    figure_of = np.arange(len(rows))
    if NOISY in names:
        k = names.index(NOISY)
        seen: dict[tuple[float, float, float], int] = {}
        for i, (v, interval) in enumerate(rows):
            if interval is None:
                continue
            ends = sorted(signs[k] * np.array(interval))
            worst[i, k], best[i, k] = ends[0], ends[1]
            figure_of[i] = seen.setdefault((v[k], *interval), i)
    return values, worst, best, figure_of


def _dominating(ends: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], i: int) -> np.ndarray:
    """Which rows dominate row i beyond the measurement's interval: at least as good in every
    objective at their worst against its best, better in one."""
    values, worst, best, figure_of = ends
    same = (figure_of == figure_of[i])[:, None]  # one measurement: compare it as exact
    a_worst = np.where(same, values, worst)
    b_best = np.where(same, values[i], best[i])
    dominating: np.ndarray = (a_worst >= b_best).all(axis=1) & (a_worst > b_best).any(axis=1)
    return dominating


def noise_aware_front(
    study: optuna.Study, among: Sequence[FrozenTrial] | None = None, *, exact: bool = False
) -> list[FrozenTrial]:
    """The finished trials no other trial dominates beyond the measurement's interval. `among`:
    the front of those trials only (the ones a `--where` kept); `exact`: compared by medians
    alone, the plain front."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if among is None else among
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.values]
    if not done:
        return []
    ends = _ends(study, [(t.values, None if exact else throughput_interval(t)) for t in done])
    return [t for i, t in enumerate(done) if not _dominating(ends, i).any()]


def dominated_by(
    study: optuna.Study, known: dict[str, float], interval: tuple[float, float] | None
) -> FrozenTrial | None:
    """A feasible COMPLETE trial that dominates a point beyond the noise, compared as
    noise_aware_front compares two trials (`interval`: the point's throughput interval); None
    if none does. An objective missing from `known` counts as its best possible value."""
    done = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.values and all(c <= 0 for c in t.constraints.values())
    ]
    if not done:
        return None
    best = {optuna.study.StudyDirection.MAXIMIZE: np.inf, optuna.study.StudyDirection.MINIMIZE: -np.inf}
    point = [known.get(name, best[d]) for name, d in zip(objective_names(study), study.directions, strict=True)]
    ends = _ends(study, [(t.values, throughput_interval(t)) for t in done] + [(point, interval)])
    hits = np.flatnonzero(_dominating(ends, len(done)))
    return done[int(hits[0])] if hits.size else None


def confirmation(study: optuna.Study) -> Confirmation | None:
    """The front's throughput measured again after the search (`nas pareto --confirm`): when,
    where, how, and the figures; None when it never was."""
    return Confirmation.from_attr(study.user_attrs.get(Confirmation.KEY))


def confirmed(study: optuna.Study) -> dict[str, ConfirmedFigure]:
    """The confirmed figures by trial number (a string); empty when none."""
    record = confirmation(study)
    return record.trials if record else {}


def finetuned(study: optuna.Study) -> dict[str, dict[str, Any]]:
    """A supernet study's fine-tuned figures by trial number (a string); empty when none."""
    return (study.user_attrs.get(StudyAttr.FINETUNED) or {}).get("trials") or {}


def final_figures(study: optuna.Study) -> dict[str, FinalFigures]:
    """`nas train`'s figures by trial number (a string): test accuracy, throughput measured
    again, the recipe and the kept model; empty when nothing was final-trained."""
    record = FinalTraining.from_attr(study.user_attrs.get(FinalTraining.KEY))
    return record.trials if record else {}

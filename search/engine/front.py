"""The study's front as the engine, the after-search steps and the results read it: objective
names, the noise-aware front (a measured throughput is an interval, hardware/intervals.py: a
trial dominates another only beyond it), and the figures stored after the search."""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.search.records import StudyAttr, TrialAttr

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


def noise_aware_front(study: optuna.Study) -> list[FrozenTrial]:
    """The finished trials no other trial dominates beyond the measurement's interval."""
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.values]
    if not done:
        return []
    names = objective_names(study)
    signs = np.array([1.0 if d == optuna.study.StudyDirection.MAXIMIZE else -1.0 for d in study.directions])
    values = np.array([t.values for t in done], dtype=float) * signs
    # Each trial's worst and best case in every objective (maximised): equal but for the noisy one.
    worst, best = values.copy(), values.copy()
    figure_of = np.arange(len(done))  # trials sharing one stored measurement share an id
    if NOISY in names:
        k = names.index(NOISY)
        seen: dict[tuple[float, float, float], int] = {}
        for i, t in enumerate(done):
            interval = throughput_interval(t)
            if interval is None:
                continue
            ends = sorted(signs[k] * np.array(interval))
            worst[i, k], best[i, k] = ends[0], ends[1]
            figure_of[i] = seen.setdefault((t.values[k], *interval), i)
    kept = []
    for i in range(len(done)):
        same = (figure_of == figure_of[i])[:, None]  # one measurement: compare it as exact
        a_worst = np.where(same, values, worst)
        b_best = np.where(same, values[i], best[i])
        at_least = (a_worst >= b_best).all(axis=1)
        beyond = (a_worst > b_best).any(axis=1)
        if not (at_least & beyond).any():
            kept.append(done[i])
    return kept


def confirmed(study: optuna.Study) -> dict[str, dict[str, Any]]:
    return (study.user_attrs.get(StudyAttr.CONFIRMED) or {}).get("trials") or {}


def finetuned(study: optuna.Study) -> dict[str, dict[str, Any]]:
    """A supernet study's fine-tuned figures by trial number (a string); empty when none."""
    return (study.user_attrs.get(StudyAttr.FINETUNED) or {}).get("trials") or {}


def final_figures(study: optuna.Study) -> dict[str, dict[str, Any]]:
    """`nas train`'s figures by trial number (a string): test accuracy, throughput measured
    again, the recipe and the kept model; empty when nothing was final-trained."""
    return (study.user_attrs.get(StudyAttr.FINAL) or {}).get("trials") or {}

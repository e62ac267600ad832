"""The study's front as the engine, the after-search steps and the results read it: objective
names, the devices its figures were measured on, the noise-aware front (a measured throughput
is an interval, hardware/intervals.py: a trial dominates another only beyond it), and the
figures stored after the search.

Throughput and TFLite latency are measured on each trial's own device, and figures of two
devices are on two scales: a study measured on several devices (hardware.device_identity:
the same model and software on any host is one device) has one front per device, and nothing
here decides dominance across devices. The confirmation measures the front again together on
one device, so its figures make one front (`confirmed_front`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.search.engine.optuna_private import pareto_front_of
from nas.search.hardware import device_identity, device_labels
from nas.search.records import Confirmation, ConfirmedFigure, FinalFigures, FinalTraining, StudyAttr, TrialAttr

NOISY = "throughput"  # the objective measured with an interval
MEASURED = ("throughput", "tflite_latency")  # objectives measured on the trial's own device
UNKNOWN_DEVICE = "unknown device"  # a finished trial that stored no device (made by hand, or by an old nas)


def objective_names(study: optuna.Study) -> list[str]:
    return study.metric_names or [f"objective{i}" for i in range(len(study.directions))]


@dataclass(frozen=True)
class Device:
    """One device a study's figures were measured on."""

    identity: str | None  # hardware.device_identity; None: finished trials that stored no device
    label: str  # hardware.device_label, told apart from another device's with one label
    trials: int  # trials measured on it


def measured_on(trial: FrozenTrial) -> str | None:
    """The identity of the device the trial's figures were measured on; None: none stored."""
    return device_identity(trial.user_attrs.get(TrialAttr.DEVICE))


def devices(trials: Sequence[FrozenTrial]) -> list[Device]:
    """The devices these trials were measured on, in the order of each one's first trial. A
    trial counts where it stored a device, or finished without one (then: UNKNOWN_DEVICE)."""
    infos: dict[str | None, Mapping[str, Any]] = {}
    counts: dict[str | None, int] = {}
    for t in trials:
        info = t.user_attrs.get(TrialAttr.DEVICE)
        if not info and t.state != TrialState.COMPLETE:
            continue  # stopped before it was measured
        key = device_identity(info)
        infos.setdefault(key, info or {})
        counts[key] = counts.get(key, 0) + 1
    labels = device_labels([infos[k] for k in infos if k is not None])
    named: dict[str | None, str] = dict(zip((k for k in infos if k is not None), labels, strict=True))
    return [Device(k, named.get(k, UNKNOWN_DEVICE), counts[k]) for k in infos]


def device_bound(study: optuna.Study) -> bool:
    """Whether an objective of the study was measured on the trial's device."""
    return any(name in MEASURED for name in objective_names(study))


def by_device(study: optuna.Study, trials: Sequence[FrozenTrial]) -> list[list[FrozenTrial]]:
    """The trials whose objectives compare, in groups: one per device they were measured on,
    in the order of each one's first trial; all of them at once where no objective of the
    study was measured on a device (accuracy against size compares on any machine)."""
    if not device_bound(study):
        return [list(trials)] if trials else []
    groups: dict[str | None, list[FrozenTrial]] = {}
    for t in trials:
        groups.setdefault(measured_on(t), []).append(t)
    return list(groups.values())


def same_device(
    study: optuna.Study, trials: Sequence[FrozenTrial], device: Mapping[str, Any] | None
) -> list[FrozenTrial]:
    """The trials whose objectives compare with those of a trial measured on `device` (its
    stored description): those measured on that device, or all where no objective was."""
    if not device_bound(study):
        return list(trials)
    identity = device_identity(device)
    return [t for t in trials if measured_on(t) == identity]


def mixed_devices(study: optuna.Study) -> list[Device]:
    """The devices of a study whose front is one per device (its finished trials' objectives
    measured on several); empty where it has one front."""
    if not device_bound(study):
        return []
    found = devices(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    return found if len(found) > 1 else []


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
    front: list[FrozenTrial] = []
    for group in by_device(study, done):
        ends = _ends(study, [(t.values, None if exact else throughput_interval(t)) for t in group])
        front += [t for i, t in enumerate(group) if not _dominating(ends, i).any()]
    return sorted(front, key=lambda t: t.number)


def pareto_front(study: optuna.Study) -> list[FrozenTrial]:
    """`study.best_trials` (feasible COMPLETE trials, compared by their values), one front per
    device (by_device) joined, by trial number: the plain front that retention keeps, the live
    view counts and the export takes by default. The trials are the study's own: read them only."""
    front: list[FrozenTrial] = []
    for group in by_device(study, study.get_trials(deepcopy=False)):
        front += pareto_front_of(group, study.directions)
    return sorted(front, key=lambda t: t.number)


def confirmable(study: optuna.Study) -> bool:
    """Whether the confirmation's figures make one front of a study measured on several
    devices: throughput is its only objective measured on a device (the confirmation
    measures throughput alone)."""
    return [n for n in objective_names(study) if n in MEASURED] == [NOISY]


def confirmed_front(
    study: optuna.Study, among: Sequence[FrozenTrial] | None = None, *, exact: bool = False
) -> list[FrozenTrial]:
    """The noise-aware front of the trials the confirmation measured (of `among` only), their
    throughput the confirmed figure and its interval: measured together on one device, they
    make one front whatever devices the search measured them on. Empty without a confirmation;
    only for a `confirmable` study."""
    figures = confirmed(study)
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if among is None else among
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.values and str(t.number) in figures]
    if not done or not confirmable(study):
        return []
    k = objective_names(study).index(NOISY)
    rows = []
    for t in done:
        figure = figures[str(t.number)]
        values = [*t.values[:k], figure.images_per_s, *t.values[k + 1 :]]
        measured = None if exact or figure.low is None or figure.high is None else (figure.low, figure.high)
        rows.append((values, measured))
    ends = _ends(study, rows)
    return [t for i, t in enumerate(done) if not _dominating(ends, i).any()]


def dominated_by(
    study: optuna.Study,
    known: dict[str, float],
    interval: tuple[float, float] | None,
    device: Mapping[str, Any] | None = None,
) -> FrozenTrial | None:
    """A feasible COMPLETE trial that dominates a point beyond the noise, compared as
    noise_aware_front compares two trials (`interval`: the point's throughput interval,
    `device`: the description of the device it was measured on; only trials of that device
    compete); None if none does. An objective missing from `known` counts as its best
    possible value."""
    done = [
        t
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if t.values and all(c <= 0 for c in t.constraints.values())
    ]
    done = same_device(study, done, device)
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


def kept_figures(earlier: Confirmation | None, identity: str | None, label: str) -> dict[str, ConfirmedFigure]:
    """The figures of an earlier confirmation that a new one on the device `identity` (its
    `label` for a record stored before identities were) keeps for the trials it does not
    measure: all of them on the same device, none on another (their scale is another's, and
    the record names one device)."""
    if earlier is None:
        return {}
    same = earlier.device_id == identity if earlier.device_id is not None else earlier.device == label
    return dict(earlier.trials) if same else {}


def finetuned(study: optuna.Study) -> dict[str, dict[str, Any]]:
    """A supernet study's fine-tuned figures by trial number (a string); empty when none."""
    return (study.user_attrs.get(StudyAttr.FINETUNED) or {}).get("trials") or {}


def final_figures(study: optuna.Study) -> dict[str, FinalFigures]:
    """`nas train`'s figures by trial number (a string): test accuracy, throughput measured
    again, the recipe and the kept model; empty when nothing was final-trained."""
    record = FinalTraining.from_attr(study.user_attrs.get(FinalTraining.KEY))
    return record.trials if record else {}

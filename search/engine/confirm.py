"""Confirming the front: its members and the trials within noise of it measured again after
the search, together in one process, round-robin and interleaved with the reference network,
with CONFIRM_FACTOR times the space's rounds (hardware/timing.measure_together).

Figures taken one trial at a time during a search are taken minutes apart, under whatever the
machine was doing then; measured together, the members of a front face the same conditions.
So do the fronts of a study measured on several devices: their members are measured together
here, and their confirmed figures make one front (engine/front.py's confirmed_front).
The confirmed figures are stored on the study (StudyAttr.CONFIRMED) and shown beside the
search-time ones by `nas pareto`, the report and the export manifest; the trials' objective
values stay as they were (Optuna does not change a finished trial).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import optuna

from nas.errors import NasError
from nas.search.engine.front import confirmation as stored_confirmation
from nas.search.engine.front import kept_figures, noise_aware_front, pareto_front
from nas.search.engine.stored import rebuild, study_space
from nas.search.hardware import (
    HardwareProfiler,
    architecture_signature,
    device_identity,
    device_label,
    measure_together,
    reference_forward,
)
from nas.search.records import Confirmation, ConfirmedFigure, StudyAttr, TrialAttr

CONFIRM_FACTOR = 3
MAX_CONFIRMED = 16  # the front first, then the trials within noise of it, best first objective first


def confirm_front(study: optuna.Study, profiler: HardwareProfiler, say: Callable[[str], None]) -> dict[int, Any]:
    """Measure the front again and store the figures; returns them by trial number."""
    space = study_space(study)
    if not space.spec.measure.reference:
        raise NasError("confirming needs measure.reference: true (the figures are ratios to the reference network)")
    strict = {t.number for t in pareto_front(study)}
    front = sorted(noise_aware_front(study), key=lambda t: (t.number not in strict, t.number))[:MAX_CONFIRMED]
    if not front:
        return {}
    dataset = study.user_attrs.get(StudyAttr.DATASET) or {}
    classes, channels = len(dataset.get("classes") or []), (dataset.get("shape") or [0, 0, 0])[-1]
    if not classes or not channels:
        raise NasError(f"study '{study.study_name}' holds no dataset summary; run `nas search` on it once")
    batch = space.spec.measure.batch_sizes[0]
    models, chosen = [], []
    for t in front:
        model = rebuild(space, t.params, classes, channels)
        stored = (t.user_attrs.get(TrialAttr.HARDWARE) or {}).get("signature")
        if stored and architecture_signature(model) != stored:
            say(
                f"Warning: trial {t.number} builds a different network than it measured "
                "(was the code changed?); not confirmed"
            )
            continue
        candidate = space.candidate(t.params, num_classes=classes, channels=channels)
        models.append((model, candidate.xla))
        chosen.append(t)
    rounds = CONFIRM_FACTOR * space.spec.measure.rounds
    say(f"Confirming the throughput of {len(chosen)} trials of the front: {rounds} rounds each, measured together")
    baseline = profiler.baseline(batch)  # before taking the lock: it may take the lock itself
    measure = space.spec.measure
    reference = reference_forward(batch, measure.warmup_seconds)
    with profiler.lock.exclusive():
        figures = measure_together(
            models,
            batch,
            rounds=rounds,
            round_seconds=measure.round_seconds,
            reference=reference,
            baseline=baseline,
            max_spread=measure.max_spread,
            warmup_seconds=measure.warmup_seconds,
        )
    confirmed = dict(zip((t.number for t in chosen), figures, strict=True))
    identity, label = device_identity(profiler.device), device_label(profiler.device)
    stored_trials = kept_figures(stored_confirmation(study), identity, label)
    for number, figure in confirmed.items():
        stored_trials[str(number)] = ConfirmedFigure(
            images_per_s=figure.images_per_s,
            low=figure.low,
            high=figure.high,
            relative=figure.relative,
            spread=figure.spread,
            trustworthy=figure.trustworthy,
        )
    record = Confirmation(
        measured_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        device=label,
        batch_size=batch,
        rounds=rounds,
        baseline_images_per_s=baseline,
        trials=stored_trials,
        device_id=identity,
    )
    study.set_user_attr(Confirmation.KEY, record.to_attr())
    return confirmed

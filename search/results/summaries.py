"""Read-only views of the storage for `nas status` and `nas pareto`: each study's progress, what
screening and early stopping ended, and the devices its figures were measured on."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import optuna
import sqlalchemy.exc
from optuna.trial import FrozenTrial, TrialState

from nas.search.engine import devices, mixed_devices, pareto_front
from nas.search.records import StudyAttr, TrialAttr
from nas.storage import CacheStats, MeasurementCache


def stopped_by_rung(trials: list[FrozenTrial]) -> Counter[int]:
    """How many trials early stopping ended, by rung."""
    return Counter(
        int(t.user_attrs[TrialAttr.EARLY_STOPPED]["rung"])
        for t in trials
        if t.state == TrialState.PRUNED and t.user_attrs.get(TrialAttr.EARLY_STOPPED)
    )


def stopped_early_line(trials: list[FrozenTrial]) -> str | None:
    """'N trials stopped early (rung 0 at epoch 1: a, ...)', or None when none was."""
    rungs = stopped_by_rung(trials)
    if not rungs:
        return None
    epochs = {
        int(t.user_attrs[TrialAttr.EARLY_STOPPED]["rung"]): t.user_attrs[TrialAttr.EARLY_STOPPED]["epoch"]
        for t in trials
        if t.user_attrs.get(TrialAttr.EARLY_STOPPED)
    }
    parts = ", ".join(f"rung {k} at epoch {epochs[k]}: {n}" for k, n in sorted(rungs.items()))
    total = sum(rungs.values())
    return f"{total} trial{'s' if total != 1 else ''} stopped early ({parts})"


def screened_by_kind(trials: list[FrozenTrial]) -> Counter[str]:
    """How many trials were screened, by kind (a Screened value: static, measured, halving)."""
    return Counter(
        str(t.user_attrs[TrialAttr.SCREENED])
        for t in trials
        if t.state == TrialState.PRUNED and t.user_attrs.get(TrialAttr.SCREENED)
    )


def screened_line(trials: list[FrozenTrial]) -> str | None:
    """'N trials screened (halving: a, measured: b)', or None when none was."""
    kinds = screened_by_kind(trials)
    if not kinds:
        return None
    total = sum(kinds.values())
    parts = ", ".join(f"{kind}: {n}" for kind, n in sorted(kinds.items()))
    return f"{total} trial{'s' if total != 1 else ''} screened ({parts})"


def devices_line(found: Sequence[tuple[str, int]], fronts: bool) -> str | None:
    """'measured on 2 devices: GPU H100 (12 trials), CPU Xeon (8 threads) (5 trials)' from
    (device, trials) pairs, or None for one device; `fronts`: the study has one front per
    device (the line says so)."""
    if len(found) < 2:
        return None
    named = ", ".join(f"{label} ({n} trial{'s' if n != 1 else ''})" for label, n in found)
    why = "; one front per device: throughput is compared only between trials of one device" if fronts else ""
    return f"measured on {len(found)} devices: {named}{why}"


def study_summaries(storage: optuna.storages.BaseStorage) -> list[dict[str, Any]]:
    rows = []
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        trials = study.get_trials(deepcopy=False)
        states = Counter(t.state for t in trials)
        names = study.metric_names or []
        accuracy = names.index("accuracy") if "accuracy" in names else None
        done = [t for t in trials if t.state == TrialState.COMPLETE and t.values]
        best = max((t.values[accuracy] for t in done), default=None) if accuracy is not None else None
        screened = screened_by_kind(trials)
        rungs = stopped_by_rung(trials)
        measured = devices(trials)
        rows.append(
            {
                "study": summary.study_name,
                "finished": states[TrialState.COMPLETE] + states[TrialState.PRUNED],
                "budget": study.user_attrs.get(StudyAttr.BUDGET),
                "running": states[TrialState.RUNNING],
                "failed": states[TrialState.FAIL],
                "screened": sum(screened.values()),
                "screened_by_kind": dict(sorted(screened.items())),
                "stopped_early": sum(rungs.values()),
                "stopped_early_by_rung": {str(k): n for k, n in sorted(rungs.items())},
                "queued": states[TrialState.WAITING],
                "pareto": len(pareto_front(study)) if done else 0,
                "best_accuracy": best,
                "devices": [{"device": d.label, "trials": d.trials} for d in measured],
                "fronts": len(mixed_devices(study)) or 1,  # one front per device
            }
        )
    return rows


def cache_summary(storage: optuna.storages.RDBStorage) -> CacheStats | None:
    """Size and hits of the measurement cache; None for a database from before it existed."""
    try:
        return MeasurementCache(storage.engine).stats()
    except sqlalchemy.exc.OperationalError:
        return None

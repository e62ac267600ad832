"""The Pareto front of a study as plain records, and its table / JSON / CSV renderings."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.search.records import TrialAttr


def objective_names(study: optuna.Study) -> list[str]:
    return study.metric_names or [f"objective{i}" for i in range(len(study.directions))]


def trial_record(study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
    attrs = trial.user_attrs
    record: dict[str, Any] = {"trial": trial.number}
    record.update(zip(objective_names(study), trial.values or [], strict=False))
    latency = (attrs.get(TrialAttr.HARDWARE) or {}).get("latency") or {}
    record.update(
        params=attrs.get(TrialAttr.PARAMS),
        flops=attrs.get(TrialAttr.FLOPS),
        throughput_spread=attrs.get(TrialAttr.THROUGHPUT_SPREAD),
        latency_p50_ms=latency.get("p50_ms"),
        latency_p95_ms=latency.get("p95_ms"),
        flops_per_s=attrs.get(TrialAttr.FLOPS_PER_S),
        peak_fraction=attrs.get(TrialAttr.PEAK_FRACTION),
        device=(attrs.get(TrialAttr.DEVICE) or {}).get("name"),
        train_seconds=(attrs.get(TrialAttr.DURATIONS) or {}).get("train"),
        parameters=dict(trial.params),
    )
    return record


def pareto_records(study: optuna.Study) -> list[dict[str, Any]]:
    """Front of the finished trials, best accuracy first."""
    front = [t for t in study.best_trials if t.state == TrialState.COMPLETE]
    records = [trial_record(study, t) for t in front]
    first = objective_names(study)[0]
    maximize = study.directions[0] == optuna.study.StudyDirection.MAXIMIZE
    return sorted(records, key=lambda r: float(r[first]), reverse=maximize)


def to_json(records: list[dict[str, Any]]) -> str:
    return json.dumps(records, indent=2)


def to_csv(records: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if not records:
        return ""
    flat = [{**{k: v for k, v in r.items() if k != "parameters"}, **r["parameters"]} for r in records]
    fields = list(dict.fromkeys(k for r in flat for k in r))
    writer = csv.DictWriter(buf, fieldnames=fields)
    writer.writeheader()
    writer.writerows(flat)
    return buf.getvalue()


def hypervolume_2d(points: list[list[float]], reference: list[float]) -> float:
    """Area dominated by maximised 2-D points above `reference`: one sweep over the points
    sorted by the first objective (Optuna's general routine is private API)."""
    kept = sorted((p for p in points if p[0] > reference[0] and p[1] > reference[1]), key=lambda p: (-p[0], -p[1]))
    area, best = 0.0, reference[1]
    for a, b in kept:
        if b > best:
            area += (a - reference[0]) * (b - best)
            best = b
    return area

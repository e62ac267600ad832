"""The Pareto front of a study as plain records, and its table / JSON / CSV renderings.

The front is noise-aware: a measured throughput is an interval (hardware/intervals.py), and a
trial dominates another only when it is at least as good in every objective beyond that
interval (its low end above the other's high end). Trials that only the plain comparison of
medians would drop stay on the front, marked as within noise of it (`on_front` false), and
front members whose throughput intervals overlap are named in `overlaps`: the measurement
cannot tell them apart. Two trials of one stored measurement (the same network, a cached
figure) compare their figures as exact.

A study measured on several devices has one front per device (engine/front.py): each record
names the device it was measured on (`device`) and the device whose figures placed it on its
front (`compared_on`), and its `overlaps` are of that front only. After a confirmation,
`remeasured` gives one front instead, the confirmed figures compared (`compared_on`: the
confirming device).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from nas.search.engine import (
    confirmable,
    confirmation,
    confirmed,
    confirmed_front,
    device_bound,
    devices,
    final_figures,
    finetuned,
    measured_on,
    mixed_devices,
    noise_aware_front,
    objective_names,
    pareto_front,
    throughput_interval,
)
from nas.search.hardware import overlap
from nas.search.records import TrialAttr


def labels_by_device(study: optuna.Study) -> dict[str | None, str]:
    """The label of each device the study was measured on, by identity (None: no device)."""
    return {d.identity: d.label for d in devices(study.get_trials(deepcopy=False))}


def trial_record(study: optuna.Study, trial: FrozenTrial, labels: dict[str | None, str]) -> dict[str, Any]:
    attrs = trial.user_attrs
    identity = measured_on(trial)
    record: dict[str, Any] = {"trial": trial.number}
    record.update(zip(objective_names(study), trial.values or [], strict=False))
    latency = (attrs.get(TrialAttr.HARDWARE) or {}).get("latency") or {}
    record.update(
        params=attrs.get(TrialAttr.PARAMS),
        flops=attrs.get(TrialAttr.FLOPS),
        model_bytes=attrs.get(TrialAttr.MODEL_BYTES),
        throughput_spread=attrs.get(TrialAttr.THROUGHPUT_SPREAD),
        latency_p50_ms=latency.get("p50_ms"),
        latency_p95_ms=latency.get("p95_ms"),
        flops_per_s=attrs.get(TrialAttr.FLOPS_PER_S),
        peak_fraction=attrs.get(TrialAttr.PEAK_FRACTION),
        device=labels.get(identity) if identity is not None else None,
        train_seconds=(attrs.get(TrialAttr.DURATIONS) or {}).get("train"),
        parameters=dict(trial.params),
    )
    return record


def figure_records(study: optuna.Study, trials: Sequence[FrozenTrial]) -> list[dict[str, Any]]:
    """Each trial's record with every figure stored about it: the search's, the throughput's
    interval, and those stored after the search (confirmed, fine-tuned, final-trained).
    `on_front` and `overlaps` are left for pareto_records, which knows the front."""
    measured, tuned, final = confirmed(study), finetuned(study), final_figures(study)
    labels = labels_by_device(study)
    records = []
    for t in trials:
        record = trial_record(study, t, labels)
        mine = throughput_interval(t)
        record["throughput_low"], record["throughput_high"] = mine if mine else (None, None)
        record["on_front"], record["overlaps"], record["compared_on"] = None, [], None
        again = measured.get(str(t.number))
        record["confirmed_throughput"] = again.images_per_s if again else None
        record["confirmed_low"], record["confirmed_high"] = (again.low, again.high) if again else (None, None)
        record["finetuned_accuracy"] = (tuned.get(str(t.number)) or {}).get("accuracy")
        trained = final.get(str(t.number))  # `nas train`: the only figures that read the test set
        record["test_accuracy"] = trained.test_accuracy if trained else None
        record["final_throughput"] = trained.throughput if trained else None
        record["final_epochs"] = trained.epochs if trained else None
        # `nas train --seeds N`: the figures above are the seeds' means; their standard deviation.
        record["final_seeds"] = len(trained.runs) if trained else None
        record["test_accuracy_sd"] = trained.test_accuracy_sd if trained else None
        records.append(record)
    return records


def one_front_confirmed(study: optuna.Study) -> bool:
    """Whether the front re-measured (`pareto_records`' `remeasured`) is one front by the
    confirmed figures: the study was measured on several devices, throughput is its only
    objective measured on one, and a confirmation measured its fronts together."""
    return confirmation(study) is not None and confirmable(study) and bool(mixed_devices(study))


def pareto_records(
    study: optuna.Study, among: Sequence[FrozenTrial] | None = None, *, remeasured: bool = False
) -> list[dict[str, Any]]:
    """The noise-aware front, one per device where the study was measured on several (in the
    order of their first members), best first objective first: each record says whether
    it is on the plain front too, which other members of its front it cannot be told apart
    from, and the figures confirmed after the search (`nas pareto --confirm`) where there are
    some. `among`: the front of those trials alone (results/choose.py: the trials that meet a
    `--where`). `remeasured`: a study measured on several devices gets one front, of the trials
    the confirmation measured, by their confirmed figures (one front per device still where
    there is no confirmation, or an objective other than throughput was measured on a device)."""
    names = objective_names(study)
    record = confirmation(study)
    if remeasured and one_front_confirmed(study) and record is not None:
        front = confirmed_front(study, among)
        strict = {t.number for t in confirmed_front(study, among, exact=True)}
        figures = confirmed(study)
        intervals = {t.number: _interval(figures[str(t.number)].low, figures[str(t.number)].high) for t in front}
        compared_on: dict[int, str | None] = {t.number: record.device for t in front}
        compared: dict[int, list[float]] = {
            t.number: [
                figures[str(t.number)].images_per_s if n == "throughput" else v
                for n, v in zip(names, t.values, strict=True)
            ]
            for t in front
        }
    else:
        front = noise_aware_front(study, among)
        exact = pareto_front(study) if among is None else noise_aware_front(study, among, exact=True)
        strict = {t.number for t in exact}
        intervals = {t.number: throughput_interval(t) for t in front}
        labels = labels_by_device(study)
        bound = device_bound(study)
        compared_on = {t.number: labels.get(measured_on(t)) if bound else None for t in front}
        compared = {t.number: list(t.values) for t in front}
    records = figure_records(study, front)
    for r in records:
        n = r["trial"]
        mine = intervals[n]
        r["on_front"], r["compared_on"] = n in strict, compared_on[n]
        r["overlaps"] = sorted(
            m
            for m, other in intervals.items()
            if m != n and compared_on[m] == compared_on[n] and mine and other and overlap(mine, other)
        )
    fronts = list(dict.fromkeys(compared_on[t.number] for t in front))
    sign = -1.0 if study.directions[0] == optuna.study.StudyDirection.MAXIMIZE else 1.0
    return sorted(records, key=lambda r: (fronts.index(r["compared_on"]), sign * compared[r["trial"]][0]))


def _interval(low: float | None, high: float | None) -> tuple[float, float] | None:
    return (low, high) if low is not None and high is not None else None


def to_json(records: list[dict[str, Any]]) -> str:
    return json.dumps(records, indent=2)


def to_csv(records: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    if not records:
        return ""
    flat = [
        {**{k: v for k, v in r.items() if k not in ("parameters", "overlaps")}, **r["parameters"]}
        | {"overlaps": " ".join(map(str, r["overlaps"]))}
        for r in records
    ]
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

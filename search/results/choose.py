"""Choosing trials by their figures, one grammar for `nas pareto`, `nas train`, `nas export`
and the Python API: `--where 'throughput>=5000'` (FIGURE OP NUMBER, OP one of >=, <=, >, <,
==; several combine with AND) and `--best accuracy` (the best front member by one figure).

A figure is a number a front record holds (results/pareto.py): the objectives, the figures
measured during the search, and those stored after it (`nas train`'s test accuracy, the
confirmed throughput). The trials that meet every constraint are compared among themselves:
the front is theirs, so a trial dominated only by trials that break a constraint comes back
(the most accurate network with at most 100k parameters is found even when a larger one
dominates it). `--best` then takes the best of that front by its figure, ties broken by the
objectives in the study's order. A trial without a figure (not final-trained, no latency
measured) does not meet a constraint on it.

A study measured on several devices has one front per device, and a figure measured on a
device (throughput, latency, ...) compares only within one: `--best throughput` there is the
best of each front, one per device. A `--where` holds a trial's figure against a number, so
it reads each trial's own figures.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import TrialState

from nas.errors import NasError
from nas.search.engine import objective_names
from nas.search.results.pareto import figure_records, pareto_records
from nas.search.space import OBJECTIVES

MAXIMIZE, MINIMIZE = "maximize", "minimize"

# Every figure of a record a constraint may name, with the direction that is better.
FIGURES: dict[str, str] = {
    **OBJECTIVES,
    "test_accuracy": MAXIMIZE,
    "final_throughput": MAXIMIZE,
    "confirmed_throughput": MAXIMIZE,
    "finetuned_accuracy": MAXIMIZE,
    "throughput_low": MAXIMIZE,
    "throughput_high": MAXIMIZE,
    "params": MINIMIZE,
    "flops": MINIMIZE,
    "model_bytes": MINIMIZE,
    "latency_p50_ms": MINIMIZE,
    "latency_p95_ms": MINIMIZE,
    "flops_per_s": MAXIMIZE,
    "peak_fraction": MAXIMIZE,
    "throughput_spread": MINIMIZE,
    "train_seconds": MINIMIZE,
}
# Figures measured on the trial's own device during the search: `--best` compares them within
# one front (one per device) only. The confirmed throughput is measured on one device for all.
ON_DEVICE = {
    "throughput",
    "tflite_latency",
    "throughput_low",
    "throughput_high",
    "latency_p50_ms",
    "latency_p95_ms",
    "flops_per_s",
    "peak_fraction",
    "throughput_spread",
    "train_seconds",
}
# Words a user types for a figure. Where two are listed, the first is meant when the study has it
# as an objective, else the second, which every trial with the figure measured has.
ALIASES: dict[str, tuple[str, ...]] = {
    "parameters": ("params",),
    "size": ("model_size", "model_bytes"),
    "latency": ("tflite_latency", "latency_p95_ms"),
    "latency_p50": ("latency_p50_ms",),
    "latency_p95": ("latency_p95_ms",),
}
# Why no trial has a figure, where that needs a step the user can take.
WHERE_FROM = {
    "test_accuracy": "only trials final-trained by `nas train` have it",
    "final_throughput": "only trials final-trained by `nas train` have it",
    "confirmed_throughput": "`nas pareto STUDY --confirm` measures it",
    "finetuned_accuracy": "only a supernet study's fine-tuned front has it",
    "latency_p50_ms": "measured with measure.latency: true",
    "latency_p95_ms": "measured with measure.latency: true",
    "model_size": "an objective this study does not have",
    "tflite_latency": "an objective this study does not have",
}
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
    "==": lambda a, b: math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12),
}
_CONSTRAINT = re.compile(r"^\s*(?P<name>[A-Za-z][A-Za-z0-9_ -]*?)\s*(?P<op>>=|<=|==|>|<)\s*(?P<value>\S+)\s*$")


def known_figures() -> str:
    """The names an error lists: the figures, then the words that stand for them."""
    return f"{', '.join(FIGURES)}; also {', '.join(ALIASES)}"


def _normal(name: str) -> str:
    """`Test accuracy`, `test-accuracy` and `test_accuracy` are one figure."""
    return re.sub(r"[\s-]+", "_", name.strip().lower())


def _check_figure(name: str, option: str, text: str) -> str:
    normal = _normal(name)
    if normal not in FIGURES and normal not in ALIASES:
        raise NasError(f"{{{option}}} {text!r}: unknown figure {name.strip()!r} (figures: {known_figures()})")
    return normal


def figure_key(name: str, objectives: Sequence[str]) -> str:
    """The record key a (normalised) figure name stands for in a study with these objectives."""
    meant = ALIASES.get(name, (name,))
    return next((m for m in meant[:-1] if m in objectives), meant[-1])


def _shown(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


@dataclass(frozen=True)
class Condition:
    """One `--where`: FIGURE OP NUMBER."""

    name: str  # normalised; an alias is resolved against the study's objectives (figure_key)
    op: str
    value: float
    text: str  # as the user wrote it

    @classmethod
    def parse(cls, text: str) -> Condition:
        found = _CONSTRAINT.match(text)
        if found is None:
            raise NasError(
                f"{{where}} {text!r}: not a constraint such as 'throughput>=5000' (a figure, one of "
                f"{', '.join(OPERATORS)}, a number; figures: {known_figures()})"
            )
        name = _check_figure(found["name"], "where", text)
        try:
            value = float(found["value"])
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise NasError(f"{{where}} {text!r}: {found['value']!r} is not a number")
        return cls(name, found["op"], value, text.strip())

    def met(self, figure: float | None) -> bool:
        return figure is not None and OPERATORS[self.op](float(figure), self.value)

    def shortfall(self, figure: float) -> float:
        """How far a figure is from meeting the constraint, relative to its bound (0: met)."""
        if self.met(figure):
            return 0.0
        scale = abs(self.value) or 1.0
        # A figure equal to a strict bound misses it by nothing measurable: still a miss.
        return max(abs(float(figure) - self.value) / scale, 1e-12)


@dataclass(frozen=True)
class Choice:
    """What `--where` and `--best` asked for, parsed before any study is opened, so bad input
    is refused first."""

    where: tuple[Condition, ...] = ()
    best: str | None = None  # a normalised figure name

    @classmethod
    def parse(cls, where: str | Sequence[str] | None = None, best: str | None = None) -> Choice:
        texts = [where] if isinstance(where, str) else list(where or [])
        conditions = tuple(Condition.parse(text) for text in texts)
        return cls(conditions, None if best is None else _check_figure(best, "best", best))

    def __bool__(self) -> bool:
        return bool(self.where or self.best)

    def describe(self) -> str:
        """`best accuracy where throughput>=5000 and params<=1e5`, for the lines that say what
        was chosen."""
        where = " and ".join(c.text for c in self.where)
        if self.best is None:
            return f"where {where}"
        return f"best {self.best}" + (f" where {where}" if where else "")

    def records(self, study: optuna.Study, *, remeasured: bool = False) -> list[dict[str, Any]]:
        """The front of the trials that meet every constraint (all of `nas pareto`'s front
        without one) as pareto_records gives it (`remeasured`: as there), or only its best
        member by `best` (of each front, one per device, for a figure measured on a device).
        Raises NasError, naming the closest trial, when no trial meets the constraints."""
        objectives = objective_names(study)
        if not self.where:
            records = pareto_records(study, remeasured=remeasured)
        else:
            done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if t.values]
            figures = figure_records(study, done)
            keys = [figure_key(c.name, objectives) for c in self.where]
            meeting = [
                t
                for t, record in zip(done, figures, strict=True)
                if all(c.met(record.get(key)) for c, key in zip(self.where, keys, strict=True))
            ]
            if not meeting:
                raise NasError(self._nobody(study, figures, keys))
            records = pareto_records(study, among=meeting, remeasured=remeasured)
        if self.best is None:
            return records
        key = figure_key(self.best, objectives)
        fronts = [records]
        if key in ON_DEVICE:
            shown_on = dict.fromkeys(r["compared_on"] for r in records)
            fronts = [[r for r in records if r["compared_on"] == device] for device in shown_on]
        having = [front for front in fronts if any(r.get(key) is not None for r in front)]
        return [self._best_of(study, front) for front in having or [records]]

    def _nobody(self, study: optuna.Study, figures: list[dict[str, Any]], keys: list[str]) -> str:
        """Why no trial meets the constraints: a figure no trial has, or the closest trial
        (the smallest sum of the constraints' relative shortfalls) with its figures."""
        said = f"{{where}} {' and '.join(c.text for c in self.where)}"
        name = study.study_name
        if not figures:
            return f"{said}: study '{name}' has no finished trials yet"
        for key in keys:
            if all(r.get(key) is None for r in figures):
                why = WHERE_FROM.get(key)
                return f"{said}: no trial of study '{name}' has {key}" + (f" ({why})" if why else "")
        having = [r for r in figures if all(r.get(key) is not None for key in keys)]
        if not having:
            return f"{said}: no trial of study '{name}' has all of {', '.join(dict.fromkeys(keys))}"
        closest = min(
            having,
            key=lambda r: (sum(c.shortfall(r[k]) for c, k in zip(self.where, keys, strict=True)), r["trial"]),
        )
        values = ", ".join(f"{k} {_shown(float(closest[k]))}" for k in dict.fromkeys(keys))
        them = "it" if len(self.where) == 1 else "them all"
        return f"{said}: no trial of study '{name}' meets {them}; the closest is trial {closest['trial']} ({values})"

    def _best_of(self, study: optuna.Study, records: list[dict[str, Any]]) -> dict[str, Any]:
        assert self.best is not None
        objectives = objective_names(study)
        key = figure_key(self.best, objectives)
        having = [r for r in records if r.get(key) is not None]
        if not records:
            raise NasError(f"{{best}} {self.best}: study '{study.study_name}' has no finished trials yet")
        if not having:
            among = "no front member" + (" that meets the constraints" if self.where else "")
            why = WHERE_FROM.get(key)
            raise NasError(
                f"{{best}} {self.best}: {among} of study '{study.study_name}' has {key}" + (f" ({why})" if why else "")
            )

        directions = [d.name.lower() for d in study.directions]
        order = [(key, FIGURES[key]), *zip(objectives, directions, strict=True)]

        def rank(record: dict[str, Any]) -> tuple[float, ...]:
            """Highest first figure; then the objectives in order; then the older trial."""
            signed = [
                -math.inf if record.get(name) is None else (1.0 if d == MAXIMIZE else -1.0) * float(record[name])
                for name, d in order
            ]
            return (*signed, -record["trial"])

        return max(having, key=rank)

    def trials_to_train(self, study: optuna.Study, limit: int) -> tuple[list[int], int]:
        """(`nas train`'s trials, how many met the choice): the best, or the chosen front's
        most accurate `limit` (`final.trials`), as `nas train` caps its default front."""
        records = self.records(study)
        objectives = objective_names(study)
        if self.best is None and "accuracy" in objectives:
            records = sorted(records, key=lambda r: (-float(r["accuracy"]), r["trial"]))
        return [r["trial"] for r in records[:limit]], len(records)

    def trials_to_export(self, study: optuna.Study) -> list[int]:
        """`nas export`'s trials: the best, or the chosen front's members beyond the noise (those
        within it may have had their search weights deleted), as the default exports the plain
        front."""
        return [r["trial"] for r in self.records(study) if self.best is not None or r["on_front"]]


def either(numbers: Sequence[int] | None, choice: Choice, option: str) -> None:
    """Trial numbers and a choice by figures are two ways to say which trials: not both."""
    if numbers and choice:
        given = [name for name, asked in (("{where}", choice.where), ("{best}", choice.best)) if asked]
        verb = "choose" if len(given) > 1 else "chooses"
        raise NasError(f"{{{option}}} names the trials and {' and '.join(given)} {verb} them: give one or the other")

"""Searchable parameters: a fixed value, a choice, an int range or a float range.

In a space file a parameter is written as a plain value (fixed) or as a one-key mapping:
`{choice: [3, 5]}`, `{int: [1, 4], step: 1}`, `{float: [1e-4, 1e-2], log: true}`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

Kind = Literal["int", "float", "bool", "str"]
# A domain check returns None when the value is allowed, else the reason it is not.
Check = Callable[[Any], str | None]


@dataclass(frozen=True)
class Param:
    """One parameter of the space; `fixed` ones are never shown to the sampler."""

    kind: Kind
    value: Any = None  # the fixed value
    choices: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False

    @property
    def fixed(self) -> bool:
        return not self.choices and self.low is None

    def distribution(self) -> BaseDistribution:
        if self.choices:
            return CategoricalDistribution(self.choices)
        assert self.low is not None and self.high is not None
        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log, step=int(self.step or 1))
        return FloatDistribution(self.low, self.high, log=self.log, step=self.step)

    def suggest(self, trial: optuna.Trial, name: str) -> Any:
        if self.fixed:
            return self.value
        if self.choices:
            return trial.suggest_categorical(name, self.choices)
        assert self.low is not None and self.high is not None
        if self.kind == "int":
            step = int(self.step or 1)
            return trial.suggest_int(name, int(self.low), int(self.high), step=step, log=self.log)
        return trial.suggest_float(name, self.low, self.high, step=self.step, log=self.log)


def _typed(value: Any, kind: Kind) -> Any:
    """Check the YAML scalar's type; YAML's `true` is not an int and `3` is a fine float."""
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise ValueError(f"expected true or false, got {value!r}")
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ValueError(f"expected an integer, got {value!r}")
    if kind == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, str):
        return value
    raise ValueError(f"expected a string, got {value!r}")


def _checked(value: Any, kind: Kind, check: Check | None) -> Any:
    value = _typed(value, kind)
    reason = check(value) if check else None
    if reason:
        raise ValueError(reason)
    return value


_RANGE_KEYS = {"int", "float"}
_KEYS = {"choice", "int", "float", "step", "log"}


def parse_param(raw: Any, kind: Kind, check: Check | None = None) -> Param:
    """Turn a space-file value into a Param; ValueError carries a one-line reason."""
    if isinstance(raw, Param):
        return raw
    if isinstance(raw, list):
        raise ValueError(f"a list is not a parameter; to search over it write {{choice: {raw}}}")
    if not isinstance(raw, dict):
        return Param(kind, value=_checked(raw, kind, check))

    unknown = sorted(set(map(str, raw)) - _KEYS)
    if unknown:
        raise ValueError(f"unknown key '{unknown[0]}' (a parameter uses choice, int, float, step, log)")
    forms = [k for k in ("choice", "int", "float") if k in raw]
    if len(forms) != 1:
        raise ValueError("a parameter needs exactly one of choice, int or float")
    form = forms[0]

    if form == "choice":
        if "step" in raw or "log" in raw:
            raise ValueError("step and log apply to int and float ranges, not to choice")
        values = raw["choice"]
        if not isinstance(values, list) or not values:
            raise ValueError("choice needs a non-empty list of values")
        parsed = tuple(_checked(v, kind, check) for v in values)
        if len(set(parsed)) != len(parsed):
            raise ValueError(f"choice has repeated values: {values}")
        if len(parsed) == 1:
            return Param(kind, value=parsed[0])
        return Param(kind, choices=parsed)

    if kind not in ("int", "float"):
        raise ValueError(f"a range needs a numeric parameter; this one takes {kind} values")
    if form != kind:
        raise ValueError(f"this parameter takes {kind} values: write {kind}: [low, high]")
    form_kind: Kind = kind
    bounds = raw[form]
    if not isinstance(bounds, list) or len(bounds) != 2:
        raise ValueError(f"{form} needs [low, high]")
    low, high = (_typed(b, form_kind) for b in bounds)
    if low >= high:
        raise ValueError(f"{form} range [{low}, {high}]: low must be below high")
    for bound in (low, high):
        _checked(bound, kind, check)
    log = raw.get("log", False)
    if not isinstance(log, bool):
        raise ValueError(f"log must be true or false, got {log!r}")
    if log and low <= 0:
        raise ValueError(f"a log range needs low > 0, got {low}")
    step = raw.get("step")
    if step is not None:
        step = _typed(step, form_kind)
        if step <= 0:
            raise ValueError(f"step must be positive, got {step}")
        if log:
            raise ValueError("step and log cannot be combined")
        if form_kind == "int" and (high - low) % step:
            raise ValueError(f"int range [{low}, {high}] is not a whole number of steps of {step}")
    return Param(kind, low=low, high=high, step=step, log=log)


def one_of(allowed: Sequence[Any]) -> Check:
    def check(value: Any) -> str | None:
        return None if value in allowed else f"{value!r} is not one of {list(allowed)}"

    return check


def between(low: float, high: float) -> Check:
    def check(value: Any) -> str | None:
        return None if low <= value <= high else f"{value!r} is not between {low:g} and {high:g}"

    return check

"""Searchable parameters: a fixed value, a choice, an int range or a float range.

In a space file a parameter is written as a plain value (fixed) or as a one-key mapping:
`{choice: [3, 5]}`, `{int: [1, 4], step: 1}`, `{float: [1e-4, 1e-2], log: true}`. Any of them
may add `when: {key: value-or-list}`: the parameter is active (sampled) only when the named
parameters of the same scope took one of those values.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
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

# A value the user wrote, shortened to fit an error line (a 100 KB string, a list of thousands).
_short = reprlib.Repr()
_short.maxstring = _short.maxother = 80


def shown(value: Any) -> str:
    return _short.repr(value)


def short(text: str) -> str:
    """`text` as it is, or its two ends when longer than 80 characters."""
    return text if len(text) <= 80 else f"{text[:38]}...{text[-38:]}"


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
    # (parameter, allowed values) pairs; all must hold for this parameter to be active.
    when: tuple[tuple[str, tuple[Any, ...]], ...] = ()

    @property
    def fixed(self) -> bool:
        return not self.choices and self.low is None

    @property
    def discrete(self) -> bool:
        return self.fixed or bool(self.choices) or self.kind == "int"

    def values(self) -> tuple[Any, ...]:
        """Every value a discrete parameter can take."""
        if self.fixed:
            return (self.value,)
        if self.choices:
            return self.choices
        assert self.kind == "int" and self.low is not None and self.high is not None
        if self.log:
            return tuple(range(int(self.low), int(self.high) + 1))
        return tuple(range(int(self.low), int(self.high) + 1, int(self.step or 1)))

    def describe(self) -> str:
        """The domain in a few words, for `nas space show`."""
        if self.fixed:
            return f"fixed {self.value!r}" if isinstance(self.value, str) else f"fixed {self.value}"
        if self.choices:
            return "choice [" + ", ".join(str(c).lower() if isinstance(c, bool) else str(c) for c in self.choices) + "]"
        text = f"{self.kind} [{self.low:g}, {self.high:g}]"
        if self.step:
            text += f" step {self.step:g}"
        return text + (" log" if self.log else "")

    def active(self, values: dict[str, Any]) -> bool:
        """Whether every condition holds for the values sampled so far (an inactive
        parameter a condition refers to is missing from `values`: the condition fails)."""
        return all(name in values and values[name] in allowed for name, allowed in self.when)

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
        raise ValueError(f"expected true or false, got {shown(value)}")
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ValueError(f"expected an integer, got {shown(value)}")
    if kind == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ValueError(f"expected a number, got {shown(value)}")
    if isinstance(value, str):
        return value
    raise ValueError(f"expected a string, got {shown(value)}")


def _checked(value: Any, kind: Kind, check: Check | None) -> Any:
    value = _typed(value, kind)
    reason = check(value) if check else None
    if reason:
        raise ValueError(reason)
    return value


_KEYS = {"choice", "int", "float", "step", "log", "when", "value"}


def _parse_when(raw: Any) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """`when: {se: true}` or `when: {optimizer: [sgd, rmsprop]}`; the values are checked
    against the referenced parameter by the scope that holds both."""
    if not isinstance(raw, dict) or not raw:
        raise ValueError("when: needs a mapping such as {se: true}")
    out = []
    for key, allowed in raw.items():
        values = tuple(allowed) if isinstance(allowed, list) else (allowed,)
        if not values:
            raise ValueError(f"when: {short(str(key))} needs at least one value")
        out.append((str(key), values))
    return tuple(out)


def parse_param(raw: Any, kind: Kind, check: Check | None = None) -> Param:
    """Turn a space-file value into a Param; ValueError carries a one-line reason."""
    if isinstance(raw, Param):
        return raw
    if isinstance(raw, list):
        raise ValueError(f"a list is not a parameter; to search over it write {{choice: {shown(raw)}}}")
    if not isinstance(raw, dict):
        return Param(kind, value=_checked(raw, kind, check))

    unknown = sorted(set(map(str, raw)) - _KEYS)
    if unknown:
        keys = "choice, int, float, step, log, when, value"
        raise ValueError(f"unknown key {shown(unknown[0])} (a parameter uses {keys})")
    when = _parse_when(raw["when"]) if "when" in raw else ()
    if "value" in raw:
        if set(raw) - {"value", "when"}:
            raise ValueError("value: a fixed value takes no choice, range, step or log")
        return Param(kind, value=_checked(raw["value"], kind, check), when=when)
    forms = [k for k in ("choice", "int", "float") if k in raw]
    if len(forms) != 1:
        raise ValueError("a parameter needs exactly one of choice, int, float or value")
    return replace(_parse_domain(raw, forms[0], kind, check), when=when)


def _parse_domain(raw: dict[str, Any], form: str, kind: Kind, check: Check | None) -> Param:
    if form == "choice":
        if "step" in raw or "log" in raw:
            raise ValueError("step and log apply to int and float ranges, not to choice")
        values = raw["choice"]
        if not isinstance(values, list) or not values:
            raise ValueError("choice needs a non-empty list of values")
        parsed = tuple(_checked(v, kind, check) for v in values)
        if len(set(parsed)) != len(parsed):
            raise ValueError(f"choice has repeated values: {shown(values)}")
        if len(parsed) == 1:
            return Param(kind, value=parsed[0])
        return Param(kind, choices=parsed)

    if kind not in ("int", "float"):
        raise ValueError(f"a range needs a numeric parameter; this one takes {kind} values")
    # A whole-number range of a float parameter is fine (expansion: {int: [2, 6]}).
    if form != kind and not (form == "int" and kind == "float"):
        raise ValueError(f"this parameter takes {kind} values: write {kind}: [low, high]")
    form_kind: Kind = "int" if form == "int" else kind
    kind = form_kind
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
        raise ValueError(f"log must be true or false, got {shown(log)}")
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


@dataclass(frozen=True)
class OneOf:
    """A domain of listed values; called with a value, the reason it is outside, or None. Its text
    is what the generated space reference shows."""

    allowed: tuple[Any, ...]

    def __call__(self, value: Any) -> str | None:
        return None if value in self.allowed else f"{shown(value)} is not one of {list(self.allowed)}"

    def __str__(self) -> str:
        return "one of " + ", ".join(str(v) for v in self.allowed)


@dataclass(frozen=True)
class Between:
    """A closed range of numbers, checked and shown as OneOf is."""

    low: float
    high: float

    def __call__(self, value: Any) -> str | None:
        return (
            None if self.low <= value <= self.high else f"{shown(value)} is not between {self.low:g} and {self.high:g}"
        )

    def __str__(self) -> str:
        return f"{self.low:g} to {self.high:g}"


def one_of(allowed: Sequence[Any]) -> Check:
    return OneOf(tuple(allowed))


def between(low: float, high: float) -> Check:
    return Between(low, high)

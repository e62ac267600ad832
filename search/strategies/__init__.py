"""The search strategies, one package each, and their registry.

A strategy decides what scores a trial. Its package `nas.search.strategies.<name>` holds two
parts: its space part, `settings.py` (a `StrategySettings` named `SETTINGS`: the schema of
`search.<name>:`, its fingerprint part, its checks of a space), TensorFlow-free and in the
space's room, which the space loader reaches through `space_part()` below; and its engine part,
`strategy.py` (a `Strategy` named `STRATEGY`: its evaluation, its after-search steps), above the
engine, which only the callers of the engine reach, through `strategy()`: the CLI, the Python
API, a worker. The engine imports no strategy: it is handed one.

The registry pairs each name with its package; the space's allowed names, the CLI's help and
the guide read it. Adding a strategy: its folder, and one line here (or `register` for one
that lives outside nas, as the tests' own does).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from nas.errors import NasError

if TYPE_CHECKING:
    from nas.search.engine import Strategy
    from nas.search.space import SearchSpace
    from nas.search.strategies.settings import StrategySettings

DEFAULT = "trials"  # what a study stored before strategies existed was searched with

REGISTRY: dict[str, str] = {
    "trials": "nas.search.strategies.trials",
    "supernet": "nas.search.strategies.supernet",
}

_version = [0]  # bumped by register: the space's schema is rebuilt from the registry


def names() -> list[str]:
    return list(REGISTRY)


def version() -> int:
    return _version[0]


def register(name: str, package: str) -> None:
    """Add (or, with the same name, replace) a strategy whose package lives elsewhere."""
    REGISTRY[name] = package
    _version[0] += 1


def unregister(name: str) -> None:
    if REGISTRY.pop(name, None) is not None:
        _version[0] += 1


def _known(name: str) -> str:
    try:
        return REGISTRY[name]
    except KeyError:  # the schema admits only registered names; a stored study may hold anything
        raise NasError(f"search.strategy: {name} is not one of {names()}") from None


def space_part(name: str) -> StrategySettings:
    """The strategy's space part (TensorFlow-free)."""
    found: StrategySettings = importlib.import_module(f"{_known(name)}.settings").SETTINGS
    return found


def strategy(name: str) -> Strategy:
    """The whole strategy, for the engine's callers: its engine part loads no TensorFlow
    until a method needs it."""
    found: Strategy = importlib.import_module(f"{_known(name)}.strategy").STRATEGY
    return found


def strategy_for(space: SearchSpace) -> Strategy:
    return strategy(space.spec.search.strategy)


def __getattr__(name: str) -> object:
    # The base of a strategy's space part loads pydantic: imported when asked for, so that the
    # CLI reads the registry's names (its help) without it.
    if name == "StrategySettings":
        from nas.search.strategies.settings import StrategySettings

        return StrategySettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT",
    "REGISTRY",
    "StrategySettings",
    "names",
    "register",
    "space_part",
    "strategy",
    "strategy_for",
    "unregister",
    "version",
]

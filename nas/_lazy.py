"""Package surfaces that load a submodule only when one of its names is first used.

A room of `nas.search` holds modules of very different weight: nets has the TF-free network
plan behind `nas space` beside the Keras builder, engine the study a pool's parent opens beside
the trial runner, data the source checks beside the loader that needs scikit-learn. An eager
`__init__` would load all of a room for any one name, so each room exports through a module
`__getattr__` (PEP 562) and a name costs only its own module; each lists its names once more
under TYPE_CHECKING for type checkers, which cannot follow `__getattr__`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, modules: dict[str, list[str]]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose names live in the given submodules."""
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__

"""Package surfaces that load a submodule only when one of its names is first used.

The rooms of `nas.search` that hold TensorFlow code (nets, training, hardware, deploy, engine,
results) also hold modules that must load without it: the network plan behind `nas space`,
the study a pool's parent opens. An eager `__init__` would pull TensorFlow into both, so those
rooms export through a module `__getattr__` (PEP 562); each lists its names once more under
TYPE_CHECKING for type checkers, which cannot follow `__getattr__`.
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

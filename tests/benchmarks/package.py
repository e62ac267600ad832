"""The benchmarks package of this checkout as the tests reach it: imported by location (it is
not installed, and pytest puts no repository root on sys.path), and run as a child process the
way benchmarks/RESULTS.md runs it, `python -m benchmarks.<name>`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from ..helpers import REPO, nas_env

PACKAGE = REPO / "benchmarks"


def benchmark(name: str) -> ModuleType:
    """benchmarks.NAME, imported (its own `from benchmarks import ...` find the package)."""
    if "benchmarks" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "benchmarks", PACKAGE / "__init__.py", submodule_search_locations=[str(PACKAGE)]
        )
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules["benchmarks"] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"benchmarks.{name}")


def command(name: str, *args: str) -> list[str]:
    """`python -m benchmarks.NAME args`, for a child started with `environment()`."""
    return [sys.executable, "-m", f"benchmarks.{name}", *args]


def environment() -> dict[str, str]:
    """A `nas` child's environment (tests/helpers.py) with the repository root on PYTHONPATH,
    so `-m benchmarks.NAME` is found from any working folder."""
    return nas_env(PYTHONPATH=benchmark("launch").environment()["PYTHONPATH"])

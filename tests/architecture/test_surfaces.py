"""Each room's lazy surface (nas/_lazy.py) names its exports three times: for type checkers
(under TYPE_CHECKING), for the loader (the map of module -> names) and in `__all__`. The three
lists must agree, and each name must live in the module the map sends it to."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROOMS = sorted(p.parent.name for p in (REPO / "search").glob("*/__init__.py") if "lazy_exports" in p.read_text())


def _lists(room: str) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """(name -> module under TYPE_CHECKING, name -> module in the lazy map, __all__)."""
    tree = ast.parse((REPO / "search" / room / "__init__.py").read_text())
    typed: dict[str, str] = {}
    mapped: dict[str, str] = {}
    listed: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module is not None
                for alias in imp.names:
                    assert alias.asname == alias.name, f"{room}: {alias.name} re-exported as {alias.asname}"
                    typed[alias.name] = imp.module.rsplit(".", 1)[1]
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            modules = node.value.args[1]
            assert isinstance(modules, ast.Dict)
            for key, names in zip(modules.keys, modules.values, strict=True):
                assert isinstance(key, ast.Constant) and isinstance(names, ast.List)
                for name in names.elts:
                    assert isinstance(name, ast.Constant)
                    mapped[name.value] = key.value
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            assert isinstance(node.value, ast.List)
            listed = {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return typed, mapped, listed


def test_every_lazy_room_is_checked() -> None:
    assert {"engine", "nets", "space", "results", "data", "training"} <= set(ROOMS)


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_s_three_lists_of_exports_agree(room: str) -> None:
    typed, mapped, listed = _lists(room)
    assert set(typed) == set(mapped) == listed, room
    moved = {name: (typed[name], mapped[name]) for name in typed if typed[name] != mapped[name]}
    # The type checker's module and the loader's may differ only where the loader's module
    # imports the name from the other (a re-export), which the next test proves.
    for name, (_, module) in moved.items():
        assert name in vars(importlib.import_module(f"nas.search.{room}.{module}")), (room, name)


@pytest.mark.parametrize("room", ROOMS)
def test_each_exported_name_loads_from_its_room(room: str) -> None:
    package = importlib.import_module(f"nas.search.{room}")
    _, mapped, _ = _lists(room)
    for name in mapped:
        assert getattr(package, name) is not None, (room, name)


def test_code_outside_a_room_imports_it_through_its_surface() -> None:
    """In the package (search/, storage/, nas/), an import from another room names the room's
    `__init__`, never one of its modules: `from nas.search.engine import run_search`. A
    strategy's package is one unit (its engine part imports its own space part), and the
    one-module rooms (`records`, `runtime`, `nas.errors`) are their own surface. Tests and
    benchmarks may reach in: they test and measure modules."""
    from .test_layering import LEVELS, MODULES, room

    def unit(module: str) -> str | None:
        package = ".".join(module.split(".")[:4])
        if module.startswith("nas.search.strategies.") and MODULES[package].name == "__init__.py":
            return package
        return room(module)

    offenders = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            target = node.module
            if target not in MODULES or target in LEVELS or MODULES[target].name == "__init__.py":
                continue  # a room's surface, a one-module room, or not ours
            if room(target) == "nas":
                continue  # the root package's own helpers (nas._lazy)
            if unit(target) != unit(module):
                offenders.append(f"{module} line {node.lineno}: {target}")
    assert not offenders, "imports that reach into another room's module:\n" + "\n".join(offenders)

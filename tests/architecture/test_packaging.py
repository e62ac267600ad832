"""Every package folder is installed: pyproject's explicit `packages` list names each one, so a
plain (not editable) install carries every room and strategy."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {"nas": REPO / "nas", "nas.search": REPO / "search", "nas.storage": REPO / "storage"}


def test_every_package_folder_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join([root, *init.parent.relative_to(folder).parts])
        for root, folder in ROOTS.items()
        for init in folder.rglob("__init__.py")
    }
    assert found <= listed, f"not installed by a plain pip install: {sorted(found - listed)}"


def test_every_extra_an_error_names_is_in_pyproject() -> None:
    from nas.extras import EXTRAS

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert set(EXTRAS) <= set(project["optional-dependencies"])
    # The README's tour (`nas export --format tflite` included) needs no extra.
    assert any(d.startswith("ai-edge-litert") for d in project["dependencies"])

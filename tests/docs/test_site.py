"""The guide's generated pages (scripts/docs_hooks.py) and its build: the space reference
names every key the shipped spaces use, with the schema's description; RESULTS.md's sections
are pages the nav lists; the home page is the README; `mkdocs build --strict` passes (broken
links, anchors, a page left out of the nav all fail it)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..helpers import REPO

spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "scripts" / "docs_hooks.py")
assert spec is not None and spec.loader is not None
hooks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hooks)

SPACES = sorted([*(REPO / "spaces").rglob("*.yaml"), *(REPO / "examples").rglob("*.yaml")])


def _sections(page: str) -> dict[str, dict[str, str]]:
    """{section: {key: its row}} of the generated reference."""
    found: dict[str, dict[str, str]] = {}
    current = ""
    for line in page.splitlines():
        if line.startswith("## "):
            current = line[3:].strip("` ")
            found[current] = {}
        elif (row := re.match(r"\| `(\w+)` \|", line)) and current:
            found[current][row.group(1)] = line
    return found


def _keys(data: Any, path: str = "") -> set[tuple[str, str]]:
    """(section, key) of every key a space file sets; a search domain ({choice: ...}) is a value."""
    keys: set[tuple[str, str]] = set()
    if not isinstance(data, dict) or {"choice", "int", "float", "value"} & set(data):
        return keys
    for key, value in data.items():
        if path in ("objectives", "search.supernet.fixed"):  # their keys are names, not schema fields
            continue
        keys.add((path or "Top level", key))
        child = f"{path}.{key}" if path else key
        if isinstance(value, list):
            for item in value:
                keys |= _keys(item, f"{child}[]")
        else:
            keys |= _keys(value, child)
    return keys


@pytest.mark.parametrize("space", SPACES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_space_reference_names_every_key_a_shipped_space_sets(space: Path) -> None:
    sections = _sections(hooks.space_reference())
    missing = [f"{s}: {k}" for s, k in sorted(_keys(yaml.safe_load(space.read_text()))) if k not in sections.get(s, {})]
    assert not missing, f"the generated space reference lacks {missing}"


def test_the_space_reference_shows_each_keys_domain_default_and_description() -> None:
    sections = _sections(hooks.space_reference())
    kernel = sections["model.stages[]"]["kernel"]
    assert "one of 3, 5, 7 (searchable)" in kernel and "`3`" not in kernel.split("|")[3]
    assert "`30`" in sections["final"]["epochs"] and "epochs of the final training" in sections["final"]["epochs"]
    assert "[mapping](#datasettfrecord)" in sections["dataset"]["tfrecord"]
    assert "`digits`" in sections["dataset"]["source"] and "`fashion_mnist`" in sections["dataset"]["source"]


def test_every_results_section_is_a_page_the_nav_lists() -> None:
    pages = hooks.results_pages()
    sections = re.findall(r"(?m)^## (.*)$", hooks.RESULTS.read_text(encoding="utf-8"))
    assert len(pages) == len(sections) + 1  # and the index
    assert sorted(page.splitlines()[0] for uri, page in pages.items() if uri != "benchmarks/index.md") == sorted(
        f"# {title}" for title in sections
    )
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text())["nav"]
    listed = set(re.findall(r"benchmarks/[\w.-]+\.md", str(nav)))
    assert set(pages) == listed


def test_the_guide_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        # mkdocs-typer2 runs the venv's `typer` command.
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    for command in ("search", "pareto", "train", "export", "worker", "report"):
        assert f"nas {command}" in cli, command
    assert "--from-scratch" in cli and "--workers-per-gpu" in cli
    # The home page is the README, its links to docs/ pointed at the site's pages.
    home = (tmp_path / "site" / "index.html").read_text()
    assert "The Pareto front" in home and 'href="getting-started/"' in home and 'href="docs/' not in home
    space = (tmp_path / "site" / "reference" / "space" / "index.html").read_text()
    assert 'id="modelstages"' in space and hooks.SPACE_REFERENCE_MARK not in space

"""What a plain install gives, through the real CLI in this process: `nas --version`."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

from ..helpers import run_cli


def test_version_prints_the_installed_version() -> None:
    result = run_cli("--version", cwd=Path.cwd())
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"nas {version('nas')}\n"

"""Fixtures shared by the whole suite."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from .helpers import run_nas


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NAS_STORAGE", raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def _tiny_study_dir(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One real 3-trial search of the tiny preset, run once for the whole session."""
    folder = tmp_path_factory.mktemp("tiny-study")
    result = run_nas("search", "tiny", "--trials", "3", cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder, result


@pytest.fixture
def finished_run(
    _tiny_study_dir: tuple[Path, subprocess.CompletedProcess[str]],
) -> subprocess.CompletedProcess[str]:
    return _tiny_study_dir[1]


@pytest.fixture
def finished_study(_tiny_study_dir: tuple[Path, subprocess.CompletedProcess[str]], tmp_path: Path) -> Path:
    """A private copy of the finished 3-trial study (nas.db in the returned folder)."""
    source = _tiny_study_dir[0]
    for path in source.glob("nas.db*"):
        shutil.copy2(path, tmp_path / path.name)
    return tmp_path


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the session's finished study waits for a real 3-trial search."""
    for item in items:
        if {"finished_study", "finished_run"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)

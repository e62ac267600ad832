"""Fixtures shared by the whole suite."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .helpers import LOCK_DIR_ENV, run_nas


@pytest.fixture(scope="session", autouse=True)
def session_lock_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The device locks of session fixtures (the finished study): the default folder is shared
    by every `nas` on the machine, so other people's searches would hold up our timings and
    ours theirs. Session fixtures start before any test's own folder is set."""
    folder = tmp_path_factory.mktemp("locks")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(LOCK_DIR_ENV, str(folder))
        yield folder


@pytest.fixture(scope="session", autouse=True)
def session_device_profile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One device profile for the session: the first test that measures the device's baseline
    and matmul peak stores them, every later fresh database starts from them (their own
    tests, tests/hardware/test_device_profile.py, set one of their own)."""
    path = tmp_path_factory.mktemp("device") / "profile.db"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NAS_DEVICE_PROFILE", str(path))
        yield path


@pytest.fixture(autouse=True)
def lock_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own device-lock folder, which its `nas` subprocesses inherit. A test
    whose processes must share locks gets that from this one folder (or passes one itself)."""
    folder = tmp_path_factory.mktemp("locks")
    monkeypatch.setenv(LOCK_DIR_ENV, str(folder))
    return folder


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


# Fixtures that run a real search (the session's, or a module's own): whoever uses one is slow.
SEARCHING_FIXTURES = {"finished_study", "finished_run", "study_dir", "asha_study"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses a finished study waits for a real search: it is `slow`, so that
    `-m "not slow"` never trains."""
    for item in items:
        if SEARCHING_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)

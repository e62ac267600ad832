"""Shared helpers: run the real `nas` CLI in a subprocess, in a folder of its own."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def nas_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NAS_STORAGE"}
    env.update(extra)
    return env


def run_nas(
    *args: str, cwd: Path, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nas", *args],
        cwd=cwd,
        env=env or nas_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_nas(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nas", *args],
        cwd=cwd,
        env=nas_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


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


SERVERS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/test?connect_timeout=3",
    "mysql": "mysql+pymysql://root@127.0.0.1:3306/test?connect_timeout=3",
}


def server_url(kind: str) -> str:
    """The local database server's URL; outside CI a missing server skips (saying why), in CI
    (CI=true) it fails, because these tests must run there."""
    import sqlalchemy

    url = SERVERS[kind]
    try:
        sqlalchemy.create_engine(url).connect().close()
    except sqlalchemy.exc.OperationalError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no {kind} server answers at {url.split('@')[1]}: {str(exc).splitlines()[0]}")
    return url


def drop_study(url: str, name: str) -> None:
    import optuna

    with contextlib.suppress(KeyError):
        optuna.delete_study(study_name=name, storage=url)

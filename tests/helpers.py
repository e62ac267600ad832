"""Helpers every test module shares: the real `nas` CLI in a subprocess or in this process,
and the local database servers."""

from __future__ import annotations

import contextlib
import io
import os
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


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The `nas` command in this process: for error paths, which need no fresh process and
    would otherwise pay for a Python and TensorFlow start each. Same result as run_nas."""
    from nas.search.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_cwd, saved_storage = sys.argv, os.getcwd(), os.environ.pop("NAS_STORAGE", None)
    sys.argv = ["nas", *args]
    code = 0
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        if saved_storage is not None:
            os.environ["NAS_STORAGE"] = saved_storage
    return subprocess.CompletedProcess(["nas", *args], code, out.getvalue(), err.getvalue())


def start_nas(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nas", *args],
        cwd=cwd,
        env=nas_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


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

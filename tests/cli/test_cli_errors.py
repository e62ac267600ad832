"""Bad input through the real CLI (in this process: error paths need no fresh one): exit status 2,
one line `Error: ...`, database unchanged."""

from __future__ import annotations

import builtins
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ..helpers import REPO, run_cli


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: "), stderr
    return lines[0]


def test_bad_space_file(workdir: Path) -> None:
    bad = workdir / "bad.yaml"
    bad.write_text(
        "name: bad\nmodel:\n  stages:\n    - {filters: 16}\n    - {filters: 24}\n    - {filters: 32, kernel: 4}\n"
    )
    result = run_cli("search", str(bad), cwd=workdir)
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert line == "Error: " + str(bad) + ": model.stages[2].kernel: 4 is not one of [3, 5, 7]"
    assert not (workdir / "nas.db").exists()


def test_missing_space_file(workdir: Path) -> None:
    result = run_cli("search", "no/such/space.yaml", cwd=workdir)
    assert result.returncode == 2
    assert "space file no/such/space.yaml not found" in _one_error_line(result.stderr)


def test_bad_storage_url(workdir: Path) -> None:
    result = run_cli("search", "tiny", "--storage", "oracle://scott:tiger@db/x", cwd=workdir)
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert "unsupported database 'oracle'" in line
    assert "tiger" not in line


def test_storage_folder_missing(workdir: Path) -> None:
    result = run_cli("search", "tiny", "--storage", "sqlite:///missing/dir/x.db", cwd=workdir)
    assert result.returncode == 2
    assert "folder missing/dir does not exist" in _one_error_line(result.stderr)


def test_unknown_option_is_one_line(workdir: Path) -> None:
    result = run_cli("search", "tiny", "--trails", "3", cwd=workdir)
    assert result.returncode == 2
    assert "--trails" in _one_error_line(result.stderr)


def test_pareto_without_database_or_study(workdir: Path) -> None:
    result = run_cli("pareto", "nothing", cwd=workdir)
    assert result.returncode == 2
    assert "no database at nas.db" in _one_error_line(result.stderr)
    assert not (workdir / "nas.db").exists()


@pytest.mark.usefixtures("workdir")
def test_debug_shows_traceback(workdir: Path) -> None:
    result = run_cli("search", "nope.yaml", "--debug", cwd=workdir)
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("Error: space file nope.yaml not found")


@pytest.mark.slow
def test_errors_leave_an_existing_database_unchanged(finished_study: Path) -> None:
    db = finished_study / "nas.db"
    before = _dump(db)
    changed = finished_study / "changed.yaml"
    changed.write_text((REPO / "spaces" / "tiny.yaml").read_text().replace("epochs: 3", "epochs: 4"))
    result = run_cli("search", str(changed), cwd=finished_study)
    assert result.returncode == 2
    assert "study 'tiny' was created from a different space" in _one_error_line(result.stderr)
    result = run_cli("pareto", "nosuch", cwd=finished_study)
    assert result.returncode == 2
    assert "study 'nosuch' not found in sqlite:///nas.db (studies there: tiny)" in _one_error_line(result.stderr)
    assert _dump(db) == before


def _dump(db: Path) -> list[str]:
    # The logical content: WAL checkpoints may rewrite the file's bytes without changing it.
    with sqlite3.connect(db) as con:
        return list(con.iterdump())


def test_unavailable_sampler_and_precision_leave_no_database(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `import torch` fails, installed or not. (A None in sys.modules would trip scipy, which
    # looks torch up there.)
    real_import = builtins.__import__

    def no_torch(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    result = run_cli("search", "tiny", "--sampler", "gp", cwd=workdir)
    assert result.returncode == 2
    assert "sampler 'gp' needs PyTorch" in _one_error_line(result.stderr)
    space = workdir / "half.yaml"
    space.write_text((REPO / "spaces" / "tiny.yaml").read_text() + "\ncompute:\n  precision: mixed_float16\n")
    result = run_cli("search", str(space), cwd=workdir)
    assert result.returncode == 2
    assert "compute.precision: nothing this CPU" in _one_error_line(result.stderr)
    assert not (workdir / "nas.db").exists()

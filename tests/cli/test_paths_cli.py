"""Nothing escapes: a study name that is not one plain file name, given as --study or found in
a shared database, stops every command that writes files with one `Error:` line (exit 2)
before anything is written; an artifact folder linked out of its root stops a search before
any training."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import optuna
import pytest

from ..helpers import run_cli


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: "), stderr
    return lines[0]


def _tree(root: Path) -> dict[str, str]:
    """Every file and folder under root, with a hash of each file's content."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


@pytest.fixture
def deep(workdir: Path) -> Path:
    """A folder two levels down, so `..` and `../..` still land inside the test's folder."""
    folder = workdir / "a" / "b"
    folder.mkdir(parents=True)
    return folder


@pytest.mark.parametrize("name", ["..", "../..", "../../etc", "ABS", "a/b", "a\\b", "x" * 101, "a\x00b", "."])
def test_search_refuses_a_study_name_that_is_not_a_file_name(workdir: Path, deep: Path, name: str) -> None:
    name = str(workdir / "abs") if name == "ABS" else name
    before = _tree(workdir)
    result = run_cli("search", "tiny", "--study", name, "--trials", "1", cwd=deep)
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert line.startswith(f"Error: --study {repr(name)[:50]}"), line
    assert "cannot be a file name" in line
    assert _tree(workdir) == before  # no database, no artifact folder, no trial-0.keras anywhere


def _plain_optuna_study(folder: Path, name: str) -> str:
    url = f"sqlite:///{folder / 'nas.db'}"
    optuna.create_study(storage=url, study_name=name)
    return url


@pytest.mark.parametrize(
    "command",
    [
        ["worker", "--study", "../evil"],
        ["export", "../evil", "--format", "keras", "--out", "out"],
        ["search", "tiny", "--study", "../evil", "--trials", "1"],
    ],
    ids=["worker", "export", "search-resume"],
)
def test_a_study_named_unsafely_in_the_database_writes_nothing(deep: Path, command: list[str]) -> None:
    """Made by plain Optuna (or anyone) on a shared database: nas writes no file for it.
    (`nas report` may: its only file is --out, which no study name can move.)"""
    url = _plain_optuna_study(deep, "../evil")
    root = deep.parent.parent
    before = _tree(root)
    result = run_cli(*command, "--storage", url, cwd=deep)
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert "'../evil' cannot be a file name" in line, line
    assert _tree(root) == before  # the database included: not even opened for writing


def test_the_python_api_refuses_an_unsafe_study(workdir: Path, deep: Path) -> None:
    import nas.api

    before = _tree(workdir)
    with pytest.raises(nas.api.NasError, match=re.escape("study '../evil' cannot be a file name")):
        nas.api.search("tiny", study="../evil", storage=f"sqlite:///{deep / 'nas.db'}")
    assert _tree(workdir) == before


@pytest.mark.slow
def test_a_study_folder_linked_out_of_the_artifacts_stops_the_search_before_training(workdir: Path) -> None:
    """Imports TensorFlow and loads the data (the refusal comes where the worker opens its
    weight store), but trains nothing and writes nothing outside."""
    artifacts, outside = workdir / "artifacts", workdir / "outside"
    artifacts.mkdir()
    outside.mkdir()
    (artifacts / "tiny").symlink_to(outside)
    result = run_cli("search", "tiny", "--trials", "1", "--artifacts", str(artifacts), cwd=workdir)
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    assert f"{artifacts / 'tiny'} leads to {outside}, not inside {artifacts}" in line, line
    assert list(outside.iterdir()) == []
    trials = optuna.load_study(study_name="tiny", storage=f"sqlite:///{workdir / 'nas.db'}").trials
    assert trials == []  # refused before the first trial started


@pytest.mark.parametrize("below", ["", "sub"], ids=["the-file", "below-the-file"])
def test_search_with_a_file_as_artifacts_leaves_no_study(workdir: Path, below: str) -> None:
    """--artifacts naming a file (or a folder inside one) is refused before the database is
    opened: no study to clean up afterwards."""
    (workdir / "weights").write_text("a file, not a folder")
    artifacts = workdir / "weights" / below if below else workdir / "weights"
    before = _tree(workdir)
    result = run_cli("search", "tiny", "--trials", "1", "--artifacts", str(artifacts), cwd=workdir)
    assert result.returncode == 2
    line = _one_error_line(result.stderr)
    problem = "is not a folder" if not below else f"{workdir / 'weights'} is not a folder"
    assert line.startswith(f"Error: artifact folder {artifacts}: {problem}"), line
    assert "--artifacts" in line, line
    assert _tree(workdir) == before  # no nas.db, so no study in it


def test_prepare_study_checks_the_artifacts_before_the_database(workdir: Path) -> None:
    """The engine's own check, for the callers that skip the CLI's (the Python API, a pool)."""
    from nas.errors import NasError
    from nas.search.engine import SearchOptions
    from nas.search.engine.events import SearchEvents
    from nas.search.engine.study import prepare_study
    from nas.search.space import load_space
    from nas.storage import resolve_storage_url

    (workdir / "weights").write_text("a file, not a folder")
    url = resolve_storage_url(f"sqlite:///{workdir / 'nas.db'}")
    options = SearchOptions(url, "tiny", 1, "tpe", 0, artifacts=str(workdir / "weights"))
    with pytest.raises(NasError, match="is not a folder"):
        prepare_study(load_space("tiny"), options, SearchEvents())
    assert not (workdir / "nas.db").exists()

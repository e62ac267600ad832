"""Fuzzing the options of `nas search` and `nas export`: any text an option gets is accepted or
refused with exit status 2 and one `Error:` line; never a traceback, and the database in the
folder stays as it was.

The commands run in this process (tests/helpers.run_cli) with the search and the export cut off
where they would start work: an accepted command raises `Started` there instead of importing
TensorFlow. The search's stand-in first does what the real one checks before it writes (the
sampler and its seed), so a value that would only fail there still counts as a crash. Each
`@example` is a crash the fuzzing found.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from nas.errors import NasError

from ..helpers import run_cli, run_nas

# Deterministic for CI and bounded (a few seconds a test). Every example runs in the same
# folder, which the tests check is left as it was: a function-scoped fixture is fine.
FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# What a shell can pass: any text but NUL, with surrogate escapes for bytes that are not UTF-8.
arg_text = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]) | st.just("\udcff"), max_size=40)
numbers = st.one_of(st.integers(), st.floats(), st.integers(min_value=-(2**70), max_value=2**70)).map(str)
tricky = st.sampled_from(
    ["", " ", "-1", "0", "1", "1e999", "nan", "inf", "-inf", "0x10", "1_000", "²", "0,00", "0,,1", "9" * 5000,
     "{storage}", "--help", "-", "a\nb", "~nosuchuser/x", "/", ".", "..", "a" * 5000]
)  # fmt: skip
values = arg_text | numbers | tricky
schemes = st.sampled_from(
    ["sqlite", "sqlite+pysqlite", "sqlite+json", "sqlite+", "sqlite+aiosqlite", "postgresql", "postgresql+psycopg",
     "postgresql+pg8000", "mysql", "mysql+pymysql", "oracle", "SQLITE", "", "+"]
)  # fmt: skip
urls = st.builds(
    lambda scheme, sep, rest: scheme + sep + rest,
    schemes,
    st.sampled_from(["://", ":///", ":////", ":", "//", "://u:p@h:5/"]),
    arg_text | st.sampled_from(["x.db?timeout=abc", "x.db?check_same_thread=maybe", "x.db?cached_statements=z", "%00"]),
)


class Started(Exception):
    """The command got past its checks to where it would start working."""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder but for an existing database (nas.db, the default storage), with the
    search and the export cut off before they would start."""
    import typer

    from nas.search import engine, hardware, results, runtime, workers
    from nas.search.cli import app

    def run_search(space: Any, options: Any, events: Any, **_: Any) -> None:
        from nas.search.engine.samplers import make_sampler

        make_sampler(options.sampler, options.seed)  # as the real one, before it writes
        raise Started

    def stop(*args: Any, **kwargs: Any) -> None:
        raise Started

    monkeypatch.setattr(runtime, "import_tensorflow", lambda *args, **kwargs: None)
    # Without TensorFlow there is no GPU to ask about: a single search checks right after the import.
    monkeypatch.setitem(vars(hardware), "check_placed_gpu", lambda: None)
    # Asking TensorFlow which GPUs it sees is the first thing a pool on GPUs starts.
    monkeypatch.setitem(vars(hardware), "require_visible_gpus", stop)
    # Set in the lazy surfaces' namespaces: the modules behind them load TensorFlow.
    monkeypatch.setitem(vars(engine), "run_search", run_search)
    monkeypatch.setitem(vars(workers), "WorkerPool", stop)
    monkeypatch.setitem(vars(results), "ExportRequest", stop)
    monkeypatch.setitem(vars(results), "run_export", stop)
    # Typer builds the command from the functions' signatures on every call (a quarter of a
    # second); one built command serves every example.
    command = typer.main.get_command(app)
    monkeypatch.setattr(typer.main, "get_command", lambda _app: command)
    with sqlite3.connect(tmp_path / "nas.db") as con:
        con.execute("CREATE TABLE kept (x)")
        con.execute("INSERT INTO kept VALUES (1)")
    return tmp_path


def _snapshot(folder: Path) -> tuple[list[str], list[str]]:
    with sqlite3.connect(folder / "nas.db") as con:
        dump = list(con.iterdump())
    return sorted(p.name for p in folder.iterdir()), dump


def _run(folder: Path, *args: str) -> str:
    """'started', or the one `Error:` line of a refused command; the folder is unchanged."""
    before = _snapshot(folder)
    try:
        result = run_cli(*args, cwd=folder)
    except Started:
        outcome = "started"
    else:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        if result.returncode == 0 and "Usage:" in result.stdout:  # a value such as --help
            return "help"
        assert result.returncode == 2, (args, result)
        assert len(lines) == 1 and lines[0].startswith("Error: "), (args, result.stderr)
        assert lines[0].isprintable(), lines[0]
        outcome = lines[0]
    assert _snapshot(folder) == before, args
    return outcome


@FUZZ
@given(
    option=st.sampled_from(
        ["--storage", "--gpus", "--trials", "--timeout", "--seed", "--workers", "--workers-per-gpu", "--study"]
    ),
    value=values,
)
@example(option="--gpus", value="²")  # accepted: "²".isdigit()
@example(option="--seed", value="-1")  # ValueError from NumPy's seeding
@example(option="--storage", value="sqlite+json:///x.db")  # AttributeError on opening
@example(option="--workers", value="1000000000")  # planning a billion workers: a hang
@example(option="--workers-per-gpu", value="1000000000")  # the same
def test_search_options(folder: Path, option: str, value: str) -> None:
    extra = ["--gpus", "0"] if option == "--workers-per-gpu" else []
    _run(folder, "search", "tiny", option, value, *extra)


@FUZZ
@given(value=urls)
def test_search_storage_urls(folder: Path, value: str) -> None:
    _run(folder, "search", "tiny", "--storage", value)


@FUZZ
@given(
    option=st.sampled_from(
        ["study", "--format", "--quantize", "--trial", "--out", "--storage", "--artifacts", "--where", "--best"]
    ),
    value=values
    | st.sampled_from(["keras", "savedmodel", "tflite", "onnx", "tftrt", "tensorrt", "int8", "dynamic"])
    | st.sampled_from(["throughput>=5000", "test accuracy > 0.9", "params<=1e5", "accuracy", "size"]),
)
@example(option="--out", value="~nosuchuser/x")  # RuntimeError from Path.expanduser
def test_export_options(folder: Path, option: str, value: str) -> None:
    options = {"study": "tiny", "--format": "tflite", "--out": "exported"} | {option: value}
    args = [options.pop("study")] + [part for item in options.items() for part in item]
    _run(folder, "export", *args)


@FUZZ
@given(value=urls)
def test_storage_urls_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """The storage behind `--storage`, opened as a search opens it: a SQLite file under this
    folder (created when it is missing), servers only parsed (nothing connects here)."""
    from nas.storage import open_storage, resolve_storage_url

    monkeypatch.chdir(tmp_path)
    try:
        url = resolve_storage_url(value)
        path = url.sqlite_path
        inside = path is None or not (path.is_absolute() or ".." in path.parts or "uri" in url.url.query)
        if url.is_sqlite and inside:
            open_storage(url).engine.dispose()
    except NasError as exc:
        assert str(exc).isprintable() and len(str(exc).splitlines()) == 1, str(exc)


# ---- regressions: each crash the fuzzing found, with what it says now ---------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["search", "tiny", "--gpus", "²"], "Error: --gpus '²': expected GPU indices such as 0 or 0,1,3"),
        (["search", "tiny", "--gpus", "0,00"], "Error: --gpus '0,00': a GPU is listed twice"),
        (["search", "tiny", "--seed", "-1"], "Error: Invalid value for '--seed': Input should be greater than"),
        (["search", "tiny", "--workers", "1000000000"], "Error: 1000000000 workers is more than 1024 on one machine"),
        (["search", "tiny", "--gpus", ",".join(map(str, range(2000)))], "Error: 2000 workers is more than 1024"),
        (["search", "tiny", "--storage", "sqlite+json:///x.db"], "unknown driver 'json' for sqlite"),
        (["search", "tiny", "--storage", "sqlite:///x.db?timeout=abc"], "could not convert string to float: 'abc'"),
        (["search", "tiny", "--storage", "a\nb"], r"storage URL '...a\nb' is not a database URL"),
        (["export", "t", "--format", "tflite", "--out", "~nosuchuser/x"], "--out ~nosuchuser/x: not a usable folder"),
        (["export", "t", "--out", "x"], "Error: Missing option '--format'. Choose from: keras, savedmodel, tflite,"),
    ],
)
def test_found_by_fuzzing(folder: Path, args: list[str], expected: str) -> None:
    assert expected in _run(folder, *args)
    assert not (folder / "x.db").exists()


def test_storage_crashes_found_by_fuzzing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """NUL bytes (the Python API; a shell cannot pass them) and names too long for the file
    system: one line each, and no file."""
    from nas.storage import open_storage, resolve_storage_url

    monkeypatch.chdir(tmp_path)
    with pytest.raises(NasError, match="the database name holds a NUL character"):
        resolve_storage_url("sqlite:///a%00b")
    with pytest.raises(NasError, match=r"cannot use a+ as a database file \(File name too long\)"):
        open_storage(resolve_storage_url("sqlite:///" + "a" * 300))
    assert not list(tmp_path.iterdir())


def test_real_command_line(tmp_path: Path) -> None:
    """The same in a fresh process: exit status 2, one `Error:` line, the database untouched."""
    with sqlite3.connect(tmp_path / "nas.db") as con:
        con.execute("CREATE TABLE kept (x)")
    before = (tmp_path / "nas.db").read_bytes()
    for args in (
        ["search", "tiny", "--gpus", "²", "--storage", "sqlite:///nas.db"],
        ["export", "tiny", "--format", "tflite", "--out", "~nosuchuser/x"],
    ):
        result = run_nas(*args, cwd=tmp_path, timeout=120)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert (tmp_path / "nas.db").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nas.db"]

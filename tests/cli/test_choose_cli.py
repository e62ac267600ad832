"""`--where` and `--best` on the command line (in this process): `nas pareto` shows what they
choose; bad input, or a constraint no trial meets, is one `Error:` line with exit status 2 in
`nas pareto`, `nas train` and `nas export` alike, said before TensorFlow loads."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from ..helpers import finished_trial, run_cli


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """nas.db with study `s`: accuracy and throughput of five hand-made trials."""
    study = optuna.create_study(
        directions=["maximize", "maximize"], study_name="s", storage=f"sqlite:///{tmp_path / 'nas.db'}"
    )
    study.set_metric_names(["accuracy", "throughput"])
    for accuracy, throughput, params in [(0.95, 1000, 5e5), (0.9, 3000, 2e5), (0.85, 6000, 1e5), (0.7, 9000, 3e5)]:
        study.add_trial(finished_trial(accuracy, throughput, params=int(params)))
    return tmp_path


def _error(folder: Path, *args: str) -> str:
    result = run_cli(*args, cwd=folder)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("Error: "), result
    return lines[0]


def test_pareto_shows_what_where_and_best_choose(folder: Path) -> None:
    def shown(*args: str) -> list[int]:
        result = run_cli("pareto", "s", "--format", "json", *args, cwd=folder)
        assert result.returncode == 0, result.stderr
        return [r["trial"] for r in json.loads(result.stdout)]

    assert shown("--where", "throughput>=5000") == [2, 3]  # best accuracy first
    assert shown("--where", "throughput>=2000", "--where", "accuracy>0.85") == [1]
    assert shown("--where", "throughput>=2000", "--best", "accuracy") == [1]
    assert shown("--best", "throughput") == [3]
    table = run_cli("pareto", "s", "--where", "params<=200000", cwd=folder)
    assert table.returncode == 0 and "where params<=200000" in table.stdout, table


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["pareto", "s", "--where", "throughput>=10000"],
            "Error: --where throughput>=10000: no trial of study 's' meets it; "
            "the closest is trial 3 (throughput 9,000)",
        ),
        (["pareto", "s", "--where", "speed>5"], "Error: --where 'speed>5': unknown figure 'speed' (figures: accuracy,"),
        (["pareto", "s", "--best", "speed"], "Error: --best 'speed': unknown figure 'speed' (figures: accuracy,"),
        (["pareto", "s", "--where", "throughput=5"], "Error: --where 'throughput=5': not a constraint such as"),
        (["train", "s", "--where", "x>1"], "Error: --where 'x>1': unknown figure 'x'"),
        (["train", "s", "--trials", "1", "--best", "accuracy"], "Error: --trials names the trials and --best chooses"),
        (
            [
                "export",
                "s",
                "--format",
                "keras",
                "--out",
                "x",
                "--trial",
                "1",
                "--where",
                "params<1",
                "--best",
                "flops",
            ],
            "Error: --trial names the trials and --where and --best choose them: give one or the other",
        ),
        (["export", "s", "--format", "keras", "--out", "x", "--best", "x"], "Error: --best 'x': unknown figure"),
    ],
)
def test_bad_choices_are_one_line_with_status_2(folder: Path, args: list[str], expected: str) -> None:
    assert _error(folder, *args).startswith(expected)


def test_bad_choices_are_refused_before_tensorflow_loads(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from nas.search import runtime

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("TensorFlow was asked for before the choice was checked")

    monkeypatch.setattr(runtime, "import_tensorflow", refuse)
    _error(folder, "export", "s", "--format", "keras", "--out", "x", "--where", "speed>1")
    _error(folder, "train", "s", "--where", "speed>1")
    _error(folder, "pareto", "s", "--confirm", "--where", "speed>1")

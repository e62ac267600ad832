"""benchmarks/race.py: its fronts, hypervolume and overhead on known trials, and a real short
run (nas against the target, KerasTuner Hyperband) whose JSON is checked against its own
figures. The other contenders run in the benchmark itself (`python -m benchmarks.race`)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ..helpers import REPO
from .package import benchmark, command, environment


def _race() -> ModuleType:
    return benchmark("race")


def _run_race(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command("race", *args), cwd=cwd, env=environment(), capture_output=True, text=True, timeout=timeout
    )


def _trial(end: float, accuracy: float | None, throughput: float | None, inside: float = 1.0) -> dict[str, Any]:
    return {"end_s": end, "accuracy": accuracy, "throughput": throughput, "inside_s": inside, "stopped": False}


def test_front_hypervolume_and_overhead_of_known_trials() -> None:
    race = _race()
    trials = [_trial(10, 0.9, 10_000), _trial(20, 0.5, 100_000), _trial(30, 0.4, 50_000), _trial(40, None, None)]
    assert [t["end_s"] for t in race.own_front(trials)] == [10, 20]  # 0.4 at 50k is dominated; no accuracy: out
    # Reference (0, log10 1000): 0.9 x (4 - 3) + 0.5 x (5 - 4).
    assert race.hypervolume([(0.9, 10_000), (0.5, 100_000)]) == pytest.approx(1.4)
    assert race.hypervolume([]) == 0.0
    # Gaps of 10 s with 1 s inside: 0.9 idle each; a trial busy longer than its gap counts 0.
    assert race.overhead(trials) == pytest.approx(0.9)
    assert race.overhead_s(trials) == pytest.approx(9.0)
    assert race.overhead([_trial(0, 1, 1), _trial(5, 1, 1, inside=9.0)]) == 0.0
    assert math.isnan(race.overhead(trials[:1]))


def test_hypervolume_curves_end_at_the_re_measured_final() -> None:
    race = _race()
    # Front by own figures: A (0.9, 10k) re-measured at 5k, B (0.5, 100k) at 200k; C (0.8, 9k)
    # is dominated by A. A median ratio (1.25) would put C at 11k, above A's 5k, and the curve
    # would end above the final; C takes A's ratio (0.5) and stays dominated.
    trials = [_trial(10, 0.9, 10_000), _trial(20, 0.5, 100_000), _trial(30, 0.8, 9_000), _trial(40, None, None)]
    front = race.own_front(trials)
    assert race.curve_figures(trials, front, [5_000, 200_000]) == {0: 5_000, 1: 200_000, 2: 4_500}
    summary = race.summarise({"KerasTuner Hyperband": [trials]}, {("KerasTuner Hyperband", 0): [5_000, 200_000]}, 60)
    final = race.hypervolume([(0.9, 5_000), (0.5, 200_000)])
    assert summary["rows"]["KerasTuner Hyperband"]["final_hv"] == pytest.approx(final)
    assert summary["curves"]["KerasTuner Hyperband"][0][-1] == (30, pytest.approx(final))
    assert summary["rows"]["KerasTuner Hyperband"]["time_to_hyperband_final_s"] == 20


def test_a_fine_tuned_subnet_replaces_its_inherited_figure_from_when_it_was_fine_tuned() -> None:
    race = _race()
    # Supernet trials A (0.8, 10k) and B (0.6, 20k); at 50 s A is fine-tuned to 0.95, B to
    # 0.55 (lower: the fine-tuned weights are what is stored, so it counts, not the inherited).
    trials = [_trial(10, 0.8, 10_000), _trial(20, 0.6, 20_000)]
    trials += [trials[0] | {"end_s": 50, "accuracy": 0.95, "replaces": 0}]
    trials += [trials[1] | {"end_s": 50, "accuracy": 0.55, "replaces": 1}]
    front = race.own_front(trials)
    assert [(t["end_s"], t["accuracy"]) for t in front] == [(50, 0.95), (50, 0.55)]
    figures = [5_000, 40_000]  # re-measured: ratios 0.5 and 2
    assert race.curve_figures(trials, front, figures) == {0: 5_000, 1: 40_000, 2: 5_000, 3: 40_000}
    summary = race.summarise({"KerasTuner Hyperband": [trials]}, {("KerasTuner Hyperband", 0): figures}, 60)
    curve = summary["curves"]["KerasTuner Hyperband"][0]
    inherited = race.hypervolume([(0.8, 5_000), (0.6, 40_000)])
    final = race.hypervolume([(0.95, 5_000), (0.55, 40_000)])
    assert curve[1] == (20, pytest.approx(inherited)) and curve[-1] == (50, pytest.approx(final))
    row = summary["rows"]["KerasTuner Hyperband"]
    assert row["final_hv"] == pytest.approx(final) and row["trials"] == 2 and row["finetuned"] == 2
    assert row["last_s"] == 50 and row["overhead_s"] == pytest.approx(9.0)  # fine-tuning is no trial's overhead


def test_a_written_report_is_summarised_again_without_measuring(tmp_path: Path) -> None:
    race = _race()
    hyperband = [_trial(10, 0.9, 10_000), _trial(20, 0.5, 100_000), _trial(30, 0.8, 9_000)]
    nas = [_trial(5, 0.95, 20_000), _trial(15, 0.99, 30_000)]
    fronts = [
        {"contender": "KerasTuner Hyperband", "seed": 0, "accuracy": 0.9, "remeasured": 5_000},
        {"contender": "KerasTuner Hyperband", "seed": 0, "accuracy": 0.5, "remeasured": 200_000},
        {"contender": "nas", "seed": 0, "accuracy": 0.99, "remeasured": 40_000},
    ]
    written = {
        "command": "python benchmarks/race.py --budget 60 --seeds 1",
        "commit": "abc1234",
        "date": "2026-12-01",
        "machine": "x86_64, 2 usable cores",
        "budget_s": 60.0,
        "seeds": 1,
        "total_s": 130.0,
        "run_provenance": [{"contender": "nas", "seed": 0, "commit": "abc1234", "date": "2026-12-01"}],
        "fronts": fronts,
        "runs": {"nas": [nas], "KerasTuner Hyperband": [hyperband]},
    }
    source, out = tmp_path / "race.json", tmp_path / "again.json"
    source.write_text(json.dumps(written))
    result = _run_race("--from-report", str(source), "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["commit"] == "abc1234" and report["summarised_again"]["commit"]
    hyperband_final = race.hypervolume([(0.9, 5_000), (0.5, 200_000)])
    assert report["hyperband_final_hv"] == pytest.approx(hyperband_final)
    assert report["rows"]["nas"]["final_hv"] == pytest.approx(race.hypervolume([(0.99, 40_000)]))
    # nas' second trial (0.99 at 40k re-measured) is the first to pass Hyperband's final.
    assert report["rows"]["nas"]["time_to_hyperband_final_s"] == 15
    assert report["rows"]["KerasTuner Hyperband"]["overhead_s"] == pytest.approx(9.0)
    assert "| nas | 2 | 0 |" in result.stdout


@pytest.mark.slow
def test_short_race_writes_a_complete_report(tmp_path: Path) -> None:
    """One nas contender against the target (Hyperband), 5 s and 1 epoch each: the script runs, keeps its
    runs and writes a report that agrees with its own figures. The full race is the benchmark."""
    race = _race()
    out, png, runs = tmp_path / "race.json", tmp_path / "race.png", tmp_path / "runs"
    args = ["--quick", "--budget", "5", "--epochs", "1", "--contenders", "nas", "--out", str(out), "--plot", str(png)]
    result = _run_race(*args, "--runs", str(runs), cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["seeds"] == 1 and report["budget_s"] == 5.0 and report["commit"] and report["date"]
    chosen = ["nas", "KerasTuner Hyperband"]
    # Every kept run names the machine it ran on (runs of one race may come from several).
    kept = [json.loads(path.read_text()) for path in runs.glob("run-*.json")]
    assert len(kept) == len(chosen)
    assert all(run["machine"] == report["machine"] and "usable cores" in run["machine"] for run in kept)
    assert set(report["rows"]) == set(chosen)
    for name, row in report["rows"].items():
        (trials,) = report["runs"][name]
        assert row["trials"] == len(trials) >= 1, name
        done = [t for t in trials if t["accuracy"] is not None]
        assert all(0 <= t["accuracy"] <= 1 and t["throughput"] > 0 and t["inside_s"] > 0 for t in done), name
        # The final hypervolume is that of the tool's own front, with re-measured throughputs.
        front = [f for f in report["fronts"] if f["contender"] == name]
        assert len(front) == len(race.own_front(trials)) >= 1, name
        assert all(f["remeasured"] > 0 for f in front)
        expected = race.hypervolume([(f["accuracy"], f["remeasured"]) for f in front])
        assert row["final_hv_by_seed"] == [pytest.approx(expected)] and row["final_hv"] == pytest.approx(expected)
        assert row["overhead"] == pytest.approx(race.overhead(trials), nan_ok=True)
        assert row["overhead_s"] == pytest.approx(race.overhead_s(trials), nan_ok=True)
    assert report["hyperband_final_hv"] == report["rows"]["KerasTuner Hyperband"]["final_hv"]
    assert png.stat().st_size > 10_000
    # Each run is kept with where it came from, for a later call to reuse.
    for name in chosen:
        kept_run = json.loads((runs / f"run-{race.CONTENDERS.index(name)}-0.json").read_text())
        assert kept_run["contender"] == name and kept_run["commit"] == report["commit"]
        assert kept_run["budget_s"] == 5.0 and kept_run["trials"] == report["runs"][name][0]
    assert len(report["run_provenance"]) == len(chosen)
    assert "| nas |" in result.stdout and "| KerasTuner Hyperband |" in result.stdout


def test_kept_runs_are_reused_only_for_the_same_budget_and_epochs(tmp_path: Path) -> None:
    race = _race()
    path = tmp_path / "run-0-0.json"
    assert race.kept_run(path, 900.0, None) is None
    path.write_text(json.dumps({"budget_s": 900.0, "epochs": None, "commit": "abc", "date": "d", "trials": []}))
    assert race.kept_run(path, 900.0, None)["commit"] == "abc"
    with pytest.raises(race.RunMismatch, match="budget 900 s and epochs None, not 300 s and None"):
        race.kept_run(path, 300.0, None)
    with pytest.raises(race.RunMismatch, match="not 900 s and 2"):
        race.kept_run(path, 900.0, 2)


def test_kept_runs_are_still_named_by_their_contender_s_place() -> None:
    """A kept run's file is named by its contender's index: the committed runs must still
    name theirs, or a later race would reuse one contender's runs for another."""
    race = _race()
    kept = sorted(REPO.glob("benchmarks/race-runs*/run-*-*.json"))
    assert kept
    for path in kept:
        index = int(path.name.split("-")[1])
        assert race.CONTENDERS[index] == json.loads(path.read_text())["contender"], path


def test_an_unknown_contender_is_refused_with_status_2(tmp_path: Path) -> None:
    result = _run_race("--contenders", "nas,AutoKeras", cwd=tmp_path)
    assert result.returncode == 2 and "unknown contenders ['AutoKeras']" in result.stderr, result.stderr

"""benchmarks/compare.py: the overhead it reports, and a real short run's JSON (one nas
contender against the KerasTuner target: the script runs and writes a valid report)."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .package import benchmark, command, environment
from .test_results_map import runnable, stamp_problems


def _compare() -> ModuleType:
    return benchmark("compare")


def _idle_share(points: list[dict[str, Any]], *, count_build: bool = True) -> float:
    """The overhead as compare.py defines it, worked out again from the points it reports:
    the median, over every trial but the first, of the part of the time since the previous
    trial ended spent neither measuring nor training (nor building, with count_build off)."""
    by_end = sorted(points, key=lambda p: p["end_s"])
    shares = []
    for i in range(1, len(by_end)):
        wall = by_end[i]["end_s"] - by_end[i - 1]["end_s"]
        busy = by_end[i]["inside_s"] + (0.0 if count_build else by_end[i]["build_s"])
        if wall > 0:
            shares.append(max(wall - busy, 0.0) / wall)
    return statistics.median(shares) if shares else math.nan


def test_overhead_of_known_trials() -> None:
    compare = _compare()
    point = compare.Point
    # Out of order on purpose. Trial ends at 10 s (start-up, left out), 20 s (6 s of its 10
    # busy: 0.4 idle; 7 s with building: 0.3), 25 s (4 s of 5: 0.2; with building 0.0) and
    # 45 s (busy longer than the gap, counted as 0 idle, never below).
    points = [
        point(end_s=25.0, accuracy=0.5, throughput=1.0, inside_s=4.0, build_s=1.0),
        point(end_s=10.0, accuracy=0.5, throughput=1.0, inside_s=9.0, build_s=1.0),
        point(end_s=45.0, accuracy=0.5, throughput=1.0, inside_s=30.0, build_s=0.0),
        point(end_s=20.0, accuracy=0.5, throughput=1.0, inside_s=6.0, build_s=1.0),
    ]
    assert compare.overhead(points) == pytest.approx(0.2)  # median of 0.4, 0.2, 0.0
    assert compare.overhead(points, count_build=False) == pytest.approx(0.0)  # of 0.3, 0.0, 0.0
    # Without the 25 s trial, the last one is busy 30 s of a 25 s gap: 0, not -0.2.
    assert compare.overhead([points[1], points[2], points[3]]) == pytest.approx(0.2)  # of 0.4 and 0.0
    assert math.isnan(compare.overhead(points[:1]))  # one trial: nothing to measure


@pytest.mark.slow
def test_quick_run_writes_a_complete_report(tmp_path: Path) -> None:
    out, png = tmp_path / "compare.json", tmp_path / "hv.png"
    result = subprocess.run(
        command(
            "compare", "--quick", "--budget", "5", "--contenders", "nas (tpe)", "--out", str(out), "--plot", str(png)
        ),
        cwd=tmp_path,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    # One nas contender and the target; the full runs (all four, 3 seeds) are the benchmark.
    assert report["seeds"] == 1 and report["budget_s"] == 5.0
    assert set(report["rows"]) == {"nas (tpe)", "KerasTuner BayesianOptimization"}
    for name, row in report["rows"].items():
        assert row["trials"] >= 1, name
        points = row["points"][0]
        assert all(0.0 <= p["accuracy"] <= 1.0 and p["throughput"] > 0 and p["inside_s"] > 0 for p in points)
        hvs = [hv for _, hv in row["curves"][0]]
        assert hvs == sorted(hvs) and row["final_hv"] == hvs[-1] > 0, name
        assert row["overhead"] == pytest.approx(_idle_share(points), nan_ok=True), name
        assert row["overhead_besides_build"] == pytest.approx(_idle_share(points, count_build=False), nan_ok=True)
    assert png.stat().st_size > 10_000
    assert "| nas (tpe) |" in result.stdout


def test_an_unknown_contender_is_refused_with_status_2(tmp_path: Path) -> None:
    args = command("compare", "--contenders", "nas (tpe),AutoKeras")
    result = subprocess.run(args, cwd=tmp_path, env=environment(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "unknown contenders ['AutoKeras']" in result.stderr, result.stderr


def test_the_report_names_its_command_with_the_arguments_it_ran_and_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compare = _compare()
    monkeypatch.setattr(compare, "run_isolated", lambda *_: [])  # no search: the report's stamps only
    monkeypatch.setattr(compare, "summarise", lambda runs, budget: {"rows": {}})
    monkeypatch.delenv("NAS_DEVICE_PROFILE", raising=False)  # main() drops it; put back after
    out = tmp_path / "compare.json"
    arguments = ["--budget", "5", "--seeds", "2", "--epochs", "1", "--contenders", "nas (tpe)", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", ["compare", *arguments])
    compare.main()
    report = json.loads(out.read_text())
    assert report["command"] == "python -m benchmarks.compare --budget 5 --seeds 2 --epochs 1 --contenders 'nas (tpe)'"
    assert report["commit"] == benchmark("stamps").commit() and report["date"] and report["machine"]
    assert not stamp_problems(report, runnable())

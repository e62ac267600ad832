"""benchmarks/compare.py: the hypervolume it reports, and a real --quick run's JSON."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ..helpers import REPO, nas_env


def _compare() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compare", REPO / "benchmarks" / "compare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["compare"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_hypervolume_of_known_fronts() -> None:
    hv = _compare().hypervolume
    assert hv([]) == 0.0
    assert hv([(0.5, 4.0)]) == pytest.approx(0.5 * 1.0)  # reference point (0, 3)
    # Two non-dominated points: union of two rectangles.
    assert hv([(0.9, 3.5), (0.5, 4.0)]) == pytest.approx(0.9 * 0.5 + 0.5 * 0.5)
    # A dominated point and one below the reference add nothing.
    assert hv([(0.9, 3.5), (0.5, 4.0), (0.4, 3.2), (0.99, 2.0)]) == pytest.approx(0.7)


@pytest.mark.slow
def test_quick_run_writes_a_complete_report(tmp_path: Path) -> None:
    out, png = tmp_path / "compare.json", tmp_path / "hv.png"
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "compare.py"), "--quick", "--out", str(out), "--plot", str(png)],
        cwd=tmp_path,
        env=nas_env(),
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["seeds"] == 1 and report["budget_s"] == 35.0
    assert set(report["rows"]) == {
        "nas (tpe)",
        "nas (random)",
        "KerasTuner BayesianOptimization",
        "KerasTuner RandomSearch",
    }
    for name, row in report["rows"].items():
        assert row["trials"] >= 1, name
        points = row["points"][0]
        assert all(0.0 <= p["accuracy"] <= 1.0 and p["throughput"] > 0 and p["inside_s"] > 0 for p in points)
        hvs = [hv for _, hv in row["curves"][0]]
        assert hvs == sorted(hvs) and row["final_hv"] == hvs[-1] > 0, name
        assert 0.0 <= row["overhead"] <= 1.0 or row["trials"] == 1
    assert png.stat().st_size > 10_000
    assert "| nas (tpe) |" in result.stdout

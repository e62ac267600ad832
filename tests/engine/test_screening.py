"""Constraints checked before training: infeasible candidates cost seconds, never a training run."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from ..helpers import REPO, run_nas


def _space(folder: Path, name: str, constraints: dict[str, float]) -> Path:
    data = yaml.safe_load((REPO / "spaces" / "tiny.yaml").read_text())
    data["name"] = name
    data["constraints"] = constraints
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _trials(folder: Path, name: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{folder / 'nas.db'}").trials


@pytest.mark.slow
def test_measured_constraint_screens_before_training(workdir: Path) -> None:
    space = _space(workdir, "fast-only", {"min_throughput": 1e12})
    result = run_nas("search", str(space), "--trials", "2", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "screened out before training (min_throughput exceeded" in result.stderr
    trials = _trials(workdir, "fast-only")
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    for t in trials:
        assert t.user_attrs["screened"] == "measured"
        assert "measure" in t.user_attrs["durations"] and "train" not in t.user_attrs["durations"]
        assert "history" not in t.user_attrs
        assert t.constraints["min_throughput"] > 0
        assert t.values[1] == t.user_attrs["hardware"]["throughput"]["32"]["images_per_s"] > 0
    study = optuna.load_study(study_name="fast-only", storage=f"sqlite:///{workdir / 'nas.db'}")
    assert study.best_trials == []  # nothing feasible, so no Pareto front
    pareto = run_nas("pareto", "fast-only", "--format", "json", cwd=workdir)
    assert pareto.stdout.strip() == "[]"


@pytest.mark.slow
def test_static_constraint_screens_before_measuring(workdir: Path) -> None:
    space = _space(workdir, "small-only", {"max_params": 100, "max_latency_ms": 1000.0})
    result = run_nas("search", str(space), "--trials", "2", cwd=workdir)
    assert result.returncode == 0, result.stderr
    for t in _trials(workdir, "small-only"):
        assert t.user_attrs["screened"] == "static"
        # Checked on the plan: no model was built, let alone measured or trained.
        assert set(t.user_attrs["durations"]) == {"plan", "total"}
        assert t.user_attrs["durations"]["total"] < 1.0
        assert t.constraints["max_params"] > 0


@pytest.mark.slow
def test_feasible_trials_record_satisfied_constraints(workdir: Path) -> None:
    space = _space(workdir, "loose", {"max_params": 10_000_000, "max_latency_ms": 10_000.0, "min_throughput": 1.0})
    result = run_nas("search", str(space), "--trials", "1", cwd=workdir)
    assert result.returncode == 0, result.stderr
    (trial,) = _trials(workdir, "loose")
    assert "screened" not in trial.user_attrs
    assert set(trial.constraints) == {"max_params", "max_latency_ms", "min_throughput"}
    assert all(v <= 0 for v in trial.constraints.values())
    assert "train" in trial.user_attrs["durations"]
    status = run_nas("status", cwd=workdir)
    # throughput at batch 32, latency at batch 1, and the CPU matmul peak
    assert "Measurement cache: 3 measurements, 0 hits" in status.stdout

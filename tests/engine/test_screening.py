"""Constraints checked before training: infeasible candidates cost seconds, never a training run."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from ..helpers import REPO, run_cli


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
    result = run_cli("search", str(space), "--trials", "2", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "screened out before training (min_throughput exceeded" in result.stderr
    trials = _trials(workdir, "fast-only")
    # Finished without objectives: no accuracy was ever measured, so none is stored.
    assert [t.state for t in trials] == [TrialState.PRUNED] * 2
    for t in trials:
        assert t.values is None
        assert t.user_attrs["screened"] == "measured"
        assert "measure" in t.user_attrs["durations"] and "train" not in t.user_attrs["durations"]
        assert "history" not in t.user_attrs
        assert t.constraints["min_throughput"] > 0
        measured = t.user_attrs["hardware"]["throughput"]["32"]["images_per_s"]
        assert t.user_attrs["known_objectives"] == {"throughput": measured} and measured > 0
    study = optuna.load_study(study_name="fast-only", storage=f"sqlite:///{workdir / 'nas.db'}")
    assert study.best_trials == []  # nothing feasible, so no Pareto front
    pareto = run_cli("pareto", "fast-only", "--format", "json", cwd=workdir)
    assert pareto.stdout.strip() == "[]"
    status = run_cli("status", "--format", "json", cwd=workdir)
    (row,) = json.loads(status.stdout)["studies"]
    assert (row["finished"], row["screened"], row["budget"]) == (2, 2, 2)


def test_screened_trials_are_read_as_unmeasured_by_every_tool(workdir: Path) -> None:
    """A study with one trained trial and one screened one, recorded as the search records
    them: TPE files the screened trial with the bad trials, NSGA-II and `best_trials` skip it,
    optuna-dashboard shows it as pruned with no values, and our report lists it as screened."""
    from optuna.samplers._tpe.sampler import _split_trials
    from optuna_dashboard._serializer import serialize_frozen_trial

    from nas.search.results.report import trial_rows

    study = optuna.create_study(directions=["maximize", "maximize"])
    study.set_metric_names(["accuracy", "throughput"])
    trained = study.ask({"width": optuna.distributions.IntDistribution(1, 9)})
    trained.set_constraint("min_throughput", -0.5)
    study.tell(trained, [0.9, 2000.0])
    screened = study.ask({"width": optuna.distributions.IntDistribution(1, 9)})
    screened.set_constraint("min_throughput", 0.8)
    screened.set_user_attr("screened", "measured")
    screened.set_user_attr("known_objectives", {"throughput": 200.0})
    study.tell(screened, state=TrialState.PRUNED)

    frozen = study.trials
    below, above = _split_trials(study, frozen, 1)
    assert [t.number for t in below] == [0] and [t.number for t in above] == [1]
    assert [t.number for t in study.best_trials] == [0]
    population = study._get_trials(deepcopy=False, states=[TrialState.COMPLETE])  # what NSGA-II reads
    assert [t.number for t in population] == [0]
    shown = serialize_frozen_trial(0, frozen[1], {})
    assert shown["state"] == "Pruned" and not shown.get("values")
    rows = {r["trial"]: r for r in trial_rows(study)}
    assert rows[1]["state"] == "screened (measured)" and rows[1]["throughput"] == 200.0
    assert "accuracy" not in rows[1]
    assert rows[0]["state"] == "front" and rows[0]["accuracy"] == 0.9


@pytest.mark.slow
def test_static_constraint_screens_before_measuring(workdir: Path) -> None:
    space = _space(workdir, "small-only", {"max_params": 100, "max_latency_ms": 1000.0})
    result = run_cli("search", str(space), "--trials", "2", cwd=workdir)
    assert result.returncode == 0, result.stderr
    for t in _trials(workdir, "small-only"):
        assert t.user_attrs["screened"] == "static"
        # Checked on the plan: no model was built, let alone measured or trained (what that
        # saves in seconds is benchmarks/measurement.py's to say).
        assert set(t.user_attrs["durations"]) == {"plan", "total"}
        assert t.constraints["max_params"] > 0


@pytest.mark.slow
def test_feasible_trials_record_satisfied_constraints(workdir: Path) -> None:
    space = _space(workdir, "loose", {"max_params": 10_000_000, "max_latency_ms": 10_000.0, "min_throughput": 1.0})
    result = run_cli("search", str(space), "--trials", "1", cwd=workdir)
    assert result.returncode == 0, result.stderr
    (trial,) = _trials(workdir, "loose")
    assert "screened" not in trial.user_attrs
    assert set(trial.constraints) == {"max_params", "max_latency_ms", "min_throughput"}
    assert all(v <= 0 for v in trial.constraints.values())
    assert "train" in trial.user_attrs["durations"]
    status = run_cli("status", cwd=workdir)
    # throughput at batch 32, latency at batch 1, the CPU matmul peak and the reference
    # baseline (read again when the front is confirmed at the end)
    assert "Measurement cache: 4 measurements, 1 hits" in status.stdout

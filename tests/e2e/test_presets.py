"""Every preset but `tiny` runs a real 1-trial search on digits through the command line
(one trial of one epoch on 300 images, no confirmation, so the five fit in CI; the full presets
were run by hand; the sampler's later trials are the tiny study's). `tiny` is the session's
finished study (tests/conftest.py), checked in tests/e2e/test_search_e2e.py."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from ..helpers import QUICK_MEASURE, REPO, run_cli

PRESETS = ["mobilenet", "mobilenet_v3", "efficientnet", "efficientnet_v2", "efficientnet_lite"]


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_runs_a_1_trial_search(workdir: Path, preset: str) -> None:
    data = yaml.safe_load((REPO / "spaces" / f"{preset}.yaml").read_text())
    data["training"]["epochs"] = 1
    data["dataset"]["subset"] = 300
    data["measure"] = {**QUICK_MEASURE, "latency": False, "confirm": False}
    space = workdir / f"{preset}.yaml"
    space.write_text(yaml.safe_dump(data, sort_keys=False))
    result = run_cli("search", str(space), "--trials", "1", cwd=workdir)
    assert result.returncode == 0, result.stderr
    study = optuna.load_study(study_name=preset, storage=f"sqlite:///{workdir / 'nas.db'}")
    finished = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(finished) == 1
    for t in finished:
        assert 0.0 <= t.values[0] <= 1.0 and t.values[1] > 0
        assert t.user_attrs["params"] > 0 and t.user_attrs["model_bytes"] == 4 * t.user_attrs["params"]
        assert {"plan", "build", "measure", "train"} <= set(t.user_attrs["durations"])
    if preset == "efficientnet":
        assert all("phi" in t.params for t in finished)
    if preset == "mobilenet_v3":
        # Conditional: se_ratio exists exactly where se was sampled true.
        for t in finished:
            for stage in (2, 3):
                assert (f"stage{stage}.se_ratio" in t.params) == t.params[f"stage{stage}.se"]

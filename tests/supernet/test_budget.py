"""`search.supernet.epochs: auto`: the epochs that fit in a share of --timeout, measured on
the machine when the training starts (the probe leaves the weights as they were), decided
once and kept by a resumed search; without a time budget it is refused with exit 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import yaml

from ..helpers import run_cli
from .test_progressive import _two_stages


def test_the_probe_puts_the_weights_back_and_more_time_fits_more_epochs() -> None:
    from nas.search.data import load_dataset
    from nas.search.space import space_from_dict
    from nas.search.space.elastic import elastic_space
    from nas.search.supernet.budget import epochs_for_budget
    from nas.search.supernet.network import Supernet

    space = space_from_dict(_two_stages())
    data = load_dataset(space.spec.dataset)
    elastic = elastic_space(space)
    supernet = Supernet(elastic.space.candidate(elastic.largest, num_classes=10, channels=1), seed=0)
    before = supernet.get_state()
    short = epochs_for_budget(supernet, elastic, data, seconds=1.0, seed=0)
    for key, value in supernet.get_state().items():  # BatchNorm's statistics included
        np.testing.assert_array_equal(value, before[key], err_msg=key)
    assert short.epochs == 1  # at least one, however short the budget
    assert short.steps_timed >= 1 and short.step_seconds > 0 and short.trace_seconds > 0
    steps = -(-len(data.y_train) // supernet.candidate.batch_size)
    assert abs(short.epoch_seconds - short.step_seconds * steps) < 1e-9  # nothing scored
    # A budget of 50 estimated epochs past the probe and its tracing fits about 50.
    seconds = short.probe_seconds + short.trace_seconds + 50 * short.epoch_seconds
    long = epochs_for_budget(supernet, elastic, data, seconds=seconds, seed=0)
    assert 25 <= long.epochs <= 100, long


def test_auto_epochs_fit_the_timeout_are_stored_and_kept_and_need_a_timeout(tmp_path: Path) -> None:
    space = _two_stages(epochs="auto", budget_share=0.5, reference_subnets=False)
    space["search"]["trials"] = 2
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    storage = f"sqlite:///{tmp_path / 'nas.db'}"

    refused = run_cli("search", str(path), "--storage", storage, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr[-2000:]
    lines = refused.stderr.strip().splitlines()
    assert "search.supernet.epochs: auto needs a time budget" in lines[-1], refused.stderr[-2000:]

    result = run_cli("search", str(path), "--storage", storage, "--timeout", "60", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    study = optuna.load_study(study_name="elastic", storage=storage)
    record = study.user_attrs["supernet"]
    epochs = record["epochs"]
    assert epochs >= 1 and record["done"] == epochs and len(record["history"]) == epochs
    assert record["budget"]["epochs"] == epochs
    assert f"supernet: {epochs} epochs fit in 30 s (an epoch about" in result.stderr
    assert f"supernet: training {epochs} epochs (" in result.stderr

    # Resumed with another budget (and a larger trial budget): the count stays, nothing retrains.
    again = run_cli("search", str(path), "--storage", storage, "--trials", "3", "--timeout", "600", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"supernet: trained ({epochs} epochs), loaded from" in again.stderr
    assert "timing its training steps" not in again.stderr
    assert optuna.load_study(study_name="elastic", storage=storage).user_attrs["supernet"]["epochs"] == epochs

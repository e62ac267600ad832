"""`search.supernet.epochs: auto`: the epochs that fit in a share of --timeout, decided from
the first epoch's time on the machine (its tracing counted apart), with the learning rate's
schedule stretched to them; kept by a resumed search; without a time budget, exit 2."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import yaml

from ...helpers import run_cli
from .test_progressive import _two_stages


def test_the_epochs_are_what_fits_after_the_first_without_its_tracing() -> None:
    from nas.search.strategies.supernet.budget import epochs_for_budget

    # The first epoch took 50 s, 20 of them tracing: each next one costs 30 s.
    budget = epochs_for_budget(50.0, 20.0, spent_seconds=55.0, budget_seconds=300.0)
    assert (budget.epochs, budget.epoch_seconds) == (1 + 8, 30.0)  # 245 s left: 8 more
    assert epochs_for_budget(50.0, 20.0, 55.0, 40.0).epochs == 1  # over already: the first only
    assert epochs_for_budget(50.0, 20.0, 55.0, 40.0, minimum=5).epochs == 5  # progressive's phases
    assert "9 epochs fit in 300 s (the first took 50 s, 20 s of it tracing graphs" in budget.describe()
    assert epochs_for_budget(50.0, 20.0, 55.0, 40.0).describe().startswith("1 epoch fit in 40 s")


@pytest.mark.slow
def test_an_undecided_training_decides_after_its_first_epoch_and_stretches_its_schedule(tmp_path: Path) -> None:
    from nas.search.data import load_dataset
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space
    from nas.search.strategies.supernet.network import Supernet
    from nas.search.strategies.supernet.train import SupernetTraining, checkpoint_progress, train_supernet

    document = _two_stages()
    document["dataset"]["subset"] = 150
    space = space_from_dict(document)
    data = load_dataset(space.spec.dataset)
    elastic = elastic_space(space)
    supernet = Supernet(elastic.space.candidate(elastic.largest, num_classes=10, channels=1), seed=0)
    asked: list[tuple[float, float, int]] = []

    def decide(first: float, tracing: float, minimum: int) -> int:
        asked.append((first, tracing, minimum))
        return 3

    path = tmp_path / "supernet.npz"
    training = train_supernet(supernet, elastic, data, SupernetTraining(0), path, seed=0, decide=decide)
    assert len(asked) == 1 and asked[0][2] == 1 and 0 < asked[0][1] < asked[0][0]
    assert training.epochs == 3 and checkpoint_progress(path).epochs == 3
    rates = [h["learning_rate"] for h in training.history]
    # The cosine ends with the third epoch (a 12-epoch one, not stretched, would still be high).
    assert rates[0] > rates[1] > 0 and rates[2] < 1e-6 * rates[0], rates
    assert training.history[0]["decided_epochs"] == 3


@pytest.mark.slow
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
    assert "supernet: training 1 epoch, then as many as fit the budget (" in result.stderr
    assert f"supernet: {epochs} epoch{'s' if epochs != 1 else ''} fit in 30 s (the first took" in result.stderr

    # Resumed with another budget (and a larger trial budget): the count stays, nothing retrains.
    again = run_cli("search", str(path), "--storage", storage, "--trials", "3", "--timeout", "600", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"supernet: trained ({epochs} epochs), loaded from" in again.stderr
    assert "fit in" not in again.stderr
    assert optuna.load_study(study_name="elastic", storage=storage).user_attrs["supernet"]["epochs"] == epochs

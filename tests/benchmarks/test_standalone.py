"""benchmarks/standalone.py: the seeds' agreement among themselves is computed pair by pair,
and the committed file's summary is what its own runs give (the reference the supernet's
ranking in RESULTS.md is judged against)."""

from __future__ import annotations

import json
import statistics
from types import ModuleType

import pytest

from ..helpers import REPO
from .package import benchmark


def _standalone() -> ModuleType:
    return benchmark("standalone")


def _runs(order: dict[int, list[float]]) -> list[dict[str, object]]:
    return [
        {"arch": {"width_multiplier": w}, "seed": seed, "accuracy": accuracy}
        for seed, accuracies in order.items()
        for w, accuracy in zip((0.25, 0.5, 0.75, 1.0), accuracies, strict=True)
    ]


def test_seed_agreement_is_the_mean_over_pairs_of_seeds() -> None:
    standalone = _standalone()
    # Seed 1 ranks as seed 0 does, seed 2 the other way round: pairs tau +1, -1, -1.
    runs = _runs({0: [0.90, 0.92, 0.94, 0.96], 1: [0.80, 0.85, 0.88, 0.99], 2: [0.97, 0.95, 0.93, 0.91]})
    agreement = standalone.seed_agreement(runs)
    assert agreement["seed_pairs"] == 3
    assert agreement["kendall_tau_mean"] == pytest.approx(-1 / 3, abs=1e-3)
    assert standalone.seed_agreement(_runs({0: [0.9, 0.8, 0.7, 0.6]})) == {}  # one seed: nothing to compare
    means = standalone.mean_by_architecture(runs)
    assert means[standalone.tables.config_key({"width_multiplier": 1.0})] == pytest.approx((0.96 + 0.99 + 0.91) / 3)


def test_the_committed_file_summarises_its_own_runs() -> None:
    standalone = _standalone()
    document = json.loads((REPO / "benchmarks" / "standalone.json").read_text())
    runs, summary = document["runs"], document["summary"]
    assert len({(standalone.tables.config_key(r["arch"]), r["seed"]) for r in runs}) == len(runs)  # none repeated
    means = sorted(standalone.mean_by_architecture(runs).values())
    assert summary["trainings"] == len(runs) and summary["architectures"] == len(means) == 64
    assert summary["mean_accuracy_min_median_max"] == [round(means[0], 4), round(statistics.median(means), 4),
                                                       round(means[-1], 4)]  # fmt: skip
    assert summary["seed_agreement"] == standalone.seed_agreement(runs)

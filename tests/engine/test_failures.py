"""A failing trial is recorded with its reason and the search goes on, up to a limit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from optuna.trial import TrialState

from nas.search import runtime

runtime.import_tensorflow()

from nas.search.data import Dataset, load_dataset
from nas.search.engine import (
    SearchEvents,
    SearchOptions,
    run_search,
)
from nas.search.space import load_space
from nas.search.strategies import strategy_for
from nas.storage import resolve_storage_url


@pytest.mark.slow
def test_failing_trials_are_recorded_and_the_search_stops_after_a_run_of_them(tmp_path: Path) -> None:
    space = load_space("tiny")
    good = load_dataset(space.spec.dataset)
    # Labels outside the model's 10 classes: TensorFlow raises inside every training step.
    bad = Dataset(good.x_train, np.full_like(good.y_train, 12), good.x_val, good.y_val, good.class_names)
    options = SearchOptions(
        storage=resolve_storage_url(f"sqlite:///{tmp_path / 'nas.db'}"),
        study_name="broken",
        trials=5,
        sampler="tpe",
        seed=0,
        max_consecutive_failures=2,
    )
    outcome = run_search(space, options, SearchEvents(), data=bad, strategy=strategy_for(space))
    assert outcome.stopped_by == "failures"
    assert (outcome.finished, outcome.failed) == (0, 2)
    trials = outcome.study.trials
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.FAIL]
    for t in trials:
        assert t.user_attrs["fail_reason"].startswith("InvalidArgumentError"), t.user_attrs["fail_reason"]
        assert "label" in t.user_attrs["fail_reason"].lower()
        assert "measure" in t.user_attrs["durations"]  # it failed in training, after measuring

    # The same study continues with good data: failures do not count against the budget.
    options = SearchOptions(**{**options.__dict__, "trials": 1})
    outcome = run_search(space, options, SearchEvents(), data=good, strategy=strategy_for(space))
    assert outcome.stopped_by == "budget" and outcome.finished == 1

"""Between trials the loop freezes what survived, after collecting what a trial left as garbage."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nas.search import runtime

runtime.import_tensorflow()

import keras

from nas.search.data import Dataset, load_dataset
from nas.search.engine import SearchEvents, SearchOptions, collector, keras_evaluation, loop, run_search
from nas.search.space import load_space
from nas.search.strategies import strategy_for
from nas.storage import resolve_storage_url


@pytest.fixture(autouse=True)
def _unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the session's objects go back to the collector


class _Node:
    def __init__(self) -> None:
        self.other: Any = None


def test_cyclic_garbage_is_collected_and_survivors_are_frozen() -> None:
    kept = _Node()
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # a cycle: only the collector frees it
    garbage = weakref.ref(a)
    del a, b
    frozen_before = gc.get_freeze_count()
    collector.freeze_survivors()
    assert garbage() is None, "a cycle that was garbage at freezing time must be freed, not frozen"
    assert gc.get_freeze_count() > frozen_before
    assert gc.is_tracked(kept)
    gc.collect()
    assert not any(o is kept for o in gc.get_objects()), "a survivor must be out of later collections"


@pytest.mark.slow
def test_a_failed_trials_model_is_freed_and_the_loop_freezes_after_every_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models: list[weakref.ref[keras.Model]] = []
    build = keras_evaluation.build_plan

    def build_and_watch(*args: Any, **kwargs: Any) -> keras.Model:
        model = build(*args, **kwargs)
        models.append(weakref.ref(model))
        return model

    freezes = []

    def counted() -> None:
        freezes.append(1)
        collector.freeze_survivors()

    monkeypatch.setattr(keras_evaluation, "build_plan", build_and_watch)
    monkeypatch.setattr(loop, "freeze_survivors", counted)
    space = load_space("tiny")
    good = load_dataset(space.spec.dataset)
    # Labels outside the model's classes: every trial fails in its first training step, and
    # its exception's traceback holds the frames that hold the model, in a cycle.
    bad = Dataset(good.x_train, np.full_like(good.y_train, 12), good.x_val, good.y_val, good.class_names)
    options = SearchOptions(
        storage=resolve_storage_url(f"sqlite:///{tmp_path / 'nas.db'}"),
        study_name="frozen",
        trials=2,
        sampler="random",
        seed=0,
        max_consecutive_failures=2,
    )
    outcome = run_search(space, options, SearchEvents(), data=bad, strategy=strategy_for(space))
    assert outcome.failed == 2 and models
    assert len(freezes) == 1 + 2  # once at start-up, then after each trial
    assert [ref() for ref in models] == [None] * len(models), "a failed trial's model outlived the trial"

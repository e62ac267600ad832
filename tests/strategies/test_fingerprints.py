"""One way to keep fingerprints: a strategy's settings at their defaults stay out of the study's
fingerprint, as every other part of the space does, and a fingerprint stored by an older
version (which kept some at their defaults) is read in today's form, so the study resumes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from pydantic import Field

from nas.errors import NasError

from .supernet.test_supernet import _space


def _open(space: dict[str, Any], storage: optuna.storages.RDBStorage) -> optuna.Study:
    from nas.search.engine.study import open_study
    from nas.search.space import space_from_dict

    return open_study(space_from_dict(space), storage, "old")


@pytest.fixture
def storage(tmp_path: Path) -> optuna.storages.RDBStorage:
    return optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'nas.db'}")


def test_settings_at_their_defaults_are_not_in_the_fingerprint() -> None:
    import json

    from nas.search.space import space_from_dict

    stored = json.loads(space_from_dict(_space(supernet={"calibration_batches": 8, "epochs": 12})).fingerprint())
    assert stored["search"] == {"strategy": "supernet"}
    stored = json.loads(space_from_dict(_space(supernet={"calibration_batches": 2, "epochs": 12})).fingerprint())
    assert stored["search"] == {"strategy": "supernet", "supernet": {"calibration_batches": 2}}
    assert "search" not in json.loads(space_from_dict(_space(strategy="trials")).fingerprint())


def test_a_supernet_study_stored_with_settings_at_their_defaults_still_resumes(
    storage: optuna.storages.RDBStorage,
) -> None:
    space = _space(supernet={"epochs": 3, "calibration_batches": 8})
    study = _open(space, storage)
    # What the version before this one stored: epochs, calibration_batches and fixed always,
    # whatever their values.
    old = dict(study.user_attrs["space"])
    old["search"] = {"strategy": "supernet", "supernet": {"epochs": 3, "calibration_batches": 8, "fixed": {}}}
    study.set_user_attr("space", old)
    _open(space, storage)  # resumes
    with pytest.raises(NasError, match="different space"):
        _open(_space(supernet={"epochs": 3, "calibration_batches": 4}), storage)
    with pytest.raises(NasError, match="different space"):
        _open(_space(supernet={"epochs": 4, "calibration_batches": 8}), storage)


@contextlib.contextmanager
def a_new_setting() -> Iterator[None]:
    """The supernet's settings as a later version might have them: one more, with a default."""
    from nas.search import strategies
    from nas.search.strategies.supernet.settings import SETTINGS, SupernetSpec

    class Later(SupernetSpec):
        warmup_subnets: int = Field(0, ge=0, description="a setting added later; 0 is today's behaviour")

    cls = type(SETTINGS)
    cls.schema = Later
    strategies.register("supernet", strategies.REGISTRY["supernet"])  # the space's schema is rebuilt
    try:
        yield
    finally:
        cls.schema = SupernetSpec
        strategies.register("supernet", strategies.REGISTRY["supernet"])


def test_a_setting_added_with_a_default_keeps_an_old_study_resuming(storage: optuna.storages.RDBStorage) -> None:
    space = _space(supernet={"epochs": 3, "calibration_batches": 2})
    _open(space, storage)  # made by today's version
    # A later version, with one more setting: the study made before it resumes at its default,
    # and is refused with another value.
    with a_new_setting():
        _open(space, storage)
        with pytest.raises(NasError, match="different space"):
            _open(_space(supernet={"epochs": 3, "calibration_batches": 2, "warmup_subnets": 2}), storage)

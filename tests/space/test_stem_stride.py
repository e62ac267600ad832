"""The stem's stride is a searchable knob (at 28x28 a stride of 1 keeps 4x the detail)."""

from __future__ import annotations

import json
from typing import Any

import optuna
import pytest

from nas.errors import NasError
from nas.search.nets import plan_network
from nas.search.space import space_from_dict


def _doc(stride: Any, **search: Any) -> dict[str, Any]:
    return {
        "name": "stride",
        "dataset": {"source": "digits", "image_size": 16},
        "model": {"stem_stride": stride, "stem_filters": 8, "head_filters": 16, "stages": [{"filters": 8}]},
        "search": search,
    }


def test_a_searched_stem_stride_is_sampled_and_planned() -> None:
    space = space_from_dict(_doc({"choice": [1, 2]}))
    assert "stem_stride" in space.searchable()
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = {}
    for _ in range(12):
        candidate = space.sample(study.ask(), num_classes=10, channels=1)
        seen[candidate.stem_stride] = plan_network(candidate).stem_size
    assert seen == {1: 16, 2: 8}  # the stem's output: the full 16x16 or half of it


def test_a_fixed_stem_stride_keeps_the_fingerprint_it_had_as_a_plain_number() -> None:
    # Studies made when stem_stride was a plain 1 or 2 must still resume with the same file.
    assert json.loads(space_from_dict(_doc(1)).fingerprint())["model"]["stem_stride"] == 1
    assert "stem_stride" not in json.loads(space_from_dict(_doc(2)).fingerprint())["model"]  # the default
    searched = json.loads(space_from_dict(_doc({"choice": [1, 2]})).fingerprint())["model"]["stem_stride"]
    assert searched == {"choices": [1, 2], "kind": "int"}


@pytest.mark.parametrize(
    ("stride", "search", "message"),
    [
        (3, {}, "model.stem_stride: 3 is not one of [1, 2]"),
        ({"choice": [1, 4]}, {}, "model.stem_stride: 4 is not one of [1, 2]"),
    ],
)
def test_a_stem_stride_it_cannot_use_is_refused(stride: Any, search: dict[str, Any], message: str) -> None:
    with pytest.raises(NasError, match=message.replace("[", r"\[").replace("]", r"\]")):
        space_from_dict(_doc(stride, **search))

"""The block type, the stem's width and the dense head layer are searchable; a space that
sets none of them keeps the fingerprint it had before they were (old studies resume)."""

from __future__ import annotations

from typing import Any

import optuna
import pytest

from nas.errors import NasError
from nas.search.nets import plan_network
from nas.search.space import space_from_dict

# What `fingerprint()` gave for _doc() at 94ff25b, before `block` existed and when
# stem_filters and head_hidden were plain numbers: a study stored then must still match.
OLD_FINGERPRINT = (
    '{"model": {"family": "mobilenet_v3", "head_filters": 16, "head_hidden": 64, "shared": {"kernel": '
    '{"choices": [3, 5], "kind": "int"}}, "stages": [{"expansion": {"kind": "float", "value": 1.0}, '
    '"filters": {"kind": "int", "value": 8}}, {"filters": {"kind": "int", "value": 16}, "se": {"kind": '
    '"bool", "value": true}, "stride": {"kind": "int", "value": 2}}], "stem_filters": 8}}'
)


def _doc(**model: Any) -> dict[str, Any]:
    return {
        "name": "old",
        "dataset": {"source": "digits", "image_size": 16},
        "model": {
            "family": "mobilenet_v3",
            "stem_filters": 8,
            "head_filters": 16,
            "head_hidden": 64,
            "shared": {"kernel": {"choice": [3, 5]}},
            "stages": [{"filters": 8, "expansion": 1}, {"filters": 16, "stride": 2, "se": True}],
            **model,
        },
    }


def test_a_space_without_the_new_knobs_keeps_its_old_fingerprint() -> None:
    space = space_from_dict(_doc())
    assert space.fingerprint() == OLD_FINGERPRINT
    assert {
        b.block for b in plan_network(space.candidate({"shared.kernel": 3}, num_classes=10, channels=1)).blocks
    } == {"mbconv"}


def test_block_type_stem_width_and_head_layer_are_sampled_and_planned() -> None:
    stages = [{"filters": 8, "block": {"choice": ["mbconv", "fused"]}}, {"filters": 16, "stride": 2}]
    space = space_from_dict(_doc(stages=stages, stem_filters={"choice": [8, 24]}, head_hidden={"choice": [0, 128]}))
    assert {"stage0.block", "stem_filters", "head_hidden"} <= set(space.searchable())
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(24):
        net = plan_network(space.sample(study.ask(), num_classes=10, channels=1))
        seen.add((net.blocks[0].block, net.blocks[0].name, net.stem_ch, net.head_hidden))
    assert {s[:2] for s in seen} == {("mbconv", "s0b0"), ("fused", "s0f0")}
    assert {s[2] for s in seen} == {8, 24} and {s[3] for s in seen} == {0, 128}


def test_the_shared_block_type_applies_to_every_stage_that_sets_none() -> None:
    space = space_from_dict(
        _doc(shared={"block": "fused"}, stages=[{"filters": 8}, {"filters": 16, "block": "mbconv"}])
    )
    net = plan_network(space.candidate({}, num_classes=10, channels=1))
    assert [b.block for b in net.blocks] == ["fused", "mbconv"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"shared": {"block": "resnet"}}, "model.shared.block: 'resnet' is not one of ['mbconv', 'fused']"),
        ({"head_hidden": {"choice": [0, 9000]}}, "model.head_hidden: 9000 is not between 0 and 8192"),
        ({"stem_filters": 0}, "model.stem_filters: 0 is not between 1 and 4096"),
    ],
)
def test_a_bad_block_type_or_width_is_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(NasError) as info:
        space_from_dict(_doc(**change))
    assert message in str(info.value)

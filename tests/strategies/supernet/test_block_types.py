"""A supernet over searched block types: each type holds its own weights (ProxylessNAS'
candidate paths), subnets of both types taken out of it compute what it computes, and its
sandwich trains both types, in progressive shrinking's first phase too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ...helpers import QUICK_MEASURE


def _space() -> dict[str, Any]:
    return {
        "name": "typed",
        "dataset": {"source": "digits", "image_size": 8, "subset": 240, "validation_fraction": 0.25, "seed": 0},
        "model": {
            "family": "efficientnet_v2",
            "width_multiplier": {"choice": [0.5, 1.0]},
            "stem_filters": {"choice": [8, 16]},
            "stem_stride": 1,
            "head_filters": 32,
            "head_hidden": {"choice": [16, 32]},
            "dropout": 0.0,
            "drop_connect_rate": 0.0,
            "stages": [
                {"block": {"choice": ["fused", "mbconv"]}, "filters": 8, "depth": {"int": [1, 2]}, "expansion": 1},
                {
                    "block": {"choice": ["mbconv", "fused"]},
                    "filters": 16,
                    "stride": 2,
                    "depth": {"int": [1, 2]},
                    "kernel": {"choice": [3, 5]},
                    "expansion": {"choice": [2, 4]},
                    "se": {"choice": [False, True]},
                },
            ],
        },
        "training": {"epochs": 1, "batch_size": 32, "learning_rate": 0.01},
        "measure": QUICK_MEASURE,
        "search": {"strategy": "supernet", "supernet": {"epochs": 1, "calibration_batches": 2}},
    }


def _elastic() -> Any:
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space

    return elastic_space(space_from_dict(_space()))


def _randomised(supernet: Any) -> None:
    rng = np.random.default_rng(1)
    for bn in supernet.bn.values():  # statistics that are not the identity, so slicing them shows
        size = bn.mean.shape
        bn.mean.assign(rng.normal(0, 0.2, size).astype("float32"))
        bn.variance.assign(rng.uniform(0.5, 2.0, size).astype("float32"))
        bn.beta.assign(rng.normal(0, 0.2, size).astype("float32"))


def test_block_types_are_elastic_and_the_ends_take_different_types() -> None:
    elastic = _elastic()
    assert {"stage0.block", "stage1.block", "stem_filters", "head_hidden"} <= set(elastic.elastic)
    assert elastic.largest["stage0.block"] == "fused" and elastic.smallest["stage0.block"] == "mbconv"
    assert elastic.largest["stage1.block"] == "mbconv" and elastic.smallest["stage1.block"] == "fused"
    swapped = elastic.swapped(elastic.largest)
    assert swapped["stage0.block"] == "mbconv" and swapped["stage1.block"] == "fused"
    assert {k: v for k, v in swapped.items() if not k.endswith(".block")} == {
        k: v for k, v in elastic.largest.items() if not k.endswith(".block")
    }
    # Never closed: a phase that opens nothing still draws the types.
    assert not {"stage0.block", "stage1.block"} & set(elastic.closed(()))


def test_subnets_of_both_types_compute_what_the_supernet_computes() -> None:
    import tensorflow as tf

    from nas.search.nets import count_flops, plan_network
    from nas.search.strategies.supernet.extract import extract
    from nas.search.strategies.supernet.network import Supernet

    elastic = _elastic()
    space = elastic.space
    supernet = Supernet.of(elastic, num_classes=10, channels=1, seed=0)
    # Both types' weights, named apart: s0f0 and s0b0 at the first position.
    assert {"s0f0_fused_conv", "s0b0_dw", "s1f1_fused_conv", "s1b1_expand_conv"} <= set(supernet.layers)
    _randomised(supernet)
    rng = np.random.default_rng(3)
    x = rng.random((6, 8, 8, 1)).astype("float32")
    configurations = [elastic.largest, elastic.smallest, elastic.swapped(elastic.largest)]
    configurations += [elastic.random_params(rng) for _ in range(5)]
    forward = tf.function(lambda x, m: supernet(x, m), reduce_retracing=True)
    seen: set[tuple[str, ...]] = set()
    for params in configurations:
        candidate = space.candidate(params, num_classes=10, channels=1)
        plan = plan_network(candidate)
        subnet = extract(supernet, candidate)
        assert subnet.count_params() == plan.params() and count_flops(subnet) == plan.flops()
        masks = supernet.masks(plan)
        expected = np.asarray(subnet(x, training=False))
        # Masks fixed in the graph (a subnet's own), and fed as tensors (the sandwich's random ones).
        np.testing.assert_allclose(np.asarray(supernet(x, masks)), expected, atol=1e-5)
        fed = {k: tf.constant(v) for k, v in masks.items()}
        np.testing.assert_allclose(np.asarray(forward(x, fed)), expected, atol=1e-5)
        seen.add(tuple(b.block for b in plan.blocks[:1]) + tuple(b.block for b in plan.blocks if b.stride == 2))
    assert {s[0] for s in seen} == {"fused", "mbconv"} and {s[1] for s in seen} == {"fused", "mbconv"}


def test_sorting_channels_covers_both_types() -> None:
    from nas.search.strategies.supernet.network import Supernet

    supernet = Supernet.of(_elastic(), num_classes=10, channels=1, seed=0)
    assert {"s1b0/hidden", "s1f0/hidden", "s1b0/se", "s1f0/se"} <= set(supernet.channel_orders())


def test_the_sandwich_trains_both_types_in_every_phase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The subnets each step trains, recorded in place of the step (the step's arithmetic is
    the forward pass checked above): the ends differ in type at every step and swap types
    from step to step, and progressive shrinking's first phase, "the largest network alone",
    trains it in both types."""
    import tensorflow as tf

    from nas.search.data import load_dataset
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import LARGEST_PHASE, elastic_space, progressive_phases
    from nas.search.strategies.supernet.network import Supernet
    from nas.search.strategies.supernet.steps import SandwichStep
    from nas.search.strategies.supernet.train import SupernetTraining, train_supernet

    steps: list[list[Any]] = []

    def record(self: Any, x: Any, y: Any, sandwich: list[Any]) -> tuple[Any, Any]:
        steps.append(sandwich)
        return tf.constant(1.0), tf.zeros(len(sandwich))

    monkeypatch.setattr(SandwichStep, "__call__", record)
    space = space_from_dict(_space())
    elastic = elastic_space(space)
    data = load_dataset(space.spec.dataset)
    supernet = Supernet.of(elastic, num_classes=data.num_classes, channels=data.channels, seed=0)
    epochs = 6  # a phase for the largest network, one for each of kernel, depth, expansion and width
    train_supernet(
        supernet, elastic, data, SupernetTraining(epochs), tmp_path / "c.npz", seed=0, schedule="progressive"
    )
    per_epoch = len(steps) // epochs
    phases = progressive_phases(epochs, elastic.dimensions())
    assert phases[0] == LARGEST_PHASE and per_epoch >= 2

    def types(plan: Any) -> tuple[str, str]:
        return plan.blocks[0].block, next(b.block for b in plan.blocks if b.stride == 2)

    for i, sandwich in enumerate(steps):
        largest, smallest = types(sandwich[0]), types(sandwich[1])
        assert all(a != b for a, b in zip(largest, smallest, strict=True))
        assert largest == (("fused", "mbconv") if i % per_epoch % 2 == 0 else ("mbconv", "fused"))
    first_phase = [plan for sandwich in steps[:per_epoch] for plan in sandwich]
    # Every subnet of the first phase is the largest (all its blocks, full widths), in both types.
    assert {(len(p.blocks), p.params() > 0, p.stem_ch, p.head_hidden) for p in first_phase} == {(4, True, 16, 32)}
    assert {types(p) for p in first_phase} >= {("fused", "mbconv"), ("mbconv", "fused")}

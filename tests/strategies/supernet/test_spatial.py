"""The resolution and the stem's stride as elastic dimensions of the supernet: the same
weights at another map size, so a subnet taken out at its resolution and stride computes what
the supernet computes there, and a training whose sandwich mixes shapes runs one traced step
per shape and learns."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from .test_progressive import _two_stages
from .test_supernet import _space


def _spatial(**supernet: Any) -> dict[str, Any]:
    space = _two_stages(**supernet) if supernet else _space()
    space["model"].update(stem_stride={"choice": [1, 2]}, resolution={"choice": [8, 12]})
    return space


def test_resolution_and_stem_stride_are_elastic_and_the_larger_network_has_the_smaller_stride() -> None:
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import dimension_of, elastic_space

    elastic = elastic_space(space_from_dict(_spatial()))
    assert {"resolution", "stem_stride"} <= set(elastic.elastic)
    assert (elastic.largest["stem_stride"], elastic.largest["resolution"]) == (1, 12)
    assert (elastic.smallest["stem_stride"], elastic.smallest["resolution"]) == (2, 8)
    # Opened first by progressive shrinking, the stride with the resolution.
    assert elastic.dimensions()[0] == "resolution" and dimension_of("stem_stride") == "resolution"
    assert elastic.closed(("kernel",))["stem_stride"] == 1


def test_a_subnet_at_its_resolution_and_stride_computes_what_the_supernet_computes_there() -> None:
    from nas.search.nets import count_flops, plan_network
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space
    from nas.search.strategies.supernet.extract import extract
    from nas.search.strategies.supernet.network import Supernet, spatial_of

    elastic = elastic_space(space_from_dict(_spatial()))
    space = elastic.space
    supernet = Supernet(space.candidate(elastic.largest, num_classes=10, channels=1), seed=0)
    rng = np.random.default_rng(3)
    for bn in supernet.bn.values():  # statistics that are not the identity
        bn.mean.assign(rng.normal(0, 0.2, bn.mean.shape).astype("float32"))
        bn.variance.assign(rng.uniform(0.5, 2.0, bn.mean.shape).astype("float32"))
    x = rng.random((5, 8, 8, 1)).astype("float32")
    shapes = set()
    for params in [elastic.largest, elastic.smallest] + [elastic.random_params(rng) for _ in range(8)]:
        candidate = space.candidate(params, num_classes=10, channels=1)
        plan = plan_network(candidate)
        subnet = extract(supernet, candidate)
        assert subnet.count_params() == plan.params() and count_flops(subnet) == plan.flops()
        expected = np.asarray(supernet(x, supernet.masks(plan), spatial=spatial_of(plan)))
        np.testing.assert_allclose(np.asarray(subnet(x, training=False)), expected, atol=1e-5)
        shapes.add(spatial_of(plan))
    assert len(shapes) >= 3
    # At another shape the supernet computes something else: the shape is not ignored.
    plan = plan_network(space.candidate(elastic.largest, num_classes=10, channels=1))
    masks = supernet.masks(plan)
    at_8 = np.asarray(supernet(x, masks, spatial=(8, 1)))
    assert not np.allclose(at_8, np.asarray(supernet(x, masks)), atol=1e-4)
    assert not np.allclose(at_8, np.asarray(supernet(x, masks, spatial=(8, 2))), atol=1e-4)


@pytest.mark.slow
def test_a_training_whose_sandwich_mixes_shapes_learns_and_the_random_subnets_share_one() -> None:
    import tempfile
    from pathlib import Path

    from nas.search.data import load_dataset
    from nas.search.nets import plan_network
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space
    from nas.search.strategies.supernet.network import Supernet, spatial_of
    from nas.search.strategies.supernet.train import SupernetTraining, train_supernet

    document = _spatial(epochs=1)
    document["dataset"]["subset"] = 300
    space = space_from_dict(document)
    data = load_dataset(space.spec.dataset)
    elastic = elastic_space(space)
    supernet = Supernet(elastic.space.candidate(elastic.largest, num_classes=10, channels=1), seed=0)
    sandwiches: list[list[tuple[int, int]]] = []
    stacked = supernet.stacked_masks

    def recorded(plans: list[Any]) -> dict[str, np.ndarray]:
        sandwiches.append([spatial_of(p) for p in plans])
        return stacked(plans)

    supernet.stacked_masks = recorded  # type: ignore[method-assign]
    before = supernet.get_state()
    with tempfile.TemporaryDirectory() as folder:
        training = train_supernet(supernet, elastic, data, SupernetTraining(1), Path(folder) / "s.npz", seed=0)
    assert all(s[0] == (12, 1) and s[1] == (8, 2) and s[2] == s[3] for s in sandwiches)
    assert len({s[2] for s in sandwiches}) >= 3  # the random pair's shape is drawn per step
    assert np.isfinite(training.history[0]["loss"])
    after = supernet.get_state()
    unchanged = [k for k in before if k.endswith("/0") and np.array_equal(before[k], after[k])]
    assert not unchanged, unchanged  # every kernel got a gradient
    assert plan_network(supernet.candidate).resolution == 12


@pytest.mark.slow
def test_the_step_sums_the_largests_loss_on_the_labels_and_the_others_distilled_or_on_the_labels() -> None:
    import keras

    from nas.search.nets import plan_network
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space
    from nas.search.strategies.supernet.network import Supernet, spatial_of
    from nas.search.strategies.supernet.steps import SandwichStep, draw_sandwich
    from nas.search.training.train import make_optimizer

    elastic = elastic_space(space_from_dict(_spatial(epochs=1)))  # two stages: cheaper graphs
    supernet = Supernet(elastic.space.candidate(elastic.largest, num_classes=10, channels=1), seed=0)

    def plan(params: dict[str, Any]) -> Any:
        return plan_network(elastic.space.candidate(params, num_classes=10, channels=1))

    rng = np.random.default_rng(0)
    x = rng.random((16, 8, 8, 1)).astype("float32")
    y = rng.integers(0, 10, 16).astype("int32")
    ends = (plan(elastic.largest), plan(elastic.smallest))
    for random, distill in ((0, True), (1, False), (3, True)):
        sandwich = draw_sandwich(elastic, rng, {}, ends, plan, random)
        assert len(sandwich) == random + 2
        optimizer = make_optimizer("sgd", 0.01, 10)
        optimizer.build(supernet.trainable_variables)
        step = SandwichStep(supernet, (8, 8, 1), optimizer, size=random + 2, distill=distill)
        outputs = [np.asarray(supernet(x, supernet.masks(p), training=True, spatial=spatial_of(p))) for p in sandwich]
        expected = float(np.mean(keras.losses.sparse_categorical_crossentropy(y, outputs[0])))
        for out in outputs[1:]:
            other = (
                keras.losses.kl_divergence(outputs[0], out)
                if distill
                else keras.losses.sparse_categorical_crossentropy(y, out)
            )
            expected += float(np.mean(other))
        loss, correct = step(x, y, sandwich)
        assert abs(float(loss) - expected) < 1e-4 * max(1.0, expected), (random, distill)
        assert correct.shape == (random + 2,)


def test_the_sandwich_settings_are_part_of_the_study_only_when_they_differ_from_their_defaults() -> None:
    from nas.search.space import space_from_dict

    def fingerprint(**supernet: Any) -> str:
        return space_from_dict(_space(supernet={"epochs": 3, **supernet})).fingerprint()

    before = fingerprint()
    # A study made before the settings existed was trained with their defaults and resumes:
    # at their defaults they are not in the fingerprint at all.
    assert not {"random_subnets", "distillation"} & set(json.loads(before)["search"]["supernet"])
    assert fingerprint(random_subnets=2, distillation="kl") == before
    assert len({before, fingerprint(random_subnets=3), fingerprint(distillation="labels")}) == 3
    assert fingerprint(budget_share=0.3) == before  # it decides nothing where the epochs are given
    assert fingerprint(epochs="auto", budget_share=0.3) != fingerprint(epochs="auto")

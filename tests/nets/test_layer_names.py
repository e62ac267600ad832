"""The plan owns every layer name and channel group: the builder makes exactly the layers it
names, each channel group is exactly the weight axes that change when its width does, and
pruning reads the plan's layer kinds. (The supernet's side is in tests/strategies/supernet/.)"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import optuna
import pytest

from nas.search import runtime

runtime.import_tensorflow()
import keras

from nas.search.nets import (
    ChannelGroup,
    NetworkPlan,
    build_plan,
    layer_kind,
    plan_network,
    pruned_plan,
    transfer,
)
from nas.search.space import load_space
from nas.search.training import prunable_kernels

FAMILY_PRESETS = ["mobilenet", "mobilenet_v3", "efficientnet", "efficientnet_v2", "efficientnet_lite"]
LAYER_KINDS = ["stem", "expand", "depthwise", "fused", "se", "project", "head", "classifier"]


def _plans(preset: str) -> list[NetworkPlan]:
    # Seeds 0-2 of every preset between them have blocks with and without expansion,
    # squeeze-and-excitation and stochastic depth, a resize and a hidden head layer.
    space = load_space(preset)
    plans = []
    for seed in range(3):
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed))
        plans.append(plan_network(space.sample(study.ask(), num_classes=10, channels=1)))
    return [*plans, replace(plans[0], dropout=0.0)]


def _shapes(model: keras.Model) -> dict[str, list[tuple[int, ...]]]:
    return {layer.name: [tuple(w.shape) for w in layer.weights] for layer in model.layers if layer.weights}


def _resized(net: NetworkPlan, group: ChannelGroup, size: int) -> NetworkPlan:
    """`net` with only `group` at another width (wider: a narrower one might drop a layer)."""
    if group.name == "head":
        return replace(net, head_ch=size)
    block, what = group.name.split("/")
    field = {"hidden": "hidden", "se": "se_ch"}[what]
    blocks = tuple(replace(b, **{field: size}) if b.name == block else b for b in net.blocks)
    return replace(net, blocks=blocks)


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
@pytest.mark.slow
def test_the_builder_makes_exactly_the_layers_the_plan_names(preset: str) -> None:
    for net in _plans(preset):
        model = build_plan(net)
        assert [layer.name for layer in model.layers] == list(net.layer_names())
        for b in net.blocks:
            own = [layer.name for layer in model.layers if layer.name.startswith(f"{b.name}_")]
            assert own == list(b.layer_names())
        kernels = {layer.name for layer in model.layers if hasattr(layer, "kernel")}
        assert kernels == set(net.kernel_kinds())


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
@pytest.mark.slow
def test_a_channel_group_is_exactly_the_weight_axes_its_width_changes(preset: str) -> None:
    for net in _plans(preset)[:2]:
        full = _shapes(build_plan(net))
        groups = net.channel_groups()
        assert {g.name for g in groups} >= {f"{b.name}/hidden" for b in net.blocks if b.expand}
        for group in groups:
            assert group.producer in group.spans and group.consumer in group.spans
            small = _shapes(build_plan(_resized(net, group, group.size + 1)))
            changed = {
                (layer, i, axis)
                for layer, shapes in full.items()
                for i, (a, b) in enumerate(zip(shapes, small[layer], strict=True))
                for axis in range(len(a))
                if a[axis] != b[axis]
            }
            assert changed == {(s.layer, s.weight, s.axis) for s in group.spans}, group.name
            for s in group.spans:
                assert full[s.layer][s.weight][s.axis] == group.size


@pytest.mark.parametrize("preset", FAMILY_PRESETS)
@pytest.mark.slow
def test_pruning_reads_the_layer_kinds_the_plan_declares(preset: str) -> None:
    for net in _plans(preset):
        model = build_plan(net)
        kinds = net.kernel_kinds()
        assert {name: layer_kind(name) for name in kinds} == kinds
        for kind in LAYER_KINDS:
            kept = {name for name, _ in prunable_kernels(model, [kind])}
            assert kept == {name for name, k in kinds.items() if k != kind}


def test_channel_pruning_slices_every_span_of_a_cut_group_by_the_producers_norms() -> None:
    net = _plans("efficientnet")[1]  # expansion and squeeze-and-excitation
    keras.utils.set_random_seed(0)
    full = build_plan(net)
    small_net = pruned_plan(net, 0.5)
    small = build_plan(small_net)
    transfer(full, small, net, small_net)
    cut = [(b, s) for b, s in zip(net.blocks, small_net.blocks, strict=True) if b.hidden != s.hidden]
    assert cut and any(b.se_ch for b, _ in cut)
    for b, s in cut:
        group = b.hidden_group()
        assert group is not None
        producer: Any = full.get_layer(group.producer.layer).get_weights()[group.producer.weight]
        norms = np.abs(np.moveaxis(producer, group.producer.axis, 0)).reshape(group.size, -1).sum(axis=1)
        kept = np.sort(np.argsort(norms)[-s.hidden :])
        for span in group.spans:
            mine = small.get_layer(span.layer).get_weights()[span.weight]
            theirs = full.get_layer(span.layer).get_weights()[span.weight]
            np.testing.assert_array_equal(mine, np.take(theirs, kept, axis=span.axis), err_msg=span.layer)

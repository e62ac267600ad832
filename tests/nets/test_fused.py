"""Fused-MBConv blocks (EfficientNetV2): the TF-free plan's parameters, FLOPs and layer names
equal the built Keras model's in every family's rules, with and without expansion, SE and a
residual connection."""

from __future__ import annotations

import pytest

from nas.search import runtime

runtime.import_tensorflow()
import keras

from nas.search.nets import build_plan, count_flops, plan_network
from nas.search.space import Candidate, StagePlan

STAGES = (
    StagePlan(16, 1, 2, 3, 1.0, True, block="fused"),  # no projection; SE on the output; a residual
    StagePlan(24, 2, 2, 5, 4.0, True, block="fused"),  # expands, SE, projects; then a residual
    StagePlan(24, 1, 1, 3, 1.0, False, block="fused"),  # expansion 1 with a residual
    StagePlan(40, 2, 2, 3, 4.0, True),  # MBConv after fused stages, as EfficientNetV2 does
)


def _candidate(family: str) -> Candidate:
    return Candidate(
        num_classes=10,
        image_size=28,
        channels=1,
        width_multiplier=1.0,
        stem_filters=16,
        stem_stride=1,
        head_filters=64,
        dropout=0.1,
        stages=STAGES,
        epochs=1,
        batch_size=32,
        optimizer="adam",
        learning_rate=1e-3,
        family=family,
        activation="swish",
        drop_connect_rate=0.2,
        head_hidden=32 if family == "mobilenet_v3" else 0,
    )


@pytest.mark.parametrize("family", ["mobilenet_v2", "mobilenet_v3", "efficientnet_v2"])
def test_a_fused_networks_plan_equals_the_built_model(family: str) -> None:
    net = plan_network(_candidate(family))
    fused = [b for b in net.blocks if b.fused]
    assert [b.name for b in fused] == ["s0f0", "s0f1", "s1f0", "s1f1", "s2f0"]
    assert {b.expand for b in fused} == {True, False} and any(b.residual for b in fused)
    model = build_plan(net)
    assert [layer.name for layer in model.layers] == list(net.layer_names())
    assert model.count_params() == net.params()
    assert count_flops(model) == net.flops()
    for b in fused:
        conv = model.get_layer(b.layers.fused.conv)
        assert isinstance(conv, keras.layers.Conv2D) and not isinstance(conv, keras.layers.DepthwiseConv2D)
        assert conv.kernel_size == (b.kernel, b.kernel) and conv.strides == (b.stride, b.stride)
        # Expansion 1: one kxk convolution to the output width, no projection.
        assert conv.filters == (b.hidden if b.expand else b.out_ch)
        assert (b.layers.project.conv in {layer.name for layer in model.layers}) == b.expand
    keras.backend.clear_session()

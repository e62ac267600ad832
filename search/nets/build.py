"""Build the Keras network of a Candidate, block by block as plan.plan_network lays it out,
with the layer names the plan gives.

Only built-in Keras layers are used (stochastic depth is Keras' Dropout with one mask value
per image, as in keras.applications' EfficientNet), so saved `.keras` files load back with
`safe_mode=True` and need nothing from this package.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import layers

from nas.search.nets.plan import (
    BN_EPSILON,
    BN_MOMENTUM,
    DROPOUT,
    HEAD_HIDDEN,
    INPUT,
    LOGITS,
    POOL,
    RESIZE,
    BlockPlan,
    ConvBN,
    NetworkPlan,
    make_divisible,
    plan_network,
)
from nas.search.space import Candidate

# BN_MOMENTUM stays importable from here for the benchmarks that build their own networks.
__all__ = ["BN_MOMENTUM", "build_model", "build_plan", "count_flops", "make_divisible"]


def _bn(x: Any, name: str) -> Any:
    return layers.BatchNormalization(momentum=BN_MOMENTUM, epsilon=BN_EPSILON, name=name)(x)


def _conv_bn(x: Any, filters: int, kernel: int, stride: int, names: ConvBN, activation: str | None) -> Any:
    x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, name=names.conv)(x)
    x = _bn(x, names.bn)
    return layers.Activation(activation, name=names.act)(x) if activation else x


def _squeeze_excite(x: Any, b: BlockPlan, net: NetworkPlan) -> Any:
    assert net.gate is not None
    n = b.layers
    s = layers.GlobalAveragePooling2D(keepdims=True, name=n.se_pool)(x)
    s = layers.Conv2D(b.se_ch, 1, activation=net.se_activation or b.activation, name=n.se_reduce)(s)
    s = layers.Conv2D(b.hidden, 1, activation=net.gate, name=n.se_expand)(s)
    return layers.Multiply(name=n.se_scale)([x, s])


def _block(x: Any, b: BlockPlan, net: NetworkPlan) -> Any:
    n = b.layers
    shortcut = x
    if b.fused:
        x = _conv_bn(x, b.hidden, b.kernel, b.stride, n.fused, b.activation)
    else:
        if b.expand:
            x = _conv_bn(x, b.hidden, 1, 1, n.expand, b.activation)
        x = layers.DepthwiseConv2D(b.kernel, strides=b.stride, padding="same", use_bias=False, name=n.dw.conv)(x)
        x = layers.Activation(b.activation, name=n.dw.act)(_bn(x, n.dw.bn))
    if b.se_ch:
        x = _squeeze_excite(x, b, net)
    if b.projects:
        # Linear bottleneck: no activation after the projection.
        x = _conv_bn(x, b.out_ch, 1, 1, n.project, None)
    if b.residual:
        if b.drop_rate > 0:
            x = layers.Dropout(b.drop_rate, noise_shape=(None, 1, 1, 1), name=n.drop)(x)
        x = layers.Add(name=n.add)([shortcut, x])
    return x


def build_plan(net: NetworkPlan) -> keras.Model:
    inputs = keras.Input((net.input_size, net.input_size, net.channels), name=INPUT)
    x = inputs
    if net.resolution != net.input_size:
        # Resizing inside the model: the data is decoded once, at one size, for every candidate.
        x = layers.Resizing(net.resolution, net.resolution, name=RESIZE)(x)
    x = _conv_bn(x, net.stem_ch, 3, net.stem_stride, net.stem, net.activation)
    for b in net.blocks:
        x = _block(x, b, net)
    x = _conv_bn(x, net.head_ch, 1, 1, net.head, net.activation)
    x = layers.GlobalAveragePooling2D(name=POOL)(x)
    if net.head_hidden:
        x = layers.Dense(net.head_hidden, activation=net.activation, name=HEAD_HIDDEN)(x)
    if net.dropout > 0:
        x = layers.Dropout(net.dropout, name=DROPOUT)(x)
    # float32 output keeps the softmax stable under mixed precision policies.
    outputs = layers.Dense(net.classes, activation="softmax", dtype="float32", name=LOGITS)(x)
    return keras.Model(inputs, outputs, name=net.family)


def build_model(c: Candidate, *, seed: int | None = None) -> keras.Model:
    """The network of `c`; with a seed, its initial weights are reproducible too."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
    return build_plan(plan_network(c))


def count_flops(model: keras.Model) -> int:
    """FLOPs of a built model from its layer shapes (2 x multiply-accumulates of convolutions
    and dense layers): an independent check of NetworkPlan.flops, and usable on any model."""
    total = 0
    for layer in model.layers:
        if isinstance(layer, layers.DepthwiseConv2D):
            _, h, w, c = layer.output.shape
            kh, kw = layer.kernel_size
            total += 2 * h * w * c * kh * kw
        elif isinstance(layer, layers.Conv2D):
            _, h, w, cout = layer.output.shape
            cin = layer.input.shape[-1]
            kh, kw = layer.kernel_size
            total += 2 * h * w * cout * kh * kw * cin // layer.groups
        elif isinstance(layer, layers.Dense):
            total += 2 * layer.input.shape[-1] * layer.units
    return int(total)

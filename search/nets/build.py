"""Build the Keras network of a Candidate, block by block as arch.plan_network lays it out.

Only built-in Keras layers are used (stochastic depth is Keras' Dropout with one mask value
per image, as in keras.applications' EfficientNet), so saved `.keras` files load back with
`safe_mode=True` and need nothing from this package.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import layers

from nas.search.nets.plan import BlockPlan, NetworkPlan, make_divisible, plan_network
from nas.search.space import Candidate

__all__ = ["build_model", "build_plan", "count_flops", "make_divisible"]

# Keras' default BatchNormalization momentum (0.99) leaves the moving statistics unsettled
# after the few hundred steps a search trial trains for (validation accuracy 0.10 was seen on
# digits after 5 epochs; 0.96 with 0.9).
BN_MOMENTUM = 0.9


def _act(x: Any, activation: str, name: str) -> Any:
    return layers.Activation(activation, name=f"{name}_{activation}")(x)


def _conv_bn(x: Any, filters: int, kernel: int, stride: int, name: str, activation: str | None) -> Any:
    x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, name=f"{name}_conv")(x)
    x = layers.BatchNormalization(momentum=BN_MOMENTUM, name=f"{name}_bn")(x)
    return _act(x, activation, name) if activation else x


def _squeeze_excite(x: Any, b: BlockPlan, net: NetworkPlan) -> Any:
    assert net.gate is not None
    s = layers.GlobalAveragePooling2D(keepdims=True, name=f"{b.name}_se_pool")(x)
    s = layers.Conv2D(b.se_ch, 1, activation=net.se_activation or b.activation, name=f"{b.name}_se_reduce")(s)
    s = layers.Conv2D(b.hidden, 1, activation=net.gate, name=f"{b.name}_se_expand")(s)
    return layers.Multiply(name=f"{b.name}_se_scale")([x, s])


def _block(x: Any, b: BlockPlan, net: NetworkPlan) -> Any:
    shortcut = x
    if b.expand:
        x = _conv_bn(x, b.hidden, 1, 1, f"{b.name}_expand", b.activation)
    x = layers.DepthwiseConv2D(b.kernel, strides=b.stride, padding="same", use_bias=False, name=f"{b.name}_dw")(x)
    x = layers.BatchNormalization(momentum=BN_MOMENTUM, name=f"{b.name}_dw_bn")(x)
    x = _act(x, b.activation, f"{b.name}_dw")
    if b.se_ch:
        x = _squeeze_excite(x, b, net)
    # Linear bottleneck: no activation after the projection.
    x = _conv_bn(x, b.out_ch, 1, 1, f"{b.name}_project", None)
    if b.residual:
        if b.drop_rate > 0:
            x = layers.Dropout(b.drop_rate, noise_shape=(None, 1, 1, 1), name=f"{b.name}_drop")(x)
        x = layers.Add(name=f"{b.name}_add")([shortcut, x])
    return x


def build_plan(net: NetworkPlan) -> keras.Model:
    inputs = keras.Input((net.input_size, net.input_size, net.channels), name="image")
    x = inputs
    if net.resolution != net.input_size:
        # Resizing inside the model: the data is decoded once, at one size, for every candidate.
        x = layers.Resizing(net.resolution, net.resolution, name="resize")(x)
    x = _conv_bn(x, net.stem_ch, 3, net.stem_stride, "stem", net.activation)
    for b in net.blocks:
        x = _block(x, b, net)
    x = _conv_bn(x, net.head_ch, 1, 1, "head", net.activation)
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    if net.head_hidden:
        x = layers.Dense(net.head_hidden, activation=net.activation, name="head_hidden")(x)
    if net.dropout > 0:
        x = layers.Dropout(net.dropout, name="dropout")(x)
    # float32 output keeps the softmax stable under mixed precision policies.
    outputs = layers.Dense(net.classes, activation="softmax", dtype="float32", name="logits")(x)
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

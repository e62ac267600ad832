"""Build a MobileNetV2-style Keras network from a Candidate, and count its params and FLOPs."""

from __future__ import annotations

from typing import Any

import keras
from keras import layers

from .space import Candidate

# Keras' default BatchNormalization momentum (0.99) leaves the moving statistics unsettled
# after the few hundred steps a search trial trains for (validation accuracy 0.10 was seen on
# digits after 5 epochs; 0.96 with 0.9).
BN_MOMENTUM = 0.9


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round a channel count to a multiple of `divisor` without losing more than 10%."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


def _conv_bn(x: Any, filters: int, kernel: int, stride: int, name: str, act: bool = True) -> Any:
    x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False, name=f"{name}_conv")(x)
    x = layers.BatchNormalization(momentum=BN_MOMENTUM, name=f"{name}_bn")(x)
    if act:
        x = layers.ReLU(6.0, name=f"{name}_relu6")(x)
    return x


def _squeeze_excite(x: Any, channels: int, name: str) -> Any:
    squeezed = make_divisible(channels * 0.25)
    s = layers.GlobalAveragePooling2D(keepdims=True, name=f"{name}_se_pool")(x)
    s = layers.Conv2D(squeezed, 1, activation="relu", name=f"{name}_se_reduce")(s)
    s = layers.Conv2D(channels, 1, activation="hard_sigmoid", name=f"{name}_se_expand")(s)
    return layers.Multiply(name=f"{name}_se_scale")([x, s])


def _inverted_residual(
    x: Any, in_ch: int, out_ch: int, expansion: int, kernel: int, stride: int, se: bool, name: str
) -> Any:
    shortcut = x
    hidden = in_ch * expansion
    if expansion != 1:
        x = _conv_bn(x, hidden, 1, 1, f"{name}_expand")
    x = layers.DepthwiseConv2D(kernel, strides=stride, padding="same", use_bias=False, name=f"{name}_dw")(x)
    x = layers.BatchNormalization(momentum=BN_MOMENTUM, name=f"{name}_dw_bn")(x)
    x = layers.ReLU(6.0, name=f"{name}_dw_relu6")(x)
    if se:
        x = _squeeze_excite(x, hidden, name)
    # Linear bottleneck: no activation after the projection (MobileNetV2).
    x = _conv_bn(x, out_ch, 1, 1, f"{name}_project", act=False)
    if stride == 1 and in_ch == out_ch:
        x = layers.Add(name=f"{name}_add")([shortcut, x])
    return x


def build_model(c: Candidate, *, seed: int | None = None) -> keras.Model:
    """The network of `c`; with a seed, its initial weights are reproducible too."""
    if seed is not None:
        keras.utils.set_random_seed(seed)
    inputs = keras.Input((c.image_size, c.image_size, c.channels), name="image")
    channels = make_divisible(c.stem_filters * c.width_multiplier)
    x = _conv_bn(inputs, channels, 3, c.stem_stride, "stem")
    for s, stage in enumerate(c.stages):
        out_ch = make_divisible(stage.filters * c.width_multiplier)
        for b in range(stage.depth):
            stride = stage.stride if b == 0 else 1
            x = _inverted_residual(x, channels, out_ch, stage.expansion, stage.kernel, stride, stage.se, f"s{s}b{b}")
            channels = out_ch
    # Like MobileNetV2, the head is never made narrower than configured.
    head = max(c.head_filters, make_divisible(c.head_filters * c.width_multiplier))
    x = _conv_bn(x, head, 1, 1, "head")
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    if c.dropout > 0:
        x = layers.Dropout(c.dropout, name="dropout")(x)
    # float32 output keeps the softmax stable under mixed precision policies.
    outputs = layers.Dense(c.num_classes, activation="softmax", dtype="float32", name="logits")(x)
    return keras.Model(inputs, outputs, name="mbconv_net")


def count_flops(model: keras.Model) -> int:
    """FLOPs of one forward pass of one image: 2 x multiply-accumulates of conv and dense layers.

    Counted from the layer shapes rather than by profiling a graph, so the figure is exact,
    cheap and the same on every device; BN, activations and pooling (well under 1% here) are
    left out, as in the MobileNet and EfficientNet papers.
    """
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

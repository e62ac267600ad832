"""The network a Candidate describes, worked out block by block without TensorFlow.

The Keras builder (model.py) lays out exactly these blocks, and params, FLOPs and size are
summed from them here. So static constraints are checked in microseconds, before any model
exists, and `nas space show` needs no TensorFlow; tests check both sums against Keras.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nas.search.space import FAMILIES, Candidate


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round a channel count to a multiple of `divisor` without losing more than 10%."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


def repeats(depth: int, multiplier: float) -> int:
    # round() first: 2 x 1.1 must give 3 (ceil 2.2), but 3 x (1.2 ** 0) must stay 3.
    return max(1, math.ceil(round(depth * multiplier, 6)))


@dataclass(frozen=True)
class BlockPlan:
    name: str
    in_ch: int
    hidden: int  # == in_ch when there is no expansion convolution
    out_ch: int
    kernel: int
    stride: int
    se_ch: int  # 0: no squeeze-and-excitation
    activation: str
    residual: bool
    drop_rate: float  # stochastic depth of the residual branch
    in_size: int  # spatial size of the block's input
    expand: bool = True  # False: no expansion convolution (expansion 1), hidden == in_ch

    @property
    def out_size(self) -> int:
        return math.ceil(self.in_size / self.stride)

    def params(self) -> int:
        # Convolutions have no bias before a BatchNormalization; BN holds 4 numbers per channel.
        n = (self.in_ch * self.hidden + 4 * self.hidden) if self.expand else 0
        n += self.kernel * self.kernel * self.hidden + 4 * self.hidden
        if self.se_ch:
            n += self.hidden * self.se_ch + self.se_ch + self.se_ch * self.hidden + self.hidden
        return n + self.hidden * self.out_ch + 4 * self.out_ch

    def flops(self) -> int:
        n = 2 * self.in_size**2 * self.in_ch * self.hidden if self.expand else 0
        n += 2 * self.out_size**2 * self.kernel**2 * self.hidden
        n += 4 * self.hidden * self.se_ch
        return n + 2 * self.out_size**2 * self.hidden * self.out_ch


@dataclass(frozen=True)
class NetworkPlan:
    family: str
    input_size: int  # what the data is decoded at
    channels: int
    resolution: int  # what the network runs at (resized inside the model)
    stem_ch: int
    stem_stride: int
    activation: str
    gate: str | None
    se_activation: str | None
    blocks: tuple[BlockPlan, ...]
    head_ch: int
    head_hidden: int
    dropout: float
    classes: int

    @property
    def stem_size(self) -> int:
        return math.ceil(self.resolution / self.stem_stride)

    @property
    def last_size(self) -> int:
        return self.blocks[-1].out_size if self.blocks else self.stem_size

    def params(self) -> int:
        """Parameter count, non-trainable BN statistics included (what Keras' count_params says)."""
        n = 9 * self.channels * self.stem_ch + 4 * self.stem_ch
        n += sum(b.params() for b in self.blocks)
        last = self.blocks[-1].out_ch if self.blocks else self.stem_ch
        n += last * self.head_ch + 4 * self.head_ch
        features = self.head_ch
        if self.head_hidden:
            n += self.head_ch * self.head_hidden + self.head_hidden
            features = self.head_hidden
        return n + features * self.classes + self.classes

    def flops(self) -> int:
        """FLOPs of one image: 2 x multiply-accumulates of convolutions and dense layers; BN,
        activations, pooling and resizing (well under 1%) are left out, as in the papers."""
        n = 2 * self.stem_size**2 * 9 * self.channels * self.stem_ch
        n += sum(b.flops() for b in self.blocks)
        last = self.blocks[-1].out_ch if self.blocks else self.stem_ch
        n += 2 * self.last_size**2 * last * self.head_ch
        features = self.head_ch
        if self.head_hidden:
            n += 2 * self.head_ch * self.head_hidden
            features = self.head_hidden
        return n + 2 * features * self.classes

    def weight_bytes(self) -> int:
        """Size of the weights as stored (float32 variables, also under mixed precision)."""
        return 4 * self.params()


def plan_network(c: Candidate) -> NetworkPlan:
    rules = FAMILIES[c.family]
    w = c.width_multiplier
    resolution = c.resolution or c.image_size
    stem = make_divisible(c.stem_filters * w) if rules.scale_stem else c.stem_filters
    size = math.ceil(resolution / c.stem_stride)
    total = sum(repeats(s.depth, c.depth_multiplier) for s in c.stages)
    blocks: list[BlockPlan] = []
    in_ch = stem
    for si, stage in enumerate(c.stages):
        out_ch = make_divisible(stage.filters * w)
        for b in range(repeats(stage.depth, c.depth_multiplier)):
            stride = stage.stride if b == 0 else 1
            hidden = make_divisible(in_ch * stage.expansion) if stage.expansion != 1 else in_ch
            se_ch = 0
            if stage.se and rules.gate is not None:
                base = in_ch if rules.se_base == "input" else hidden
                # EfficientNet truncates the SE width; the MobileNets round it to a multiple of 8.
                se_ch = (
                    max(1, int(base * stage.se_ratio))
                    if rules.se_base == "input"
                    else make_divisible(base * stage.se_ratio)
                )
            residual = stride == 1 and in_ch == out_ch
            drop = c.drop_connect_rate * len(blocks) / total if residual else 0.0
            block = BlockPlan(
                f"s{si}b{b}",
                in_ch,
                hidden,
                out_ch,
                stage.kernel,
                stride,
                se_ch,
                stage.activation,
                residual,
                drop,
                size,
                expand=stage.expansion != 1,
            )
            blocks.append(block)
            size, in_ch = block.out_size, out_ch
    if rules.head == "fixed":
        head = c.head_filters
    elif rules.head == "scaled":
        head = make_divisible(c.head_filters * w)
    else:
        head = max(c.head_filters, make_divisible(c.head_filters * w))
    return NetworkPlan(
        family=c.family,
        input_size=c.image_size,
        channels=c.channels,
        resolution=resolution,
        stem_ch=stem,
        stem_stride=c.stem_stride,
        activation=c.activation,
        gate=rules.gate,
        se_activation=rules.se_activation,
        blocks=tuple(blocks),
        head_ch=head,
        head_hidden=c.head_hidden,
        dropout=c.dropout,
        classes=c.num_classes,
    )

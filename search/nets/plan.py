"""The network a Candidate describes, worked out block by block without TensorFlow.

The Keras builder (build.py) lays out exactly these blocks, and params, FLOPs and size are
summed from them here. So static constraints are checked in microseconds, before any model
exists, and `nas space show` needs no TensorFlow; tests check both sums against Keras.

A plan also owns the names of its layers and its channel groups (which weight axes carry
the same channels). The builder, the supernet, channel pruning and unstructured pruning all
read them here, so a block's layout is spelled once. Stored weights load by these names:
they never change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nas.search.space import FAMILIES, Candidate

# Keras' default BatchNormalization momentum (0.99) leaves the moving statistics unsettled
# after the few hundred steps a search trial trains for (validation accuracy 0.10 was seen on
# digits after 5 epochs; 0.96 with 0.9). The builder and the supernet's own forward pass
# must normalize alike, so both read these.
BN_MOMENTUM = 0.9
BN_EPSILON = 1e-3  # Keras' default, spelled out so that the supernet's arithmetic matches it

# Layers of the network outside the blocks.
INPUT, RESIZE, POOL, HEAD_HIDDEN, DROPOUT, LOGITS = "image", "resize", "pool", "head_hidden", "dropout", "logits"


@dataclass(frozen=True)
class ConvBN:
    """A convolution, its BatchNormalization and its activation (None: linear)."""

    conv: str
    bn: str
    act: str | None

    @classmethod
    def named(cls, prefix: str, activation: str | None) -> ConvBN:
        # The activation layer is named after its function (`stem_relu6`).
        return cls(f"{prefix}_conv", f"{prefix}_bn", f"{prefix}_{activation}" if activation else None)

    def names(self) -> tuple[str, ...]:
        return (self.conv, self.bn) if self.act is None else (self.conv, self.bn, self.act)


@dataclass(frozen=True)
class BlockLayers:
    """Every layer name a block can have; BlockPlan.layer_names says which it has."""

    expand: ConvBN
    dw: ConvBN
    fused: ConvBN  # a fused block's regular kxk convolution
    se_pool: str
    se_reduce: str
    se_expand: str
    se_scale: str
    project: ConvBN
    drop: str
    add: str

    @classmethod
    def of(cls, block: str, activation: str) -> BlockLayers:
        return cls(
            expand=ConvBN.named(f"{block}_expand", activation),
            dw=ConvBN(f"{block}_dw", f"{block}_dw_bn", f"{block}_dw_{activation}"),
            fused=ConvBN.named(f"{block}_fused", activation),
            se_pool=f"{block}_se_pool",
            se_reduce=f"{block}_se_reduce",
            se_expand=f"{block}_se_expand",
            se_scale=f"{block}_se_scale",
            project=ConvBN.named(f"{block}_project", None),
            drop=f"{block}_drop",
            add=f"{block}_add",
        )

    def kernel_kinds(self) -> dict[str, str]:
        """The layers with a kernel and their layer kind, what a space's `pruning.exclude`
        names them by."""
        kinds = {self.expand.conv: "expand", self.dw.conv: "depthwise", self.fused.conv: "fused"}
        return {**kinds, self.se_reduce: "se", self.se_expand: "se", self.project.conv: "project"}


@dataclass(frozen=True)
class Span:
    """One weight axis a channel group runs along: weight `weight` of layer `layer` (in
    Keras' get_weights order; the BatchNorm's 0-3 are gamma, beta, mean, variance)."""

    layer: str
    weight: int
    axis: int


@dataclass(frozen=True)
class ChannelGroup:
    """Channels that move together when a width is sliced, sorted or pruned: cutting one of
    them means cutting it on every span. `producer` is the kernel that computes the channels
    (filter pruning ranks by it, Li et al. 2017), `consumer` the kernel that reads them
    (Once-for-All ranks by it); both are among the spans."""

    name: str
    size: int
    spans: tuple[Span, ...]
    producer: Span
    consumer: Span


def _bn_spans(layer: str) -> tuple[Span, ...]:
    return tuple(Span(layer, i, 0) for i in range(4))


def layer_kind(name: str) -> str:
    """The kind of a built network's kernel layer (stem, expand, depthwise, fused, se, project,
    head, classifier), read back from its name: what pruning's `exclude` is matched against."""
    # Unstructured pruning is handed a model, not its plan: the block is read from the name's
    # first part (block names hold no "_"), the kind from that block's names.
    if name.startswith("stem"):
        return "stem"
    kind = BlockLayers.of(name.split("_", 1)[0], "").kernel_kinds().get(name)
    return kind or ("classifier" if name == LOGITS else "head")


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round a channel count to a multiple of `divisor` without losing more than 10%."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    if rounded < 0.9 * value:
        rounded += divisor
    return rounded


def repeats(depth: int, multiplier: float) -> int:
    # round() first: 2 x 1.1 must give 3 (ceil 2.2), but 3 x (1.2 ** 0) must stay 3.
    return max(1, math.ceil(round(depth * multiplier, 6)))


def block_name(stage: int, index: int, block: str) -> str:
    """`s2b0` for an MBConv block, `s2f0` for a fused one: the two types of one position hold
    different weights (a supernet keeps both), so their layers are named apart. No "_" in it."""
    return f"s{stage}{'f' if block == 'fused' else 'b'}{index}"


def block_position(name: str) -> tuple[int, int]:
    """(stage, index in the stage) of a block name: where MBConv and fused blocks of one
    network's position are the same place."""
    stage, _, index = name[1:].partition("f") if "f" in name else name[1:].partition("b")
    return int(stage), int(index)


@dataclass(frozen=True)
class BlockPlan:
    """One block. MBConv: 1x1 expansion (when `expand`), kxk depthwise, SE, 1x1 projection.
    Fused: a regular kxk convolution to the hidden width, SE, 1x1 projection; without `expand`
    the kxk convolution goes straight to the output width (with its activation) and there is
    no projection, as in EfficientNetV2 and timm."""

    name: str
    in_ch: int
    hidden: int  # mbconv: == in_ch without expansion; fused: == out_ch without expansion
    out_ch: int
    kernel: int
    stride: int
    se_ch: int  # 0: no squeeze-and-excitation
    activation: str
    residual: bool
    drop_rate: float  # stochastic depth of the residual branch
    in_size: int  # spatial size of the block's input
    expand: bool = True  # False: expansion 1 (mbconv: no expansion convolution; fused: no projection)
    block: str = "mbconv"

    @property
    def fused(self) -> bool:
        return self.block == "fused"

    @property
    def projects(self) -> bool:
        """Whether the block ends in a 1x1 projection (all but a fused block of expansion 1)."""
        return not self.fused or self.expand

    @property
    def out_size(self) -> int:
        return math.ceil(self.in_size / self.stride)

    @property
    def layers(self) -> BlockLayers:
        return BlockLayers.of(self.name, self.activation)

    def layer_names(self) -> tuple[str, ...]:
        """The names of the layers this block has, in the order the builder adds them."""
        n = self.layers
        convs = n.fused.names() if self.fused else (*(n.expand.names() if self.expand else ()), *n.dw.names())
        names = list(convs)
        if self.se_ch:
            names += [n.se_pool, n.se_reduce, n.se_expand, n.se_scale]
        if self.projects:
            names += n.project.names()
        if self.residual:
            names += [n.drop, n.add] if self.drop_rate > 0 else [n.add]
        return tuple(names)

    def kernel_kinds(self) -> dict[str, str]:
        """Each of this block's layers with a kernel, and its layer kind (pruning's `exclude`)."""
        names = set(self.layer_names())
        return {name: kind for name, kind in self.layers.kernel_kinds().items() if name in names}

    def hidden_group(self) -> ChannelGroup | None:
        """The expanded channels, from the expansion (or fused) convolution through the
        depthwise one (and squeeze-and-excitation) to the projection's input; None without an
        expansion, where they are the block's input or output, tied to the residual stream."""
        if not self.expand:
            return None
        n = self.layers
        first = n.fused if self.fused else n.expand
        consumer, producer = Span(n.project.conv, 0, 2), Span(first.conv, 0, 3)
        se = (Span(n.se_reduce, 0, 2), Span(n.se_expand, 0, 3), Span(n.se_expand, 1, 0)) if self.se_ch else ()
        dw = () if self.fused else (Span(n.dw.conv, 0, 2), *_bn_spans(n.dw.bn))
        spans = (consumer, producer, *_bn_spans(first.bn), *dw, *se)
        return ChannelGroup(f"{self.name}/hidden", self.hidden, spans, producer, consumer)

    def se_group(self) -> ChannelGroup | None:
        """The squeeze-and-excitation's reduced channels; None without one."""
        if not self.se_ch:
            return None
        n = self.layers
        consumer, producer = Span(n.se_expand, 0, 2), Span(n.se_reduce, 0, 3)
        spans = (consumer, producer, Span(n.se_reduce, 1, 0))
        return ChannelGroup(f"{self.name}/se", self.se_ch, spans, producer, consumer)

    def channel_groups(self) -> tuple[ChannelGroup, ...]:
        return tuple(g for g in (self.hidden_group(), self.se_group()) if g is not None)

    def params(self) -> int:
        # Convolutions have no bias before a BatchNormalization; BN holds 4 numbers per channel.
        if self.fused:
            n = self.kernel * self.kernel * self.in_ch * self.hidden + 4 * self.hidden
        else:
            n = (self.in_ch * self.hidden + 4 * self.hidden) if self.expand else 0
            n += self.kernel * self.kernel * self.hidden + 4 * self.hidden
        if self.se_ch:
            n += self.hidden * self.se_ch + self.se_ch + self.se_ch * self.hidden + self.hidden
        return n + (self.hidden * self.out_ch + 4 * self.out_ch if self.projects else 0)

    def flops(self) -> int:
        if self.fused:
            n = 2 * self.out_size**2 * self.kernel**2 * self.in_ch * self.hidden
        else:
            n = 2 * self.in_size**2 * self.in_ch * self.hidden if self.expand else 0
            n += 2 * self.out_size**2 * self.kernel**2 * self.hidden
        n += 4 * self.hidden * self.se_ch
        return n + (2 * self.out_size**2 * self.hidden * self.out_ch if self.projects else 0)


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

    @property
    def stem(self) -> ConvBN:
        return ConvBN.named("stem", self.activation)

    @property
    def head(self) -> ConvBN:
        return ConvBN.named("head", self.activation)

    def layer_names(self) -> tuple[str, ...]:
        """Every layer of the built network, in the builder's order."""
        names = [INPUT, *([RESIZE] if self.resolution != self.input_size else []), *self.stem.names()]
        for b in self.blocks:
            names += b.layer_names()
        names += [*self.head.names(), POOL, *([HEAD_HIDDEN] if self.head_hidden else [])]
        return (*names, *([DROPOUT] if self.dropout > 0 else []), LOGITS)

    def kernel_kinds(self) -> dict[str, str]:
        """Each layer with a kernel and its layer kind (pruning's `exclude`)."""
        kinds = {self.stem.conv: "stem"}
        for b in self.blocks:
            kinds.update(b.kernel_kinds())
        kinds[self.head.conv] = "head"
        if self.head_hidden:
            kinds[HEAD_HIDDEN] = "head"
        return {**kinds, LOGITS: "classifier"}

    def channel_groups(self) -> tuple[ChannelGroup, ...]:
        """Every channel group whose channels can be reordered or cut without touching another
        layer: the blocks' (BlockPlan.channel_groups) and the head's. The stem's and blocks'
        output channels are not among them: residual connections tie them across blocks."""
        groups = [g for b in self.blocks for g in b.channel_groups()]
        reader = HEAD_HIDDEN if self.head_hidden else LOGITS
        consumer, producer = Span(reader, 0, 0), Span(self.head.conv, 0, 3)
        spans = (consumer, producer, *_bn_spans(self.head.bn))
        return (*groups, ChannelGroup("head", self.head_ch, spans, producer, consumer))

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
        fused = stage.block == "fused"
        for b in range(repeats(stage.depth, c.depth_multiplier)):
            stride = stage.stride if b == 0 else 1
            # Without expansion the hidden width is the kxk convolution's: the input (mbconv's
            # depthwise) or the output (fused).
            hidden = make_divisible(in_ch * stage.expansion) if stage.expansion != 1 else out_ch if fused else in_ch
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
                block_name(si, b, stage.block),
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
                block=stage.block,
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

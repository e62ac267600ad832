"""The supernet: the largest network of an elastic space, run as any of its subnets.

One set of weights, shaped as the largest plan (and, where a stage's block type is searched,
as the largest plan of each type: MBConv and fused blocks of a position hold their own weights,
named apart). A subnet is given as masks: ones on the first k channels of each layer, a kernel
mask that keeps the centre of the largest kernel, and 0/1 switches for the blocks past a
stage's depth, for each stage's block type, for squeeze-and-excitation and for residual
connections. The forward pass cuts every weight to the counts the masks give (the first k
channels, sizes computed inside the graph) and skips what the switches turn off, so the
supernet in a configuration computes what the extracted subnet (extract.py) computes, at that
subnet's cost: a narrow or shallow subnet is not computed at the largest's width (1.8x faster
sandwich steps than masking the largest's channels, RESULTS.md "Supernet step"). The masks are
tensors of fixed shapes, so one traced training step serves every subnet of a spatial shape;
the resolution and the stem's stride (`Spatial`) change no weight, only the size of every map,
so they are plain arguments of the forward pass (a traced step per shape). The forward pass is
written on TensorFlow's ops because Keras layers cannot take per-call channel counts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import keras
import numpy as np

from nas.search.nets import (
    BN_EPSILON,
    BN_MOMENTUM,
    HEAD_HIDDEN,
    LOGITS,
    RESIZE,
    BlockPlan,
    ConvBN,
    NetworkPlan,
    block_position,
    plan_network,
)
from nas.search.runtime import import_tensorflow
from nas.search.space import Candidate
from nas.search.strategies.supernet.elastic import ElasticSpace

# (resolution, stem stride) a subnet runs at.
Spatial = tuple[int, int]


def spatial_of(plan: NetworkPlan) -> Spatial:
    return (plan.resolution, plan.stem_stride)


@dataclass(frozen=True)
class _BN:
    gamma: Any
    beta: Any
    mean: Any
    variance: Any

    def weights(self) -> list[Any]:
        # Keras' BatchNormalization.get_weights order.
        return [self.gamma, self.beta, self.mean, self.variance]


def _type_flag(stage: int) -> str:
    return f"stage{stage}/fused"


def _masks_of(largest: NetworkPlan, positions: list[list[BlockPlan]], plan: NetworkPlan) -> dict[str, np.ndarray]:
    """Masks that make the largest plan compute `plan` (same family and stages). `positions`
    holds each block position's blocks, one per type the supernet holds."""

    def first(n: int, size: int, what: str) -> np.ndarray:
        if n > size:
            raise ValueError(f"{what}: {n} channels, more than the supernet's {size}")
        return (np.arange(size) < n).astype(np.float32)

    out = {"stem": first(plan.stem_ch, largest.stem_ch, "stem"), "head": first(plan.head_ch, largest.head_ch, "head")}
    if largest.head_hidden:
        out["head_hidden"] = first(plan.head_hidden, largest.head_hidden, "head_hidden")
    chosen = {block_position(b.name): b for b in plan.blocks}
    for stage in sorted({block_position(alts[0].name)[0] for alts in positions if len(alts) > 1}):
        fused = any(b.fused for (s, _), b in chosen.items() if s == stage)
        out[_type_flag(stage)] = np.array(1.0 if fused else 0.0, np.float32)
    for big in (b for alts in positions for b in alts):
        b = chosen.get(block_position(big.name))
        # Past the subnet's depth the position passes its input on; a block of the type the
        # subnet does not run there keeps full masks (its weights are not read) but for its
        # output's width, which the next block reads whichever type ran.
        out[f"{big.name}/on"] = np.array(0.0 if b is None else 1.0, np.float32)
        width = big.out_ch if b is None else b.out_ch
        if b is None or b.block != big.block:
            b = replace(big, out_ch=width)
        out[f"{big.name}/hidden"] = first(b.hidden, big.hidden, big.name)
        out[f"{big.name}/out"] = first(b.out_ch, big.out_ch, big.name)
        out[f"{big.name}/res"] = np.array(1.0 if b.residual else 0.0, np.float32)
        edge = (big.kernel - b.kernel) // 2
        kernel = np.zeros((big.kernel, big.kernel, 1, 1), np.float32)
        kernel[edge : big.kernel - edge, edge : big.kernel - edge] = 1.0
        out[f"{big.name}/kernel"] = kernel
        if big.se_ch:
            out[f"{big.name}/se"] = first(b.se_ch, big.se_ch, big.name)
            out[f"{big.name}/se_on"] = np.array(1.0 if b.se_ch else 0.0, np.float32)
    return out


def _key(layer: str, weight: int) -> str:
    """A weight's key in checkpoints and channel orders: its layer and Keras' weight index."""
    return f"{layer}/{weight}"


def _slots_by_weight(optimizer: Any, variables: dict[str, Any]) -> dict[str, list[Any]]:
    """The optimizer's state variables of each weight. Keras names a variable it adds for a
    weight `{weight path, "/" as "_"}_{slot}` (add_variable_from_reference's documented
    pattern) and gives it the weight's shape; the longest matching path wins, so that
    `a_kernel` never claims `a_kernel_b`'s state."""
    prefixes = {w.path.replace("/", "_") + "_": key for key, w in variables.items()}
    out: dict[str, list[Any]] = {}
    for slot in optimizer.variables:
        matches = [p for p in prefixes if slot.name.startswith(p)]
        if not matches:
            continue
        key = prefixes[max(matches, key=len)]
        if tuple(slot.shape) == tuple(variables[key].shape):
            out.setdefault(key, []).append(slot)
    return out


class Supernet:
    """Weights of the largest subnet of `largest`, named as build_plan names its layers;
    `variants` are the largest subnets in the other block types (ElasticSpace.variants), whose
    blocks it holds too."""

    def __init__(self, largest: Candidate, *, seed: int = 0, variants: tuple[Candidate, ...] = ()) -> None:
        self.candidate = largest
        self.plan = plan_network(largest)
        self.tf = import_tensorflow()
        keras.utils.set_random_seed(seed)
        self.layers: dict[str, list[Any]] = {}
        self.bn: dict[str, _BN] = {}
        net = self.plan
        # Each block position's blocks, one per type, in the largest's order: the variants share
        # the largest's depths and widths, so their positions are the same.
        self.positions: list[list[BlockPlan]] = [[b] for b in net.blocks]
        for variant in variants:
            for alts, b in zip(self.positions, plan_network(variant).blocks, strict=True):
                if b.block not in {a.block for a in alts}:
                    alts.append(b)
        self._conv_bn(net.stem, (3, 3, net.channels, net.stem_ch))
        for b in (b for alts in self.positions for b in alts):
            n = b.layers
            if b.fused:
                self._conv_bn(n.fused, (b.kernel, b.kernel, b.in_ch, b.hidden))
            else:
                if b.expand:
                    self._conv_bn(n.expand, (1, 1, b.in_ch, b.hidden))
                self._conv(n.dw.conv, (b.kernel, b.kernel, b.hidden, 1))  # depthwise: one filter per channel
                self._bn(n.dw.bn, b.hidden)
            if b.se_ch:
                self._conv(n.se_reduce, (1, 1, b.hidden, b.se_ch), bias=True)
                self._conv(n.se_expand, (1, 1, b.se_ch, b.hidden), bias=True)
            if b.projects:
                self._conv_bn(n.project, (1, 1, b.hidden, b.out_ch))
        last = net.blocks[-1].out_ch if net.blocks else net.stem_ch
        self._conv_bn(net.head, (1, 1, last, net.head_ch))
        features = net.head_ch
        if net.head_hidden:
            self._conv(HEAD_HIDDEN, (net.head_ch, net.head_hidden), bias=True)
            features = net.head_hidden
        self._conv(LOGITS, (features, net.classes), bias=True)
        # One Resizing layer per resolution (no weights): the layer an extracted subnet of that
        # resolution resizes with, so both compute the same images.
        self._resizers: dict[int, Any] = {}

    @classmethod
    def of(cls, elastic: ElasticSpace, *, num_classes: int, channels: int, seed: int = 0) -> Supernet:
        """The supernet of an elastic space: its largest subnet, in every searched block type."""
        largest, *variants = (
            elastic.space.candidate(params, num_classes=num_classes, channels=channels) for params in elastic.variants()
        )
        return cls(largest, seed=seed, variants=tuple(variants))

    # --- weights ------------------------------------------------------------------------

    def _conv(self, name: str, shape: tuple[int, ...], *, bias: bool = False) -> None:
        init = keras.initializers.GlorotUniform()
        weights = [keras.Variable(init(shape), name=f"{name}_kernel")]
        if bias:
            weights.append(keras.Variable(np.zeros(shape[-1], np.float32), name=f"{name}_bias"))
        self.layers[name] = weights

    def _conv_bn(self, names: ConvBN, shape: tuple[int, ...]) -> None:
        self._conv(names.conv, shape)
        self._bn(names.bn, shape[-1])

    def _bn(self, name: str, size: int) -> None:
        ones, zeros = np.ones(size, np.float32), np.zeros(size, np.float32)
        bn = _BN(
            keras.Variable(ones, name=f"{name}_gamma"),
            keras.Variable(zeros, name=f"{name}_beta"),
            keras.Variable(zeros, name=f"{name}_mean", trainable=False),
            keras.Variable(ones, name=f"{name}_variance", trainable=False),
        )
        self.bn[name] = bn
        self.layers[name] = bn.weights()

    def variables(self) -> Iterator[tuple[str, Any]]:
        """(layer/index, variable) for every weight, in a fixed order (checkpoints)."""
        for name, weights in self.layers.items():
            for i, w in enumerate(weights):
                yield _key(name, i), w

    @property
    def trainable_variables(self) -> list[Any]:
        return [w for _, w in self.variables() if w.trainable]

    def get_state(self) -> dict[str, np.ndarray]:
        return {key: np.asarray(w.numpy()) for key, w in self.variables()}

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        for key, w in self.variables():
            w.assign(state[key])

    # --- channel importance ----------------------------------------------------------------

    def channel_orders(self) -> dict[str, list[tuple[str, int]]]:
        """Each permutable channel group (the plan's channel groups), as the (weight key, axis)
        pairs it spans; the first pair is the group's consumer, whose L1 norm per channel is
        the channel's importance (Once-for-All's criterion)."""
        orders = {}
        held = {b.name for b in self.plan.blocks}
        others = [g for alts in self.positions for b in alts if b.name not in held for g in b.channel_groups()]
        for group in (*self.plan.channel_groups(), *others):
            rest = [(_key(s.layer, s.weight), s.axis) for s in group.spans if s != group.consumer]
            orders[group.name] = [(_key(group.consumer.layer, group.consumer.weight), group.consumer.axis), *rest]
        return orders

    def sort_channels(self, optimizer: Any | None = None) -> dict[str, np.ndarray]:
        """Reorder every permutable channel group most important first, so that a subnet's
        first k channels are the k that matter most to the largest network, which computes
        exactly what it did before. The optimizer's per-weight state (Adam's moments, SGD's
        momentum) is reordered with its weight. Returns each group's new order."""
        variables = {key: w for key, w in self.variables()}
        slots = _slots_by_weight(optimizer, variables) if optimizer is not None else {}
        orders = {}
        for group, spans in self.channel_orders().items():
            reader, axis = spans[0]
            value = np.asarray(variables[reader].numpy())
            importance = np.abs(value).sum(axis=tuple(i for i in range(value.ndim) if i != axis))
            order = np.argsort(-importance, kind="stable")
            orders[group] = order
            for key, axis in spans:
                for target in (variables[key], *slots.get(key, ())):
                    target.assign(np.take(np.asarray(target.numpy()), order, axis=axis))
        return orders

    # --- subnets ------------------------------------------------------------------------

    def masks(self, plan: NetworkPlan) -> dict[str, np.ndarray]:
        return _masks_of(self.plan, self.positions, plan)

    def stacked_masks(self, plans: list[NetworkPlan]) -> dict[str, np.ndarray]:
        """The masks of several subnets stacked on a first axis (one traced step runs them all)."""
        each = [self.masks(p) for p in plans]
        return {key: np.stack([m[key] for m in each]) for key in each[0]}

    # --- forward ------------------------------------------------------------------------

    def _norm(self, name: str, x: Any, training: bool, k: Any) -> Any:
        """BatchNorm of the first `k` channels (those `x` has); in training only their moving
        statistics move."""
        tf, bn = self.tf, self.bn[name]
        if training:
            mean, variance = tf.nn.moments(x, axes=[0, 1, 2])
            for var, batch in ((bn.mean, mean), (bn.variance, variance)):
                moved = BN_MOMENTUM * var[:k] + (1.0 - BN_MOMENTUM) * batch
                var.assign(tf.concat([moved, var[k:]], 0))
        else:
            mean, variance = bn.mean[:k], bn.variance[:k]
        return (x - mean) * tf.math.rsqrt(variance + BN_EPSILON) * bn.gamma[:k] + bn.beta[:k]

    def _conv_norm(self, names: ConvBN, x: Any, training: bool, k_in: Any, k_out: Any, stride: int = 1) -> Any:
        kernel = self.layers[names.conv][0][:, :, :k_in, :k_out]
        x = self.tf.nn.conv2d(x, kernel, strides=stride, padding="SAME")
        return self._norm(names.bn, x, training, k_out)

    def _block(self, b: BlockPlan, x: Any, m: dict[str, Any], training: bool, k_in: Any) -> Any:
        """The block on the subnet's channels only: every weight cut to the counts its masks
        give, so a narrow subnet costs what it is, not what the largest costs."""
        tf, net = self.tf, self.plan
        act = keras.activations.get(b.activation)
        n = b.layers
        k_hidden, k_out = _count(tf, m[f"{b.name}/hidden"]), _count(tf, m[f"{b.name}/out"])
        h = x
        if b.fused:
            if not b.expand:
                k_hidden = k_out  # one kxk convolution straight to the output's channels
            kernel = (self.layers[n.fused.conv][0] * m[f"{b.name}/kernel"])[:, :, :k_in, :k_hidden]
            h = tf.nn.conv2d(h, kernel, strides=b.stride, padding="SAME")
            h = act(self._norm(n.fused.bn, h, training, k_hidden))
        else:
            if b.expand:
                h = act(self._conv_norm(n.expand, h, training, k_in, k_hidden))
            else:
                k_hidden = k_in  # no expansion: the depthwise convolution runs on the input's channels
            kernel = (self.layers[n.dw.conv][0] * m[f"{b.name}/kernel"])[:, :, :k_hidden, :]
            h = tf.nn.depthwise_conv2d(h, kernel, strides=[1, b.stride, b.stride, 1], padding="SAME")
            h = act(self._norm(n.dw.bn, h, training, k_hidden))
        if b.se_ch:
            assert net.gate is not None
            squeeze_act = keras.activations.get(net.se_activation or b.activation)
            k_se = _count(tf, m[f"{b.name}/se"])
            reduce_k, reduce_b = self.layers[n.se_reduce]
            expand_k, expand_b = self.layers[n.se_expand]

            def excited() -> Any:
                s = tf.reduce_mean(h, axis=[1, 2], keepdims=True)
                s = squeeze_act(tf.nn.conv2d(s, reduce_k[:, :, :k_hidden, :k_se], 1, "SAME") + reduce_b[:k_se])
                gate = keras.activations.get(net.gate)(
                    tf.nn.conv2d(s, expand_k[:, :, :k_se, :k_hidden], 1, "SAME") + expand_b[:k_hidden]
                )
                return h * gate

            h = _when(tf, m[f"{b.name}/se_on"], excited, lambda: h)
        if b.projects:
            h = self._conv_norm(n.project, h, training, k_hidden, k_out)
        if b.stride == 1:
            # A residual connection wherever the subnet has one (the same width in and out).
            h = _when(tf, m[f"{b.name}/res"], lambda: h + x[..., :k_out], lambda: h)
        return h

    def _typed(self, alts: list[BlockPlan], x: Any, m: dict[str, Any], training: bool, k_in: Any) -> Any:
        """The block of the type the subnet runs at this position (of one held type: it)."""
        if len(alts) == 1:
            return self._block(alts[0], x, m, training, k_in)
        by_type = {b.block: b for b in alts}
        fused = functools.partial(self._block, by_type["fused"], x, m, training, k_in)
        mbconv = functools.partial(self._block, by_type["mbconv"], x, m, training, k_in)
        return _when(self.tf, m[_type_flag(block_position(alts[0].name)[0])], fused, mbconv)

    def _resize(self, x: Any, resolution: int) -> Any:
        if resolution == self.plan.input_size:
            return x
        if resolution not in self._resizers:
            self._resizers[resolution] = keras.layers.Resizing(resolution, resolution, name=RESIZE)
        return self._resizers[resolution](x)

    def __call__(self, x: Any, m: dict[str, Any], *, training: bool = False, spatial: Spatial | None = None) -> Any:
        """Class probabilities of the subnet the masks `m` describe, run at `spatial`
        (resolution, stem stride; by default the largest network's). Tensor masks let one
        traced graph run any subnet; NumPy masks (`masks(plan)`) fix the subnet in the graph,
        which then holds only its own blocks and static shapes."""
        tf, net = self.tf, self.plan
        act = keras.activations.get(net.activation)
        resolution, stride = spatial or spatial_of(net)
        x = self._resize(x, resolution)
        k = _count(tf, m["stem"])
        x = act(self._conv_norm(net.stem, x, training, net.channels, k, stride))
        for alts in self.positions:
            b = alts[0]
            run = functools.partial(self._typed, alts, x, m, training, k)
            if b.in_ch == b.out_ch and b.stride == 1:
                # A block past the subnet's depth passes its input on and costs nothing; one the
                # subnet runs keeps its width (in and out are one stage's), so k stays.
                x = _when(tf, m[f"{b.name}/on"], run, functools.partial(tf.identity, x))
            else:
                x = run()
                k = _count(tf, m[f"{b.name}/out"])
        k_head = _count(tf, m["head"])
        x = act(self._conv_norm(net.head, x, training, k, k_head))
        x = tf.reduce_mean(x, axis=[1, 2])
        if net.head_hidden:
            kernel, bias = self.layers[HEAD_HIDDEN]
            k_hidden = _count(tf, m["head_hidden"])
            x = act(tf.matmul(x, kernel[:k_head, :k_hidden]) + bias[:k_hidden])
            k_head = k_hidden
        if training and net.dropout > 0:
            x = tf.nn.dropout(x, rate=net.dropout)
        kernel, bias = self.layers[LOGITS]
        return tf.nn.softmax(tf.cast(tf.matmul(x, kernel[:k_head]) + bias, tf.float32))


def _count(tf: Any, mask: Any) -> Any:
    """The channels a mask keeps (its ones are the first ones): a size to cut weights to; a
    number where the mask is one (a subnet fixed in the graph), else a tensor."""
    if isinstance(mask, np.ndarray):
        return int(mask.sum())
    return tf.cast(tf.reduce_sum(mask), tf.int32)


def _when(tf: Any, flag: Any, then: Callable[[], Any], otherwise: Callable[[], Any]) -> Any:
    """`then()` where the flag is on: decided while tracing for a subnet fixed in the graph
    (no branch, so nothing of the other is built), by tf.cond for one the masks choose."""
    if isinstance(flag, np.ndarray):
        return then() if flag > 0 else otherwise()
    return tf.cond(flag > 0, then, otherwise)

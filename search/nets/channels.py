"""Channel pruning that removes filters: the expanded (hidden) channels of each block (MBConv
or fused) are cut to (1 - sparsity) of their width, keeping those with the largest L1
norm (Li et al. 2017), and a smaller network is built and given the kept weights.

Hidden channels are internal to a block (the residual path never sees them), so removing
them changes no other layer's shape; unlike zeros in a kernel, this speeds up dense kernels
on every device. Which weight axes carry a block's hidden channels is the plan's
(BlockPlan.hidden_group), the same group the supernet slices.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from nas.search.nets.plan import BlockPlan, ChannelGroup, NetworkPlan, make_divisible, plan_network
from nas.search.space import Candidate

if TYPE_CHECKING:  # `nas space` commands use deployed_plan without TensorFlow
    import keras


def pruned_plan(net: NetworkPlan, sparsity: float) -> NetworkPlan:
    def cut(b: BlockPlan) -> BlockPlan:
        if not b.expand:
            return b
        return replace(b, hidden=min(b.hidden, make_divisible(b.hidden * (1.0 - sparsity))))

    return replace(net, blocks=tuple(cut(b) for b in net.blocks))


def _kept(model: keras.Model, group: ChannelGroup, width: int) -> np.ndarray:
    """The `width` channels whose producing filters have the largest L1 norm, in order."""
    span = group.producer
    kernel = model.get_layer(span.layer).get_weights()[span.weight]
    scores = np.abs(kernel).sum(axis=tuple(i for i in range(kernel.ndim) if i != span.axis))
    return np.sort(np.argsort(scores)[-width:])


def transfer(full: keras.Model, small: keras.Model, full_net: NetworkPlan, small_net: NetworkPlan) -> None:
    """Give `small` the weights of `full`, sliced to the kept channels of each cut block."""
    sliced: dict[str, list[np.ndarray]] = {}
    for bf, bs in zip(full_net.blocks, small_net.blocks, strict=True):
        group = bf.hidden_group()
        if bf.hidden == bs.hidden or group is None:
            continue
        idx = _kept(full, group, bs.hidden)
        for span in group.spans:
            weights = sliced.setdefault(span.layer, [np.asarray(w) for w in full.get_layer(span.layer).get_weights()])
            weights[span.weight] = np.take(weights[span.weight], idx, axis=span.axis)
    for layer in small.layers:
        if not layer.weights:
            continue
        layer.set_weights(sliced.get(layer.name) or full.get_layer(layer.name).get_weights())


def deployed_plan(candidate: Candidate, full: NetworkPlan | None = None) -> NetworkPlan:
    """The network a candidate deploys (and is measured as): cut when it is channel-pruned.
    `full` is the candidate's uncut plan, where the caller has it already."""
    net = full if full is not None else plan_network(candidate)
    return pruned_plan(net, candidate.sparsity) if candidate.pruning == "channel" else net

"""Channel pruning that removes filters: the expanded (hidden) channels of each inverted
residual block are cut to (1 - sparsity) of their width, keeping those with the largest L1
norm (Li et al. 2017), and a smaller network is built and given the kept weights.

Hidden channels are internal to a block (the residual path never sees them), so removing
them changes no other layer's shape; unlike zeros in a kernel, this speeds up dense kernels
on every device.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from nas.search.nets.plan import BlockPlan, NetworkPlan, make_divisible, plan_network
from nas.search.space import Candidate

if TYPE_CHECKING:  # `nas space` commands use deployed_plan without TensorFlow
    import keras


def pruned_plan(net: NetworkPlan, sparsity: float) -> NetworkPlan:
    def cut(b: BlockPlan) -> BlockPlan:
        if not b.expand:
            return b
        return replace(b, hidden=min(b.hidden, make_divisible(b.hidden * (1.0 - sparsity))))

    return replace(net, blocks=tuple(cut(b) for b in net.blocks))


def _kept(model: keras.Model, b: BlockPlan, width: int) -> np.ndarray:
    kernel = model.get_layer(f"{b.name}_expand_conv").get_weights()[0]  # (1, 1, in, hidden)
    scores = np.abs(kernel).sum(axis=(0, 1, 2))
    return np.sort(np.argsort(scores)[-width:])


def transfer(full: keras.Model, small: keras.Model, full_net: NetworkPlan, small_net: NetworkPlan) -> None:
    """Give `small` the weights of `full`, sliced to the kept channels of each cut block."""
    sliced: dict[str, list[np.ndarray]] = {}
    for bf, bs in zip(full_net.blocks, small_net.blocks, strict=True):
        if bf.hidden == bs.hidden:
            continue
        idx = _kept(full, bf, bs.hidden)

        def weights(suffix: str, name: str = bf.name) -> list[np.ndarray]:
            return [np.asarray(w) for w in full.get_layer(f"{name}_{suffix}").get_weights()]

        sliced[f"{bf.name}_expand_conv"] = [weights("expand_conv")[0][..., idx]]
        sliced[f"{bf.name}_expand_bn"] = [w[idx] for w in weights("expand_bn")]
        sliced[f"{bf.name}_dw"] = [weights("dw")[0][:, :, idx, :]]
        sliced[f"{bf.name}_dw_bn"] = [w[idx] for w in weights("dw_bn")]
        if bf.se_ch:
            kernel, bias = weights("se_reduce")
            sliced[f"{bf.name}_se_reduce"] = [kernel[:, :, idx, :], bias]
            kernel, bias = weights("se_expand")
            sliced[f"{bf.name}_se_expand"] = [kernel[..., idx], bias[idx]]
        sliced[f"{bf.name}_project_conv"] = [weights("project_conv")[0][:, :, idx, :]]
    for layer in small.layers:
        if not layer.weights:
            continue
        layer.set_weights(sliced.get(layer.name) or full.get_layer(layer.name).get_weights())


def deployed_plan(candidate: Candidate, full: NetworkPlan | None = None) -> NetworkPlan:
    """The network a candidate deploys (and is measured as): cut when it is channel-pruned.
    `full` is the candidate's uncut plan, where the caller has it already."""
    net = full if full is not None else plan_network(candidate)
    return pruned_plan(net, candidate.sparsity) if candidate.pruning == "channel" else net

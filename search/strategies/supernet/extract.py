"""A subnet taken out of the supernet as a plain Keras model, and its BatchNorm re-estimated.

The subnet is built by the same builder as every trial's network (nets/build.py, from
`plan_network`), so its layers, params and FLOPs are exactly those of a trained-from-scratch
candidate; each weight is the supernet's, cut to the subnet's shape: the first channels on
every channel axis, the centre of a (depthwise or fused) kernel on its spatial axes. No masks
remain. A subnet of a stage whose block type is searched takes the weights of its type.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import keras
import numpy as np

from nas.search.nets import build_plan, plan_network
from nas.search.space import Candidate
from nas.search.strategies.supernet.network import Supernet


def _cut(weight: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    index: list[slice] = []
    for axis, (have, want) in enumerate(zip(weight.shape, shape, strict=True)):
        if want > have:
            raise ValueError(f"a subnet weight of shape {shape} does not fit in the supernet's {weight.shape}")
        if weight.ndim == 4 and axis < 2:  # a convolution's kernel: its centre (elastic kernel)
            edge = (have - want) // 2
            index.append(slice(edge, edge + want))
        else:
            index.append(slice(0, want))
    return weight[tuple(index)]


def extract(supernet: Supernet, candidate: Candidate) -> keras.Model:
    """The subnet `candidate` with the supernet's weights (its moving statistics included:
    re-calibrate before trusting them)."""
    model = build_plan(plan_network(candidate))
    inherit(supernet, model)
    return model


def inherit(supernet: Supernet, model: keras.Model) -> None:
    """Set every weight of `model`, a subnet `extract` built, to the supernet's as it is now
    (a subnet scored after each epoch is built once)."""
    state = {name: [np.asarray(w.numpy()) for w in weights] for name, weights in supernet.layers.items()}
    for layer in model.layers:
        if not layer.weights:
            continue
        if layer.name not in state:
            raise ValueError(f"layer {layer.name} of the subnet has no weights in the supernet")
        mine = layer.get_weights()
        layer.set_weights([_cut(big, tuple(w.shape)) for big, w in zip(state[layer.name], mine, strict=True)])


def recalibrate(model: keras.Model, batches: Iterable[Any]) -> int:
    """Set every BatchNormalization's moving mean and variance to their averages over
    `batches`, each batch run with batch statistics (as in training) and no dropout; the
    statistics the supernet kept belong to no particular subnet. Returns the batches used.
    Only the moving statistics change."""
    layers = _all_layers(model)
    norms = [layer for layer in layers if isinstance(layer, keras.layers.BatchNormalization)]
    dropouts = [layer for layer in layers if isinstance(layer, keras.layers.Dropout)]
    momenta = [bn.momentum for bn in norms]
    rates = [d.rate for d in dropouts]
    seen = 0
    try:
        for d in dropouts:
            d.rate = 0.0
        for x, *_ in batches:
            seen += 1
            # A running average: momentum 1 - 1/n weighs batch n as 1/n of the mean so far.
            for bn in norms:
                bn.momentum = 1.0 - 1.0 / seen
            model(x, training=True)
    finally:
        for bn, momentum in zip(norms, momenta, strict=True):
            bn.momentum = momentum
        for d, rate in zip(dropouts, rates, strict=True):
            d.rate = rate
    return seen


def _all_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """Every layer, those of nested models included (a keras.applications network wrapped in
    another model keeps its BatchNormalization layers one level down)."""
    out: list[keras.layers.Layer] = []
    for layer in model.layers:
        out.append(layer)
        if isinstance(layer, keras.Model):
            out.extend(_all_layers(layer))
    return out

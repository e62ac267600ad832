"""Magnitude pruning for Keras 3 models, written here because tensorflow-model-optimization
works only with legacy tf_keras.

Masks live outside the model (non-trainable tf.Variables held by the Pruner), are applied in
the compiled train step right after every optimizer step, and are updated between steps on
a polynomial schedule (Zhu & Gupta 2017). Since the model itself never holds a mask or a
wrapper layer, there is nothing to strip before export: the kernels simply contain zeros.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np

from nas.search.nets import layer_kind
from nas.search.runtime import import_tensorflow
from nas.search.space import PruningSpec


def prunable_kernels(model: keras.Model, exclude: list[str]) -> list[tuple[str, Any]]:
    """The kernels of `model` whose layer kind (the plan's, read from the layer's name) is not
    in `exclude`."""
    out = []
    for layer in model.layers:
        if not isinstance(layer, keras.layers.DepthwiseConv2D | keras.layers.Conv2D | keras.layers.Dense):
            continue
        kernel = layer.kernel
        if layer_kind(layer.name) not in exclude:
            out.append((layer.name, kernel))
    return out


def polynomial_sparsity(step: int, target: float, begin: int, end: int, power: int = 3) -> float:
    """0 before `begin`, `target` from `end` on, rising fast at first and slowly near the end."""
    if step < begin:
        return 0.0
    if step >= end:
        return target
    progress = (step - begin) / max(1, end - begin)
    return target * (1.0 - (1.0 - progress) ** power)


def magnitude_mask(weights: np.ndarray, sparsity: float) -> np.ndarray:
    """Zero exactly round(sparsity x size) of the smallest-magnitude weights."""
    k = round(sparsity * weights.size)
    mask = np.ones(weights.size, dtype=weights.dtype)
    if k > 0:
        mask[np.argpartition(np.abs(weights).ravel(), k - 1)[:k]] = 0
    return mask.reshape(weights.shape)


def n_m_mask(weights: np.ndarray, n: int, m: int) -> np.ndarray | None:
    """Keep the n largest of every m consecutive weights along the input-channel axis (the
    pattern of NVIDIA's 2:4 sparse tensor cores); None when that axis is not a multiple of m."""
    # Conv kernels are (kh, kw, in, out), dense ones (in, out): move `in` last, group it.
    moved = np.moveaxis(weights, -2, -1)
    if moved.shape[-1] % m:
        return None
    groups = np.abs(moved).reshape(-1, m)
    keep = np.argsort(groups, axis=1)[:, m - n :]
    mask = np.zeros_like(groups)
    np.put_along_axis(mask, keep, 1.0, axis=1)
    out: np.ndarray = np.moveaxis(mask.reshape(moved.shape), -1, -2).astype(weights.dtype)
    return out


@dataclass
class Pruner:
    """Masks of one model's prunable kernels and the schedule that updates them."""

    method: str  # magnitude or n_m
    target: float
    spec: PruningSpec
    total_steps: int
    pairs: list[tuple[str, Any, Any]] = field(default_factory=list)  # (layer, kernel, mask)
    skipped: list[str] = field(default_factory=list)  # N:M layers whose input width is not a multiple of m
    step: int = 0

    @classmethod
    def for_model(cls, model: keras.Model, method: str, target: float, spec: PruningSpec, total_steps: int) -> Pruner:
        tf = import_tensorflow()
        pruner = cls(method, target, spec, total_steps)
        for name, kernel in prunable_kernels(model, list(spec.exclude)):
            if method == "n_m" and kernel.shape[-2] % spec.m:
                pruner.skipped.append(name)
                continue
            mask = tf.Variable(tf.ones(kernel.shape, kernel.dtype), trainable=False, name=f"{name}_mask")
            pruner.pairs.append((name, kernel, mask))
        return pruner

    @property
    def begin(self) -> int:
        return int(self.spec.begin * self.total_steps)

    @property
    def end(self) -> int:
        return max(self.begin + 1, int(self.spec.end * self.total_steps))

    def masks(self) -> list[tuple[Any, Any]]:
        """(kernel, mask) pairs the train step multiplies after every optimizer step."""
        return [(kernel, mask) for _, kernel, mask in self.pairs]

    def after_step(self) -> None:
        """Called after each training step: recompute masks when the schedule says so."""
        self.step += 1
        if self.method == "n_m":
            if self.step == max(1, self.begin):
                self._update(lambda w: n_m_mask(w, self.spec.n, self.spec.m))
            return
        due = self.begin <= self.step <= self.end and (self.step - self.begin) % self.spec.frequency == 0
        if due or self.step == self.end:
            sparsity = polynomial_sparsity(self.step, self.target, self.begin, self.end)
            self._update(lambda w: magnitude_mask(w, sparsity))

    def finish(self) -> None:
        """Make sure the final masks hold exactly, whatever the step count was."""
        if self.method == "n_m":
            self._update(lambda w: n_m_mask(w, self.spec.n, self.spec.m))
        else:
            self._update(lambda w: magnitude_mask(w, self.target))

    def _update(self, make: Any) -> None:
        for _, kernel, mask in self.pairs:
            weights = kernel.numpy()
            new = make(weights)
            mask.assign(new)
            kernel.assign(weights * new)


def sparsity_report(model: keras.Model, exclude: list[str]) -> dict[str, Any]:
    """Zeros counted in the kernels pruning may touch, and in the whole model."""
    pruned = [(n, k.numpy()) for n, k in prunable_kernels(model, exclude)]
    zeros = sum(int((w == 0).sum()) for _, w in pruned)
    size = sum(w.size for _, w in pruned)
    everything = [w.numpy() for w in model.weights]
    all_zeros = sum(int((w == 0).sum()) for w in everything)
    return {
        "prunable_weights": size,
        "prunable_sparsity": round(zeros / max(1, size), 4),
        "model_sparsity": round(all_zeros / max(1, sum(w.size for w in everything)), 4),
    }

"""One training step of the supernet: a sandwich of subnets (the largest on the labels, the
others distilled from its predictions, BigNAS' in-place distillation), their gradients summed
into one update of the shared weights. train.py runs it epoch after epoch; budget.py times it
to decide how many epochs fit in a search's budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import keras
import numpy as np

from nas.search.nets import NetworkPlan
from nas.search.strategies.supernet.elastic import SPATIAL, ElasticSpace
from nas.search.strategies.supernet.network import Spatial, Supernet, spatial_of

SANDWICH = 4  # largest, smallest and two random subnets per step: the default
ENDS = 2  # the largest and the smallest lead every sandwich


def draw_sandwich(
    elastic: ElasticSpace,
    rng: np.random.Generator,
    keep: dict[str, Any],
    ends: tuple[NetworkPlan, NetworkPlan],
    plan: Callable[[dict[str, Any]], NetworkPlan],
    random: int = SANDWICH - 2,
) -> list[NetworkPlan]:
    """The largest and smallest of `ends`, then `random` subnets drawn (the parameters in
    `keep` at their values). The random subnets share one spatial shape (Once-for-All draws a
    resolution per batch): at most one traced step per shape, not per combination of shapes."""
    if not random:
        return list(ends)
    first = elastic.random_params(rng, keep)
    shared = keep | {name: first[name] for name in SPATIAL if name in first}
    drawn = [plan(first), *(plan(elastic.random_params(rng, shared)) for _ in range(random - 1))]
    return [*ends, *drawn]


class SandwichStep:
    """The training step. Called with the batch and the sandwich's plans; returns the summed
    loss and each subnet's count of correct predictions. The first subnet (the largest) learns
    the labels; the others its predictions (`distill`, by KL divergence) or the labels.

    The first `fixed` subnets (the largest; by default the smallest too) are the same in every
    step, so they are fixed in the graph (plain shapes, no branches: a cheaper trace and a
    faster step); the others are chosen by masks fed to it. So one graph per set of fixed
    subnets and combination of spatial shapes (map sizes are part of a graph). Progressive
    shrinking moves the smallest each phase: it fixes the largest only, or traces per phase."""

    def __init__(
        self,
        supernet: Supernet,
        input_shape: tuple[int, ...],
        optimizer: Any,
        *,
        size: int = SANDWICH,
        distill: bool = True,
        fixed: int = ENDS,
    ) -> None:
        tf = supernet.tf
        self.supernet, self.optimizer, self.tf = supernet, optimizer, tf
        self.size, self.distill, self.fixed = size, distill, min(fixed, size)
        probe = supernet.masks(supernet.plan)
        spec = {k: tf.TensorSpec([size, *np.shape(v)], tf.float32) for k, v in probe.items()}
        self.signature = [tf.TensorSpec([None, *input_shape], tf.float32), tf.TensorSpec([None], tf.int32), spec]
        self.traced: dict[tuple[Any, ...], Any] = {}

    def _make(self, shapes: tuple[Spatial, ...], ends: tuple[NetworkPlan, ...]) -> Any:
        tf, supernet, optimizer, distill = self.tf, self.supernet, self.optimizer, self.distill
        variables = supernet.trainable_variables
        fixed = [supernet.masks(p) for p in ends]

        def masks_of(i: int, fed: dict[str, Any]) -> dict[str, Any]:
            return fixed[i] if i < len(fixed) else {k: v[i] for k, v in fed.items()}

        # No autograph: the step has no tensor-dependent Python control flow to convert.
        @tf.function(input_signature=self.signature, autograph=False)  # type: ignore[untyped-decorator]
        def step(x: Any, y: Any, masks: dict[str, Any]) -> Any:
            with tf.GradientTape() as tape:
                teacher = supernet(x, masks_of(0, masks), training=True, spatial=shapes[0])
                loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, teacher))
                soft = tf.stop_gradient(teacher)
                hits = tf.equal(tf.argmax(teacher, -1, output_type=tf.int32), y)
                correct = [tf.reduce_sum(tf.cast(hits, tf.float32))]
                for i in range(1, len(shapes)):
                    student = supernet(x, masks_of(i, masks), training=True, spatial=shapes[i])
                    if distill:
                        loss += tf.reduce_mean(keras.losses.kl_divergence(soft, student))
                    else:
                        loss += tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, student))
                    hits = tf.equal(tf.argmax(student, -1, output_type=tf.int32), y)
                    correct.append(tf.reduce_sum(tf.cast(hits, tf.float32)))
            optimizer.apply(tape.gradient(loss, variables), variables)
            return loss, tf.stack(correct)

        return step

    def _key(self, sandwich: list[NetworkPlan]) -> tuple[Any, ...]:
        return (*sandwich[: self.fixed], *(spatial_of(p) for p in sandwich[self.fixed :]))

    def is_traced(self, sandwich: list[NetworkPlan]) -> bool:
        return self._key(sandwich) in self.traced

    def __call__(self, x: Any, y: Any, sandwich: list[NetworkPlan]) -> tuple[Any, Any]:
        if len(sandwich) != self.size:
            raise ValueError(f"a sandwich of {len(sandwich)} subnets for a step of {self.size}")
        key = self._key(sandwich)
        if key not in self.traced:
            self.traced[key] = self._make(tuple(spatial_of(p) for p in sandwich), tuple(sandwich[: self.fixed]))
        # The fixed subnets' rows of the masks are fed but unused: one signature for all steps.
        result: tuple[Any, Any] = self.traced[key](x, y, self.supernet.stacked_masks(sandwich))
        return result

"""Scoring a trained Keras model on held-out images in one traced graph: the validation score
of a supernet's subnets, of their reference subnets after each epoch, and the test score of
`nas train`'s networks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import keras
import numpy as np

from nas.search.data import Dataset, pipeline
from nas.search.runtime import import_tensorflow
from nas.search.training.result import SCORE_BATCH


def traced_forward(model: keras.Model) -> Any:
    """`model`'s inference pass as one traced graph for any batch size. Eagerly, each of the
    validation set's 40 batches runs the subnet op by op from Python, which on 2 CPU cores cost
    more than the trace (benchmarks/subnet_cost.py; issue 47's subnets per hour)."""
    tf = import_tensorflow()
    spec = tf.TensorSpec((None, *model.input_shape[1:]), tf.float32)
    return tf.function(lambda images: model(images, training=False), input_signature=[spec])


@dataclass
class Scored:
    """A running sum over validation images: cross-entropy, correct predictions, images."""

    loss_sum: float = 0.0
    correct: int = 0
    count: int = 0
    # One trace per model: halving scores the same subnet twice (its subset, then the rest).
    _forwards: dict[int, Any] = field(default_factory=dict, repr=False)

    def add(self, model: keras.Model, x: np.ndarray, y: np.ndarray) -> Scored:
        forward = self._forwards.get(id(model))
        if forward is None:
            forward = self._forwards[id(model)] = traced_forward(model)
        for images, batch_labels in pipeline(x, y, SCORE_BATCH, shuffle_seed=None):
            probs = np.asarray(forward(images))
            labels = np.asarray(batch_labels)
            picked = np.clip(probs[np.arange(len(labels)), labels], 1e-7, 1.0)
            self.loss_sum += float(-np.log(picked).sum())
            self.correct += int((probs.argmax(axis=-1) == labels).sum())
            self.count += len(labels)
        return self

    def figures(self) -> tuple[float, float]:
        """(loss, accuracy) over the images scored."""
        count = max(1, self.count)
        return self.loss_sum / count, self.correct / count


def evaluate(model: keras.Model, data: Dataset) -> tuple[float, float]:
    """(validation loss, validation accuracy) of `model`."""
    return Scored().add(model, data.x_val, data.y_val).figures()

"""Datasets: the built-in digits, split once, resized once, served through tf.data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .space import DatasetSpec


@dataclass(frozen=True)
class Dataset:
    x_train: np.ndarray  # float32, NHWC, values in [0, 1]
    y_train: np.ndarray  # int32 class indices
    x_val: np.ndarray
    y_val: np.ndarray
    class_names: tuple[str, ...]

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def channels(self) -> int:
        return int(self.x_train.shape[-1])

    def summary(self) -> dict[str, Any]:
        return {
            "train": len(self.y_train),
            "validation": len(self.y_val),
            "classes": list(self.class_names),
            "shape": list(self.x_train.shape[1:]),
        }


def load_dataset(spec: DatasetSpec) -> Dataset:
    """Load, split (stratified, seeded) and resize; resizing happens once, here, not per epoch."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from .quiet import import_tensorflow

    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[..., np.newaxis]
    y = digits.target.astype(np.int32)
    if spec.subset is not None and spec.subset < len(y):
        x, _, y, _ = train_test_split(x, y, train_size=spec.subset, stratify=y, random_state=spec.seed)
    x_train, x_val, y_train, y_val = train_test_split(
        x, y, test_size=spec.validation_fraction, stratify=y, random_state=spec.seed
    )
    if spec.image_size != x.shape[1]:
        tf = import_tensorflow()
        size = (spec.image_size, spec.image_size)
        x_train = tf.image.resize(x_train, size, method="bilinear").numpy()
        x_val = tf.image.resize(x_val, size, method="bilinear").numpy()
    names = tuple(str(n) for n in digits.target_names)
    return Dataset(x_train, y_train, x_val, y_val, names)


def pipeline(x: np.ndarray, y: np.ndarray, batch_size: int, *, shuffle_seed: int | None) -> Any:
    """A tf.data pipeline: cached in memory (the arrays are small), shuffled, prefetched."""
    from .quiet import import_tensorflow

    tf = import_tensorflow()
    ds = tf.data.Dataset.from_tensor_slices((x, y)).cache()
    if shuffle_seed is not None:
        ds = ds.shuffle(len(y), seed=shuffle_seed, reshuffle_each_iteration=True)
    return ds.batch(batch_size).prefetch(tf.data.AUTOTUNE)

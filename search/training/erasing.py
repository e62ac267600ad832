"""Random erasing (Zhong et al. 2017, "Random Erasing Data Augmentation", arXiv:1708.04896)
as a Keras layer for training batches (`augmentation.erasing`).

With probability `rate` an image gets one rectangle of 2% to 40% of its area, aspect ratio
(height over width) drawn uniformly from 0.3 to 1/0.3, at a uniform position where it fits,
filled with uniform random values in [0, 1] (the paper's "random" fill: per pixel and channel,
in the range our images have; not its ImageNet-mean variant, which needs a data set's mean).
The paper draws again until a rectangle fits; a graph cannot loop per image, so each image
draws `ATTEMPTS` rectangles at once and takes the first that fits (on square images of 8 to 32
pixels 96-98% fit, so an image is left whole for want of one in under 1e-14 of the cases).

Written with keras.ops and keras.random only, so it runs inside the compiled (XLA) train step
beside Keras' own preprocessing layers and draws from a seeded SeedGenerator as they do.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import ops

AREA = (0.02, 0.4)  # the rectangle's share of the image (the paper's s_l, s_h)
ASPECT = (0.3, 1 / 0.3)  # its height over width (r_1, 1/r_1)
ATTEMPTS = 10


class RandomErasing(keras.layers.Layer):  # type: ignore[misc]  # Keras ships no types
    """Erase one random rectangle per image with probability `rate` (training only)."""

    def __init__(self, rate: float, seed: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rate = float(rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, images: Any, training: bool = True) -> Any:
        if not training or self.rate <= 0:
            return images
        height, width = int(images.shape[1]), int(images.shape[2])
        batch = ops.shape(images)[0]
        draws = (batch, ATTEMPTS)

        def uniform(shape: Any, low: float = 0.0, high: float = 1.0) -> Any:
            return keras.random.uniform(shape, low, high, dtype="float32", seed=self.seed_generator)

        area = uniform(draws, *AREA) * float(height * width)
        aspect = uniform(draws, *ASPECT)
        tall = ops.round(ops.sqrt(area * aspect))
        wide = ops.round(ops.sqrt(area / aspect))
        fits = (tall >= 1) & (wide >= 1) & (tall <= height) & (wide <= width)
        first = ops.argmax(ops.cast(fits, "int32"), axis=1)  # the first rectangle that fits

        def pick(values: Any) -> Any:
            return ops.take_along_axis(values, first[:, None], axis=1)[:, 0]

        tall, wide = pick(tall), pick(wide)
        erase = ops.any(fits, axis=1) & (uniform((batch,)) < self.rate)
        # A uniform top-left corner among the positions where the rectangle lies inside.
        top = ops.floor(uniform((batch,)) * (height - tall + 1))
        left = ops.floor(uniform((batch,)) * (width - wide + 1))
        rows = ops.arange(height, dtype="float32")[None, :]
        cols = ops.arange(width, dtype="float32")[None, :]
        in_rows = (rows >= top[:, None]) & (rows < (top + tall)[:, None])
        in_cols = (cols >= left[:, None]) & (cols < (left + wide)[:, None])
        mask = in_rows[:, :, None] & in_cols[:, None, :] & erase[:, None, None]
        noise = ops.cast(uniform(ops.shape(images)), images.dtype)
        return ops.where(mask[..., None], noise, images)

    def compute_output_shape(self, input_shape: Any) -> Any:
        return input_shape

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}

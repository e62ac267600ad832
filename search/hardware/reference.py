"""The fixed reference network that throughput rounds are interleaved with.

A 2-core VM (or a GPU shared with other jobs) changes speed from second to second. Timing a
candidate between two short rounds of one fixed network and keeping the ratio cancels what
slows both: docs/architecture.md ("Measuring") has the figures. The ratio becomes images/s
again through the device's baseline, the reference's own throughput stored once per device,
so every figure on a device shares one scale and two runs agree on it.
"""

from __future__ import annotations

from collections.abc import Callable

import keras

# Part of the stored baseline's key: a different network must not reuse an older baseline.
REFERENCE_VERSION = "reference-v1"
REFERENCE_SHAPE = (32, 32, 3)

_timed: dict[int, Callable[[int], float]] = {}


def reference_model() -> keras.Model:
    """Small, and built from the layers candidates use (convolutions, depthwise, pooling,
    dense), always in float32 whatever the trial's precision policy, with fixed weights."""
    layers = keras.layers

    def init(seed: int) -> keras.initializers.Initializer:
        return keras.initializers.GlorotUniform(seed=seed)

    inputs = keras.Input(REFERENCE_SHAPE, dtype="float32")
    x = layers.Conv2D(16, 3, strides=2, padding="same", activation="relu", kernel_initializer=init(1), dtype="float32")(
        inputs
    )
    x = layers.DepthwiseConv2D(3, padding="same", activation="relu", depthwise_initializer=init(2), dtype="float32")(x)
    x = layers.Conv2D(32, 1, activation="relu", kernel_initializer=init(3), dtype="float32")(x)
    x = layers.GlobalAveragePooling2D(dtype="float32")(x)
    outputs = layers.Dense(10, kernel_initializer=init(4), dtype="float32")(x)
    return keras.Model(inputs, outputs, name="nas_reference")


def reference_forward(batch_size: int, warmup_seconds: float | None = None) -> Callable[[int], float]:
    """The reference's timed forward pass at `batch_size` (`calls` -> seconds, synced), built
    and warmed up (at most `warmup_seconds`) once per process: a trial pays for it only the
    first time."""
    from nas.search.hardware.timing import timed_forward, warm_up

    if batch_size not in _timed:
        run = timed_forward(reference_model(), batch_size, jit_compile=False)
        warm_up(run, warmup_seconds)
        _timed[batch_size] = run
    return _timed[batch_size]

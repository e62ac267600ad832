"""Keras' global precision policy, set for one block and restored after it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import keras


@contextmanager
def precision_policy(name: str) -> Iterator[None]:
    previous = keras.mixed_precision.global_policy().name
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)

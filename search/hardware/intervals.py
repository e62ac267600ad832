"""Intervals for a measured figure, from its timed rounds.

`median_interval` is a percentile bootstrap of the median: it assumes nothing about how round
times are distributed (they are skewed: a preempted round is slow, never fast), and it is
cheap for the tens of rounds a measurement has. The resampling is seeded, so the same rounds
always give the same interval.

What a user asks of a figure's interval is where measuring the network again would land, and
that second figure carries noise of its own: `repeat_interval` widens the median's interval by
sqrt(2) (the spread of the difference of two equally noisy estimates), which is what the
stored `low`/`high` are.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 2000
REPEAT_WIDENING = float(np.sqrt(2.0))


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The `confidence` interval of the median of `values` (at least 2 of them)."""
    data = np.asarray(values, dtype=float)
    if data.size < 2:
        raise ValueError("an interval needs at least 2 values")
    rng = np.random.default_rng(0)
    medians = np.median(data[rng.integers(0, data.size, size=(RESAMPLES, data.size))], axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(medians, [tail, 1.0 - tail])
    return float(low), float(high)


def repeat_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Where a repeat measurement's median is expected to fall (`confidence`), around this one's."""
    median = float(np.median(np.asarray(values, dtype=float)))
    low, high = median_interval(values, confidence)
    return median - REPEAT_WIDENING * (median - low), median + REPEAT_WIDENING * (high - median)


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two intervals share any value: the figures cannot be told apart."""
    return a[0] <= b[1] and b[0] <= a[1]

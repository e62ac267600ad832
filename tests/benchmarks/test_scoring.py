"""benchmarks/scoring.py: the hypervolume, KerasTuner's single score and the per-trial
overhead every benchmark reports, on known fronts and trials."""

from __future__ import annotations

import math

import pytest

from .package import benchmark


def test_hypervolume_of_known_fronts() -> None:
    hv = benchmark("scoring").hypervolume
    assert hv([]) == 0.0
    assert hv([(0.5, 4.0)]) == pytest.approx(0.5 * 1.0)  # reference point (0, 3)
    # Two non-dominated points: union of two rectangles.
    assert hv([(0.9, 3.5), (0.5, 4.0)]) == pytest.approx(0.9 * 0.5 + 0.5 * 0.5)
    # A dominated point and one below the reference add nothing.
    assert hv([(0.9, 3.5), (0.5, 4.0), (0.4, 3.2), (0.99, 2.0)]) == pytest.approx(0.7)
    # Another reference (the replay's is the table's slowest network).
    assert hv([(0.9, 3.5), (0.5, 4.0)], (0.5, 3.0)) == pytest.approx(0.4 * 0.5)


def test_a_front_of_images_per_second_is_scored_on_their_logarithm() -> None:
    scoring = benchmark("scoring")
    # Reference (0, log10 1000): 0.9 x (4 - 3) + 0.5 x (5 - 4).
    assert scoring.front_hypervolume([(0.9, 10_000), (0.5, 100_000)]) == pytest.approx(1.4)
    assert scoring.front_hypervolume([(0.9, 0.0)]) == 0.0  # no images/s: below any reference, no error
    assert scoring.single_score(0.9, 1_000) == pytest.approx(0.9 + 0.1 * 3)
    assert scoring.throughput_score(10_000) == pytest.approx(0.4)


def test_overhead_between_trial_ends() -> None:
    scoring = benchmark("scoring")
    # (end, seconds inside), out of order: gaps of 10 s (6 inside) and 5 s (busy 9: 0 outside);
    # the trial ending with another makes no gap.
    gaps = scoring.idle_gaps([(20.0, 6.0), (10.0, 9.0), (25.0, 9.0), (25.0, 1.0)])
    assert gaps == [(4.0, 10.0), (0.0, 5.0)]
    assert scoring.overhead_share(gaps) == pytest.approx((0.4 + 0.0) / 2)
    assert scoring.overhead_seconds(gaps) == pytest.approx(2.0)
    assert math.isnan(scoring.overhead_share([])) and math.isnan(scoring.overhead_seconds([]))

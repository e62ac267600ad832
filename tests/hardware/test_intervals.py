"""The interval of a measured figure, and the interleaving with the reference network that
cancels a machine's drift: the protocol's arithmetic on scripted round times (no timing)."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import pytest

from nas.search.hardware import timing
from nas.search.hardware.intervals import median_interval, overlap, repeat_interval


def test_the_interval_holds_the_median_narrows_with_rounds_and_is_repeatable() -> None:
    few = [100.0, 104.0, 97.0, 101.0, 99.0]
    many = few * 8
    low, high = median_interval(few)
    assert low <= statistics.median(few) <= high and low < high
    wide, narrow = high - low, median_interval(many)[1] - median_interval(many)[0]
    assert narrow < wide
    assert median_interval(few) == (low, high)  # seeded: the same rounds give the same interval
    assert median_interval([5.0] * 6) == (5.0, 5.0)
    with pytest.raises(ValueError):
        median_interval([1.0])
    # A repeat measurement has noise of its own: its interval is sqrt(2) wider on each side.
    median = statistics.median(few)
    repeat = repeat_interval(few)
    assert median - repeat[0] == pytest.approx(2**0.5 * (median - low))
    assert repeat[1] - median == pytest.approx(2**0.5 * (high - median))


def test_overlap() -> None:
    assert overlap((1, 3), (2, 4)) and overlap((1, 2), (2, 3)) and overlap((0, 10), (4, 5))
    assert not overlap((1, 2), (2.5, 3)) and not overlap((5, 6), (1, 4.9))


class _Machine:
    """A device whose speed halves for a stretch of time, as a busy 2-core VM does: every call
    costs its nominal seconds times the load of the moment (the number of calls so far picks
    the moment)."""

    def __init__(self) -> None:
        self.calls = 0

    def load(self) -> float:
        return 2.0 if 150 <= self.calls < 400 else 1.0

    def forward(self, seconds_per_call: float) -> Callable[[int], float]:
        def run(calls: int) -> float:
            spent = 0.0
            for _ in range(calls):
                spent += seconds_per_call * self.load()
                self.calls += 1
            return spent

        return run


def _measure(monkeypatch: pytest.MonkeyPatch, machine: _Machine, *, interleaved: bool) -> timing.Throughput:
    monkeypatch.setattr(timing, "timed_forward", lambda model, batch, jit: machine.forward(0.002))
    monkeypatch.setattr(timing, "warm_up", lambda run, limit=None: ([0.002] * 3, True))
    return timing.measure_throughput(
        None,  # type: ignore[arg-type]
        10,
        rounds=10,
        round_seconds=0.1,  # 50 candidate calls a round, 15 reference calls
        max_spread=1.0,
        reference=machine.forward(0.001) if interleaved else None,
        baseline=10_000.0,
    )


def test_a_slowdown_that_hits_candidate_and_reference_alike_cancels(monkeypatch: pytest.MonkeyPatch) -> None:
    # The candidate takes twice the reference's time per call: half its images/s, whatever the load.
    steady = _measure(monkeypatch, _Machine(), interleaved=True)
    assert steady.relative == pytest.approx(0.5) and steady.images_per_s == pytest.approx(5_000.0)
    assert steady.spread == pytest.approx(0.0, abs=0.05)
    assert steady.low <= steady.images_per_s <= steady.high  # type: ignore[operator]
    assert steady.baseline_images_per_s == 10_000.0 and steady.measured_images_per_s is not None

    plain = _measure(monkeypatch, _Machine(), interleaved=False)
    # Without the reference, the slow stretch moves the median and widens the rounds' spread.
    assert plain.relative is None and plain.spread > 0.3
    assert plain.images_per_s == statistics.median(plain.rounds)
    assert plain.low <= plain.images_per_s <= plain.high  # type: ignore[operator]

"""Throughput and latency, measured by the protocol in docs/architecture.md ("Measuring").

A tf.function with a fixed input signature, the input already on the device, warm-up until
consecutive calls agree (tracing, XLA compilation, autotuning and caches are done), then
timed rounds each ended by a device sync; the median is the figure and the relative spread
says how far to trust it. A too-noisy throughput is measured again, once, with twice the
rounds.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import keras

from nas.search.runtime import import_tensorflow

WARMUP_MIN_CALLS = 3
WARMUP_MAX_SECONDS = 20.0
WARMUP_SETTLED = 0.10  # the last calls agree within 10%
LATENCY_MIN_CALLS = 30


@dataclass(frozen=True)
class Throughput:
    images_per_s: float  # median over rounds
    spread: float  # interquartile range / median of the per-round figures
    trustworthy: bool  # spread within the allowed maximum
    batch_size: int
    calls_per_round: int
    rounds: tuple[float, ...]  # images/s of each timed round
    warmup_calls: int
    seconds: float  # wall time of the whole measurement
    # False: the warm-up hit its time limit still changing, so the rounds may include it.
    # (Figures cached before this was recorded read as settled.)
    warmup_settled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Throughput:
        return cls(**{**data, "rounds": tuple(data["rounds"])})


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    spread: float  # interquartile range / median of the single-call times
    trustworthy: bool
    calls: int
    warmup_calls: int
    seconds: float
    warmup_settled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Latency:
        return cls(**data)


def _settled(times: list[float]) -> bool:
    last = times[-WARMUP_MIN_CALLS:]
    return len(times) >= WARMUP_MIN_CALLS and (max(last) - min(last)) <= WARMUP_SETTLED * min(last)


def _spread(figures: list[float]) -> float:
    """Interquartile range over median: one preempted round on a shared machine does not
    make an otherwise steady measurement look noisy, a wobbling one still does."""
    q1, _, q3 = statistics.quantiles(figures, n=4, method="inclusive")
    return (q3 - q1) / statistics.median(figures)


def _timed_forward(model: keras.Model, batch_size: int, jit_compile: bool) -> Callable[[int], float]:
    """A function that runs `calls` forward passes and returns their seconds, synced."""
    tf = import_tensorflow()
    shape = (batch_size, *model.input_shape[1:])
    forward = tf.function(
        lambda x: model(x, training=False),
        input_signature=[tf.TensorSpec(shape, tf.float32)],
        jit_compile=jit_compile,
    )
    # Creating the input inside the device scope keeps host-to-device copies out of the timing.
    device = "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"
    with tf.device(device):
        x = tf.random.uniform(shape, dtype=tf.float32, seed=0)

    def run(calls: int) -> float:
        t0 = time.perf_counter()
        out = None
        for _ in range(calls):
            out = forward(x)
        # Reading the (tiny) result back waits for the device to finish every queued call.
        assert out is not None
        out.numpy()
        return time.perf_counter() - t0

    return run


def _warm_up(run: Callable[[int], float]) -> tuple[list[float], bool]:
    """Single calls until their times settle, at most WARMUP_MAX_SECONDS; returns the times
    and whether they settled (a measurement that never settled is not trustworthy)."""
    times: list[float] = []
    while not _settled(times) and sum(times) < WARMUP_MAX_SECONDS:
        times.append(run(1))
    return times, _settled(times)


def measure_throughput(
    model: keras.Model,
    batch_size: int,
    *,
    rounds: int = 5,
    round_seconds: float = 0.2,
    max_spread: float = 0.10,
    jit_compile: bool = False,
) -> Throughput:
    started = time.perf_counter()
    run = _timed_forward(model, batch_size, jit_compile)
    warmup, settled = _warm_up(run)
    per_call = statistics.median(warmup[-WARMUP_MIN_CALLS:])
    calls = max(1, round(round_seconds / max(per_call, 1e-9)))

    def timed(n_rounds: int) -> list[float]:
        return [calls * batch_size / run(calls) for _ in range(n_rounds)]

    figures = timed(rounds)
    spread = _spread(figures)
    if spread > max_spread:
        figures = timed(2 * rounds)  # one retry, longer, before we call it noisy
        spread = _spread(figures)
    return Throughput(
        images_per_s=statistics.median(figures),
        spread=spread,
        trustworthy=spread <= max_spread and settled,
        batch_size=batch_size,
        calls_per_round=calls,
        rounds=tuple(figures),
        warmup_calls=len(warmup),
        seconds=time.perf_counter() - started,
        warmup_settled=settled,
    )


def measure_latency(
    model: keras.Model,
    *,
    seconds: float = 1.0,
    max_spread: float = 0.10,
    jit_compile: bool = False,
) -> Latency:
    """Milliseconds per single image, each call timed on its own and synced (p50 and p95)."""
    started = time.perf_counter()
    run = _timed_forward(model, 1, jit_compile)
    warmup, settled = _warm_up(run)
    per_call = statistics.median(warmup[-WARMUP_MIN_CALLS:])
    calls = max(LATENCY_MIN_CALLS, round(seconds / max(per_call, 1e-9)))
    times = [run(1) * 1000.0 for _ in range(calls)]
    spread = _spread(times)
    cuts = statistics.quantiles(times, n=20, method="inclusive")
    return Latency(
        p50_ms=statistics.median(times),
        p95_ms=cuts[18],
        spread=spread,
        trustworthy=spread <= max_spread and settled,
        calls=calls,
        warmup_calls=len(warmup),
        seconds=time.perf_counter() - started,
        warmup_settled=settled,
    )


def measure_matmul_peak(seconds: float = 1.0, n: int = 1024, dtype: str = "float32") -> float:
    """FLOP/s of a large `dtype` matmul on the current device: a practical peak (CPU vendors
    publish no single figure, and a GPU's data sheet is a ceiling few kernels reach)."""
    tf = import_tensorflow()
    device = "/GPU:0" if tf.config.list_logical_devices("GPU") else "/CPU:0"
    with tf.device(device):
        a = tf.cast(tf.random.uniform((n, n), seed=1), dtype)
        b = tf.cast(tf.random.uniform((n, n), seed=2), dtype)
    matmul = tf.function(lambda x, y: tf.matmul(x, y))
    for _ in range(3):
        matmul(a, b).numpy()
    best = float("inf")
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        matmul(a, b).numpy()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best

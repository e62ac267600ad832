"""Inference throughput, measured by the protocol in DESIGN.md.

A tf.function with a fixed input signature, the input already on the device, warm-up until
consecutive calls agree (tracing, autotuning and caches are done), then timed rounds each
ended by a device sync; the median round is the figure and the relative spread says how
far to trust it. A too-noisy measurement is repeated once with more rounds.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

import keras

from .quiet import import_tensorflow

WARMUP_MIN_CALLS = 3
WARMUP_MAX_SECONDS = 20.0
WARMUP_SETTLED = 0.10  # the last calls agree within 10%


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _settled(times: list[float]) -> bool:
    last = times[-WARMUP_MIN_CALLS:]
    return len(times) >= WARMUP_MIN_CALLS and (max(last) - min(last)) <= WARMUP_SETTLED * min(last)


def measure_throughput(
    model: keras.Model,
    batch_size: int,
    *,
    rounds: int = 5,
    round_seconds: float = 0.2,
    max_spread: float = 0.10,
    jit_compile: bool = False,
) -> Throughput:
    tf = import_tensorflow()
    started = time.perf_counter()
    shape = (batch_size, *model.input_shape[1:])
    spec = tf.TensorSpec(shape, tf.float32)
    forward = tf.function(lambda x: model(x, training=False), input_signature=[spec], jit_compile=jit_compile)
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

    times: list[float] = []
    while not _settled(times) and sum(times) < WARMUP_MAX_SECONDS:
        times.append(run(1))
    per_call = statistics.median(times[-WARMUP_MIN_CALLS:])
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
        trustworthy=spread <= max_spread,
        batch_size=batch_size,
        calls_per_round=calls,
        rounds=tuple(figures),
        warmup_calls=len(times),
        seconds=time.perf_counter() - started,
    )


def _spread(figures: list[float]) -> float:
    """Interquartile range over median: one preempted round on a shared machine does not
    make an otherwise steady measurement look noisy, a wobbling one still does."""
    q1, _, q3 = statistics.quantiles(figures, n=4, method="inclusive")
    return (q3 - q1) / statistics.median(figures)

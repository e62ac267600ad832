"""Throughput and latency, measured by the protocol in docs/architecture.md ("Measuring").

A tf.function with a fixed input signature, the input already on the device, warm-up until
consecutive calls agree (tracing, XLA compilation, autotuning and caches are done), then
timed rounds each ended by a device sync; the median is the figure and the relative spread
says how far to trust it. A too-noisy throughput is measured again, once, with twice the
rounds.

With a reference (hardware/reference.py), every candidate round sits between two short rounds
of a fixed network and the figure is the median ratio candidate/reference times the device's
baseline: a slowdown that hits both cancels. Every throughput carries a 95% bootstrap interval
of its median (hardware/intervals.py).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import keras

from nas.search.hardware.figures import Latency, Throughput
from nas.search.hardware.intervals import repeat_interval
from nas.search.runtime import import_tensorflow

WARMUP_MIN_CALLS = 3
WARMUP_MAX_SECONDS = 20.0
WARMUP_SETTLED = 0.10  # the last calls agree within 10%
LATENCY_MIN_CALLS = 30
REFERENCE_SHARE = 0.3  # a reference round lasts this fraction of a candidate round


def _settled(times: list[float]) -> bool:
    last = times[-WARMUP_MIN_CALLS:]
    return len(times) >= WARMUP_MIN_CALLS and (max(last) - min(last)) <= WARMUP_SETTLED * min(last)


def _spread(figures: list[float]) -> float:
    """Interquartile range over median: one preempted round on a shared machine does not
    make an otherwise steady measurement look noisy, a wobbling one still does."""
    q1, _, q3 = statistics.quantiles(figures, n=4, method="inclusive")
    return (q3 - q1) / statistics.median(figures)


def timed_forward(model: keras.Model, batch_size: int, jit_compile: bool) -> Callable[[int], float]:
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


def warm_up(run: Callable[[int], float], max_seconds: float | None = None) -> tuple[list[float], bool]:
    """Single calls until their times settle, at most `max_seconds` (WARMUP_MAX_SECONDS);
    returns the times and whether they settled (a measurement that never settled is not
    trustworthy)."""
    limit = WARMUP_MAX_SECONDS if max_seconds is None else max_seconds
    times: list[float] = []
    while not _settled(times) and sum(times) < limit:
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
    reference: Callable[[int], float] | None = None,
    baseline: float | None = None,
    warmup_seconds: float | None = None,
) -> Throughput:
    """Images/s of `model` at `batch_size`. `reference` (a warmed-up timed forward of the
    reference network at the same batch size) interleaves its rounds with the candidate's;
    `baseline` is the reference's images/s on this device that turns ratios into images/s
    (default: the reference's median during this measurement)."""
    started = time.perf_counter()
    run = timed_forward(model, batch_size, jit_compile)
    warmup, settled = warm_up(run, warmup_seconds)
    per_call = statistics.median(warmup[-WARMUP_MIN_CALLS:])
    calls = max(1, round(round_seconds / max(per_call, 1e-9)))
    reference_calls = 0
    if reference is not None:
        reference_per_call = statistics.median(reference(1) for _ in range(WARMUP_MIN_CALLS))
        reference_calls = max(1, round(REFERENCE_SHARE * round_seconds / max(reference_per_call, 1e-9)))

    def reference_round() -> float:
        assert reference is not None
        return reference_calls * batch_size / reference(reference_calls)

    def timed(n_rounds: int) -> tuple[list[float], list[float], list[float]]:
        """Images/s of each candidate round, its ratio to the reference rounds on either side
        of it, and the reference rounds."""
        figures: list[float] = []
        ratios: list[float] = []
        references = [reference_round()] if reference else []
        for _ in range(n_rounds):
            figures.append(calls * batch_size / run(calls))
            if reference:
                references.append(reference_round())
                ratios.append(figures[-1] / ((references[-2] + references[-1]) / 2))
        return figures, ratios, references

    figures, ratios, references = timed(rounds)
    spread = _spread(ratios or figures)
    if spread > max_spread and reference is None:
        figures, ratios, references = timed(2 * rounds)  # one retry, longer, before we call it noisy
        spread = _spread(ratios or figures)
    measured = statistics.median(figures)
    relative: float | None = None
    scale: float | None = None
    if ratios:
        scale = baseline or statistics.median(references)
        relative = statistics.median(ratios)
        low, high = (end * scale for end in repeat_interval(ratios))
        figure = relative * scale
        # A ratio's rounds carry the reference's noise too, so their spread overstates the
        # figure's: the interval says how far the figure can move, and judges it instead of a
        # second, longer measurement (which doubled the time on a busy machine).
        steady = (high - low) / 2 <= max_spread * figure
    else:
        figure, (low, high) = measured, repeat_interval(figures)
        steady = spread <= max_spread
    return Throughput(
        images_per_s=figure,
        spread=spread,
        trustworthy=steady and settled,
        batch_size=batch_size,
        calls_per_round=calls,
        rounds=tuple(figures),
        warmup_calls=len(warmup),
        seconds=time.perf_counter() - started,
        warmup_settled=settled,
        low=low,
        high=high,
        relative=relative,
        reference_images_per_s=statistics.median(references) if references else None,
        baseline_images_per_s=scale,
        measured_images_per_s=measured,
    )


def measure_latency(
    model: keras.Model,
    *,
    seconds: float = 1.0,
    max_spread: float = 0.10,
    jit_compile: bool = False,
    warmup_seconds: float | None = None,
) -> Latency:
    """Milliseconds per single image, each call timed on its own and synced (p50 and p95)."""
    started = time.perf_counter()
    run = timed_forward(model, 1, jit_compile)
    warmup, settled = warm_up(run, warmup_seconds)
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


def measure_together(
    models: list[tuple[keras.Model, bool]],
    batch_size: int,
    *,
    rounds: int,
    round_seconds: float,
    reference: Callable[[int], float],
    baseline: float,
    max_spread: float = 0.10,
    warmup_seconds: float | None = None,
) -> list[Throughput]:
    """Throughput of several (model, jit_compile) measured in one process, round-robin: round r
    of every model, each between two reference rounds, before round r + 1 of any. A slowdown
    in the middle of the run lands on every model alike instead of on whichever was timed
    then, so their figures are comparable with each other beyond what separate measurements
    allow. Used to confirm a front after the search."""
    started = time.perf_counter()
    runs = [timed_forward(model, batch_size, jit) for model, jit in models]
    warmups = [warm_up(run, warmup_seconds) for run in runs]
    calls = [max(1, round(round_seconds / max(statistics.median(w[-WARMUP_MIN_CALLS:]), 1e-9))) for w, _ in warmups]
    reference_per_call = statistics.median(reference(1) for _ in range(WARMUP_MIN_CALLS))
    reference_calls = max(1, round(REFERENCE_SHARE * round_seconds / max(reference_per_call, 1e-9)))

    def reference_round() -> float:
        return reference_calls * batch_size / reference(reference_calls)

    figures: list[list[float]] = [[] for _ in models]
    ratios: list[list[float]] = [[] for _ in models]
    before = reference_round()
    for _ in range(rounds):
        for i, run in enumerate(runs):
            figures[i].append(calls[i] * batch_size / run(calls[i]))
            after = reference_round()
            ratios[i].append(figures[i][-1] / ((before + after) / 2))
            before = after
    seconds = (time.perf_counter() - started) / len(models)
    out = []
    for i, (_, settled) in enumerate(warmups):
        relative = statistics.median(ratios[i])
        low, high = repeat_interval(ratios[i])
        steady = (high - low) / 2 <= max_spread * relative  # judged by the interval, as in measure_throughput
        out.append(
            Throughput(
                images_per_s=relative * baseline,
                spread=_spread(ratios[i]),
                trustworthy=steady and settled,
                batch_size=batch_size,
                calls_per_round=calls[i],
                rounds=tuple(figures[i]),
                warmup_calls=len(warmups[i][0]),
                seconds=seconds,
                warmup_settled=settled,
                low=low * baseline,
                high=high * baseline,
                relative=relative,
                baseline_images_per_s=baseline,
                measured_images_per_s=statistics.median(figures[i]),
            )
        )
    return out

from __future__ import annotations

from typing import Any

import optuna
import pytest

from nas.search import runtime

runtime.import_tensorflow()

from nas.search.hardware import (
    HardwareProfiler,
    describe_device,
    measure_latency,
    measure_matmul_peak,
    measure_throughput,
    timing,
)
from nas.search.nets import build_model
from nas.search.space import MeasureSpec, load_space


def _model():
    space = load_space("tiny")
    trial = optuna.create_study(directions=["maximize", "maximize"]).ask()
    return build_model(space.sample(trial, num_classes=10, channels=1), seed=0)


def test_throughput_is_positive_with_a_spread() -> None:
    result = measure_throughput(_model(), 16, rounds=3, round_seconds=0.02)
    assert result.images_per_s > 0
    assert len(result.rounds) in (3, 6)  # 6 when the first attempt was too noisy
    assert all(r > 0 for r in result.rounds)
    assert min(result.rounds) <= result.images_per_s <= max(result.rounds)
    assert result.spread >= 0
    assert result.trustworthy == (result.spread <= 0.10 and result.warmup_settled)
    assert result.warmup_calls >= 3
    assert result.calls_per_round >= 1
    assert result.batch_size == 16


def test_device_description_names_the_cpu() -> None:
    info = describe_device()
    assert info["tensorflow"].startswith("2.")
    assert info["name"]
    gpus = runtime.import_tensorflow().config.list_physical_devices("GPU")
    if gpus:  # the machine decides which description is due; either is checked
        assert info["kind"] == "gpu" and info["visible_gpus"] == len(gpus)
    else:
        assert info["kind"] == "cpu" and info["threads"] >= 1


def test_latency_percentiles() -> None:
    result = measure_latency(_model(), seconds=0.2)
    assert result.calls >= 30
    assert 0 < result.p50_ms <= result.p95_ms
    assert result.spread >= 0
    assert result.warmup_calls >= 3


def test_xla_compiled_measurement_runs_on_this_device() -> None:
    result = measure_throughput(_model(), 8, rounds=3, round_seconds=0.02, jit_compile=True)
    assert result.images_per_s > 0


def test_matmul_peak_is_plausible() -> None:
    peak = measure_matmul_peak(seconds=0.2, n=256)
    # Above 100 MFLOP/s and below 100 TFLOP/s on anything this suite runs on.
    assert 1e8 < peak < 1e14


def test_the_spaces_measuring_costs_reach_every_measurement(monkeypatch: pytest.MonkeyPatch) -> None:
    """measure.warmup_seconds, latency_seconds, baseline_rounds and peak_seconds are what the
    profiler measures with (the defaults are today's costs; a test space sets them small)."""
    from nas.search.hardware import profiler as profiler_module
    from nas.search.hardware.reference import _timed

    defaults = MeasureSpec()
    assert (defaults.warmup_seconds, defaults.latency_seconds) == (20.0, 1.0)
    assert (defaults.baseline_rounds, defaults.peak_seconds) == (15, 1.0)
    calls: list[tuple[str, dict[str, Any]]] = []

    def spy(name: str) -> Any:
        real = getattr(profiler_module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append((name, kwargs))
            return real(*args, **kwargs)

        return wrapper

    for name in ("measure_throughput", "measure_latency", "measure_matmul_peak"):
        monkeypatch.setattr(profiler_module, name, spy(name))
    monkeypatch.setattr(timing, "warm_up", spy_warm_up := _WarmUps(timing.warm_up))
    _timed.clear()  # the reference's warm-up too, not one left by an earlier test
    spec = MeasureSpec(
        batch_sizes=[8], rounds=3, round_seconds=0.01, warmup_seconds=0.3, latency_seconds=0.05,
        baseline_rounds=4, peak_seconds=0.05,
    )  # fmt: skip
    hardware = HardwareProfiler(spec, None)
    cost = hardware.measure(_model(), precision="float32", xla=False)
    hardware.peak_flops("float32")
    baseline, candidate = [kw for name, kw in calls if name == "measure_throughput"]
    assert baseline["rounds"] == 4 and baseline["warmup_seconds"] == 0.3
    assert candidate["rounds"] == 3 and candidate["warmup_seconds"] == 0.3
    (latency,) = [kw for name, kw in calls if name == "measure_latency"]
    assert latency["seconds"] == 0.05 and latency["warmup_seconds"] == 0.3
    (peak,) = [kw for name, kw in calls if name == "measure_matmul_peak"]
    assert peak["seconds"] == 0.05
    assert spy_warm_up.limits and set(spy_warm_up.limits) == {0.3}  # the reference's, the baseline's, ...
    assert cost.latency is not None and cost.primary.images_per_s > 0


class _WarmUps:
    """timing.warm_up as it is, noting the limit each warm-up was given."""

    def __init__(self, real: Any) -> None:
        self.real, self.limits = real, []  # type: ignore[var-annotated]

    def __call__(self, run: Any, limit: float | None = None) -> Any:
        self.limits.append(limit)
        return self.real(run, limit)

from __future__ import annotations

import optuna

from nas.search import runtime

runtime.import_tensorflow()

from nas.search.hardware import (
    describe_device,
    measure_latency,
    measure_matmul_peak,
    measure_throughput,
)
from nas.search.nets import build_model
from nas.search.space import load_space


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
    assert result.trustworthy == (result.spread <= 0.10)
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

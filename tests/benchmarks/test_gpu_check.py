"""benchmarks/gpu_check.py without a GPU: it refuses to report CPU figures as GPU ones, and
`--cpu` runs its measuring parts here so the prepared script is known to work end to end."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .package import command, environment


def _tensorflow_sees_a_gpu() -> bool:
    from nas.search import runtime

    return bool(runtime.import_tensorflow().config.list_physical_devices("GPU"))


@pytest.mark.slow
def test_without_a_gpu_it_refuses(tmp_path: Path) -> None:
    if _tensorflow_sees_a_gpu():
        pytest.skip("TensorFlow sees a GPU here")
    out = tmp_path / "check.json"
    result = subprocess.run(
        command("gpu_check", "--out", str(out)), env=environment(), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 2, result.stderr
    assert "Error: TensorFlow sees no GPU here" in result.stderr
    assert not out.exists()


@pytest.mark.slow
def test_cpu_mode_runs_the_measuring_parts(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    # One network, float32 and float16: the script's paths (the skip included), not its figures;
    # bfloat16 with XLA trains and measures in tests/training/test_precision.py.
    args = command("gpu_check", "--cpu", "--networks", "digits-small", "--out", str(out))
    args += ["--precisions", "float32,mixed_float16"]
    result = subprocess.run(args, env=environment(), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert [p["dtype"] for p in report["peaks"]] == ["float32", "bfloat16"]
    assert all(p["measured_flops_per_s"] > 1e8 and p["data_sheet"] is None for p in report["peaks"])
    # float16 is emulated on a CPU, so the script skips it there and says why.
    assert "skip digits-small mixed_float16: float16 on a CPU is emulated" in result.stdout
    combos = {(r["network"], r["precision"], r["xla"]) for r in report["rows"]}
    assert combos == {("digits-small", "float32", x) for x in (False, True)}
    for row in report["rows"]:
        assert row["throughput"] > 0 and row["train_step_ms"] > 0 and row["latency_p95_ms"] >= row["latency_p50_ms"]
        assert row["flops"] > 0 and row["repeat_spread"] >= 0 and 0 < row["interval_width"] < 2
    assert report["searches"] == {"not_run": "--cpu: parts 3-5 need GPU 0"}
    assert "| digits-small | float32 | on |" in result.stdout

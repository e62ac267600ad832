"""GPU paths that fail loud: peaks matched by whole model names, TF32 counted, GPUs asked for
but unseen refused with their cause, shared GPUs without a cap named. No GPU is needed: a
worker environment that hides every GPU stands in for a machine without a usable one."""

from __future__ import annotations

from pathlib import Path

import pytest

from nas.errors import NasError
from nas.search.hardware import gpus
from nas.search.hardware.peaks import data_sheet_peak, find_data_sheet
from nas.search.workers import placement, plan_workers
from nas.search.workers.placement import uncapped_shared_gpus

from ..helpers import nas_env, run_nas


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L40S", "L40S"),
        ("Tesla V100-PCIE-32GB", "V100 PCIe"),
        ("Tesla T4", "T4"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        # Substrings of known models that are other GPUs: no data sheet rather than a wrong one.
        ("NVIDIA RTX A1000", None),
        ("NVIDIA A10G", None),
        ("NVIDIA H1000", None),
    ],
)
def test_data_sheets_match_whole_model_names(name: str, label: str | None) -> None:
    sheet = find_data_sheet(name)
    assert (sheet.label if sheet else None) == label


def test_float32_peak_is_tf32_where_tensorflow_uses_it() -> None:
    a100 = {"kind": "gpu", "name": "NVIDIA A100-SXM4-40GB", "compute_capability": (8, 0), "tf32": True}
    assert data_sheet_peak(a100, "float32") == (156e12, "data sheet: A100, TF32 tensor cores")
    assert data_sheet_peak(a100 | {"tf32": False}, "float32") == (19.5e12, "data sheet: A100, float32")
    assert data_sheet_peak(a100, "mixed_bfloat16") == (312e12, "data sheet: A100, 16-bit tensor cores")
    # Volta has no TF32: float32 is the CUDA-core figure whatever the flag says.
    v100 = {"kind": "gpu", "name": "Tesla V100-SXM2-16GB", "compute_capability": (7, 0), "tf32": True}
    assert data_sheet_peak(v100, "float32") == (15.7e12, "data sheet: V100 SXM2, float32")
    assert data_sheet_peak({"kind": "cpu", "name": "AMD EPYC"}, "float32") is None
    assert data_sheet_peak({"kind": "gpu", "name": "NVIDIA RTX A1000", "compute_capability": (8, 6)}, "float32") is None


def test_cuda_load_failures_are_picked_out_of_tensorflows_log() -> None:
    log = "\n".join(
        [
            "2026-11-30 12:00:00.000001: I tensorflow/core/util/port.cc:153] oneDNN custom operations are on.",
            "2026-11-30 12:00:00.000002: W tensorflow/core/common_runtime/gpu/gpu_device.cc:2365] Cannot dlopen "
            "some GPU libraries. Please make sure the missing libraries mentioned above are installed properly",
            "2026-11-30 12:00:00.000003: E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:152] "
            "failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
        ]
    )
    assert gpus.cuda_failures(log) == [
        "Cannot dlopen some GPU libraries. Please make sure the missing libraries mentioned above are installed "
        "properly",
        "failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
    ]


def test_missing_gpu_message_names_the_likely_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    def message(drivers: int | None, *, built: bool = True, log: str = "") -> str:
        monkeypatch.setattr(gpus, "nvidia_smi_gpus", lambda: drivers)
        return gpus.missing_gpu_message("--gpus 0", 0, 1, cuda_build=built, log=log)

    hint = "; pip install -e '.[gpu]' installs TensorFlow's CUDA libraries"
    assert (
        message(1, built=False)
        == f"--gpus 0: TensorFlow sees 0 of 1 GPU(s) (this TensorFlow is built without CUDA){hint}"
    )
    assert "(no NVIDIA driver answers here (nvidia-smi is missing or fails))" in message(None)
    assert "(the driver lists 0 GPU(s))" in message(0)
    cuda = "W gpu_device.cc:2365] Cannot dlopen some GPU libraries."
    assert "(TensorFlow could not load CUDA: Cannot dlopen some GPU libraries.)" in message(1, log=cuda)
    assert "(a driver or CUDA version mismatch is likely (--debug shows" in message(1)


def test_gpu_indices_count_among_the_visible_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpus.visible_to_this_process(["0", "3"]) == ["0", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert gpus.visible_to_this_process(["1", "0"]) == ["3", "2"]
    with pytest.raises(NasError, match=r"^gpus 2: CUDA_VISIBLE_DEVICES='2,3' makes 2 GPU\(s\) visible"):
        gpus.visible_to_this_process(["2"])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    with pytest.raises(NasError, match="hides every GPU"):
        gpus.visible_to_this_process(["0"])


def test_workers_sharing_a_gpu_without_a_cap_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement, "gpu_memory_mb", lambda gpu: None)  # nvidia-smi cannot tell
    plan = plan_workers(3, ["0", "1"], 2, cpus=[0, 1])
    assert uncapped_shared_gpus(plan) == [
        "Warning: 2 workers share GPU 0 without a memory cap (nvidia-smi could not report its memory), "
        "so the first to start may take all of it"
    ]
    monkeypatch.setattr(placement, "gpu_memory_mb", lambda gpu: 80_000)
    plan = plan_workers(4, ["0", "1"], 2, cpus=[0, 1])
    assert uncapped_shared_gpus(plan) == [] and {p.gpu_memory_limit_mb for p in plan} == {36_000}


def test_unused_gpus_are_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(gpus, "nvidia_smi_gpus", lambda: 2)
    assert gpus.unused_gpu_warning(0) == (
        "Warning: the NVIDIA driver lists 2 GPU(s) but TensorFlow sees none, so this search measures the CPU; "
        "pip install -e '.[gpu]' installs TensorFlow's CUDA libraries (--debug shows TensorFlow's CUDA messages)"
    )
    assert gpus.unused_gpu_warning(1) is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")  # hidden on purpose
    assert gpus.unused_gpu_warning(0) is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(gpus, "nvidia_smi_gpus", lambda: None)
    assert gpus.unused_gpu_warning(0) is None


def test_gpus_hidden_from_the_search_are_refused(tmp_path: Path) -> None:
    env = nas_env(CUDA_VISIBLE_DEVICES="-1")
    result = run_nas("search", "tiny", "--gpus", "0", "--trials", "2", cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "Error: --gpus 0: CUDA_VISIBLE_DEVICES='-1' hides every GPU from this process"
    assert not (tmp_path / "nas.db").exists()


@pytest.mark.slow
def test_a_pool_worker_that_finds_no_gpu_stops_the_search(tmp_path: Path) -> None:
    """Workers placed on a GPU (NAS_GPU, as the pool sets it) in an environment where
    TensorFlow sees none: each stops with the cause instead of measuring the CPU, the search
    exits 2 with that line, and no trial ran."""
    env = nas_env(NAS_GPU="0", CUDA_VISIBLE_DEVICES="-1")
    result = run_nas("search", "tiny", "--workers", "2", "--trials", "2", cwd=tmp_path, env=env)
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: worker on GPU 0: TensorFlow sees 0 of 1 GPU(s) ("), result.stderr
    assert last.endswith("pip install -e '.[gpu]' installs TensorFlow's CUDA libraries"), result.stderr
    import optuna

    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{tmp_path / 'nas.db'}")
    assert not study.trials

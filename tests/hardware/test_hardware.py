"""Device fingerprint, precision filtering, the measurement cache, the device lock."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from nas.search import runtime

runtime.import_tensorflow()

import keras

from nas.errors import NasError
from nas.search.engine import (
    SearchEvents,
    restrict_to_device,
)
from nas.search.hardware import (
    DeviceLock,
    HardwareProfiler,
    architecture_signature,
    describe_device,
    device_key,
    lock_name,
    unsupported_precisions,
)
from nas.search.nets import build_model
from nas.search.space import MeasureSpec, load_space, space_from_dict
from nas.search.training import precision_policy
from nas.storage import MeasurementCache, open_storage, resolve_storage_url

from ..helpers import REPO, nas_env


class Recorder(SearchEvents):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def message(self, text: str) -> None:
        self.lines.append(text)


def _candidate(seed: int = 0):  # type: ignore[no-untyped-def]
    space = load_space("tiny")
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed)).ask()
    return space.sample(trial, num_classes=10, channels=1)


def test_fingerprint_fields_and_key() -> None:
    info = describe_device()
    for field in ("kind", "name", "tensorflow", "cuda", "cudnn"):
        assert field in info
    key = device_key(info, precision="float32", xla=False)
    assert key == device_key(dict(info), precision="float32", xla=False)
    assert key != device_key(info, precision="mixed_bfloat16", xla=False)
    assert key != device_key(info, precision="float32", xla=True)
    assert key != device_key({**info, "name": "another cpu"}, precision="float32", xla=False)


def test_lock_name_is_the_device_or_the_pinned_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    # Known affinities, not this machine's: a cpuset or taskset would change the real one.
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert lock_name({"kind": "cpu"}) == "cpu"  # every core: the one CPU lock of the machine
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 1})
    assert lock_name({"kind": "cpu"}) == "cpu1-3"  # a pool worker's cores
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert lock_name({"kind": "gpu"}) == "gpu2"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-GPU-ab12/1/0")
    assert lock_name({"kind": "gpu"}) == "gpuMIG-GPU-ab12_1_0"  # a file name, no folders


def test_locks_live_in_the_tests_own_folder(lock_dir: Path) -> None:
    assert DeviceLock("cpu").main.parent == lock_dir
    assert nas_env()["NAS_LOCK_DIR"] == str(lock_dir)  # and in every `nas` it starts


def test_precision_policies_by_device() -> None:
    assert set(unsupported_precisions({"kind": "cpu"})) == {"mixed_float16"}
    assert unsupported_precisions({"kind": "gpu", "compute_capability": (9, 0)}) == {}
    assert set(unsupported_precisions({"kind": "gpu", "compute_capability": (7, 5)})) == {"mixed_bfloat16"}
    assert set(unsupported_precisions({"kind": "gpu", "compute_capability": (6, 1)})) == {
        "mixed_float16",
        "mixed_bfloat16",
    }


def _space_with_precision(precision: object):  # type: ignore[no-untyped-def]
    return space_from_dict({"name": "p", "model": {"stages": [{"filters": 8}]}, "compute": {"precision": precision}})


def test_cpu_worker_drops_float16_with_one_warning() -> None:
    events = Recorder()
    space = _space_with_precision({"choice": ["float32", "mixed_float16", "mixed_bfloat16"]})
    restricted = restrict_to_device(space, {"kind": "cpu", "name": "x", "threads": 2}, events)
    assert restricted.spec.compute.precision.choices == ("float32", "mixed_bfloat16")
    assert len(events.lines) == 1 and "mixed_float16" in events.lines[0]
    # The study keeps the original space: only this worker's copy changed.
    assert space.spec.compute.precision.choices == ("float32", "mixed_float16", "mixed_bfloat16")
    unchanged = Recorder()
    assert restrict_to_device(restricted, {"kind": "cpu"}, unchanged) is restricted
    assert unchanged.lines == []


def test_cpu_worker_refuses_a_space_of_only_float16() -> None:
    with pytest.raises(NasError, match=r"compute.precision: nothing this CPU .* can run: mixed_float16"):
        restrict_to_device(_space_with_precision("mixed_float16"), {"kind": "cpu", "threads": 2}, Recorder())


def test_bfloat16_model_builds_and_runs_on_cpu() -> None:
    candidate = _candidate()
    with precision_policy("mixed_bfloat16"):
        model = build_model(candidate, seed=0)
    assert keras.mixed_precision.global_policy().name == "float32"  # restored
    assert model.get_layer("stem_conv").compute_dtype == "bfloat16"
    assert model.output.dtype == "float32"
    assert model(keras.ops.zeros((2, 8, 8, 1))).shape == (2, 10)


def _profiler(db: Path, **spec: object) -> HardwareProfiler:
    storage = open_storage(resolve_storage_url(f"sqlite:///{db}"))
    measure = MeasureSpec(batch_sizes=[16], latency=True, rounds=3, round_seconds=0.02, **spec)  # type: ignore[arg-type]
    return HardwareProfiler(measure, MeasurementCache(storage.engine))


@pytest.mark.slow
def test_cache_hit_and_miss(tmp_path: Path) -> None:
    db = tmp_path / "nas.db"
    candidate = _candidate()
    first = _profiler(db).measure(build_model(candidate, seed=0), precision="float32", xla=False)
    assert first.cached == {"throughput@16": False, "latency": False}

    # Another profiler (another trial, study or process) on the same database and device;
    # a freshly built model of the same architecture, other weights.
    other = _profiler(db)
    again = other.measure(build_model(candidate, seed=99), precision="float32", xla=False)
    assert again.cached == {"throughput@16": True, "latency": True}
    assert again.primary == first.primary and again.latency == first.latency

    # Another policy or compiler setting is another measurement.
    xla = other.measure(build_model(candidate, seed=0), precision="float32", xla=True)
    assert xla.cached["throughput@16"] is False
    stats = MeasurementCache(open_storage(resolve_storage_url(f"sqlite:///{db}")).engine).stats()
    # 2 throughputs, 2 latencies and the device's reference baseline, measured by the first
    # profiler and read by the second (the third hit).
    assert stats.entries == 5 and stats.hits == 3 and stats.seconds_saved > 0
    assert other.baseline(16) == first.primary.baseline_images_per_s


@pytest.mark.slow
def test_cache_hit_from_another_process(tmp_path: Path) -> None:
    db = tmp_path / "nas.db"
    code = (
        "import optuna\n"
        "from tests.hardware.test_hardware import _candidate, _profiler\n"
        "from nas.search.nets import build_model\n"
        "from pathlib import Path\n"
        f"profiler = _profiler(Path({str(db)!r}))\n"
        "cost = profiler.measure(build_model(_candidate(), seed=0), precision='float32', xla=False)\n"
        "print(cost.primary.images_per_s)\n"
    )
    repo = REPO
    done = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    here = _profiler(db).measure(build_model(_candidate(), seed=1), precision="float32", xla=False)
    assert here.cached["throughput@16"] is True
    assert here.primary.images_per_s == float(done.stdout.strip().splitlines()[-1])


def test_signature_is_architecture_only() -> None:
    a, b = _candidate(0), _candidate(0)
    assert architecture_signature(build_model(a, seed=1)) == architecture_signature(build_model(b, seed=2))
    other = next(c for s in range(1, 50) if (c := _candidate(s)).stages != a.stages)
    assert architecture_signature(build_model(other, seed=1)) != architecture_signature(build_model(a, seed=1))
    # Training settings, dropout included, do not change what inference runs.
    trained_differently = dataclasses.replace(a, dropout=0.3, learning_rate=0.5, batch_size=7, epochs=9)
    assert architecture_signature(build_model(trained_differently, seed=1)) == architecture_signature(
        build_model(dataclasses.replace(a, dropout=0.1), seed=1)
    )


def test_measuring_waits_for_training_in_another_process(tmp_path: Path) -> None:
    # A trainer in another process holds the shared lock; our exclusive lock (measuring)
    # must be granted only after it let go.
    trainer = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from nas.search.hardware import DeviceLock\n"
        f"lock = DeviceLock('cpu', Path({str(tmp_path)!r}))\n"
        "with lock.shared():\n"
        "    print('holding', flush=True)\n"
        "    time.sleep(1.5)\n"
        "    print(time.time(), flush=True)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", trainer], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "holding"
    with DeviceLock("cpu", tmp_path).exclusive():
        granted = time.time()
    released = float(process.stdout.readline())
    process.wait(timeout=30)
    assert granted >= released


def test_lock_is_released_when_its_holder_is_killed(tmp_path: Path) -> None:
    holder = (
        "import time\n"
        "from pathlib import Path\n"
        "from nas.search.hardware import DeviceLock\n"
        f"with DeviceLock('cpu', Path({str(tmp_path)!r})).exclusive():\n"
        "    print('holding', flush=True)\n"
        "    time.sleep(600)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "holding"
    process.kill()
    process.wait(timeout=30)
    with DeviceLock("cpu", tmp_path).shared():
        pass  # would hang (and time the suite out) if the dead holder still held it

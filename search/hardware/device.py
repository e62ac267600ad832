"""A description of the device a figure was measured on, stored with every figure."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from nas.search.runtime import import_tensorflow


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@cache
def describe_device() -> dict[str, Any]:
    """The first visible GPU if TensorFlow sees one, else the CPU; with TF build versions."""
    tf = import_tensorflow()
    build = tf.sysconfig.get_build_info()
    info: dict[str, Any] = {
        "tensorflow": tf.__version__,
        "cuda": build.get("cuda_version"),
        "cudnn": build.get("cudnn_version"),
        "host": platform.node(),
    }
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        info.update(
            kind="gpu",
            name=details.get("device_name", gpus[0].name),
            compute_capability=details.get("compute_capability"),
            visible_gpus=len(gpus),
            # float32 matmuls run as TF32 on Ampere and later unless switched off (peaks.py).
            tf32=bool(tf.config.experimental.tensor_float_32_execution_enabled()),
        )
    else:
        threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
        info.update(kind="cpu", name=_cpu_model(), threads=threads)
    return info


def device_label(info: Mapping[str, Any]) -> str:
    if info.get("kind") == "gpu":
        return f"GPU {info.get('name')}"
    return f"CPU {info.get('name')} ({info.get('threads')} threads)"


# What a figure's scale depends on. The host name is left out on purpose: the same device
# model with the same stack gives the same figures on another machine of a fleet, and shares
# its cached figures and reference baseline (so its figures are on one scale).
IDENTITY_FIELDS = ("kind", "name", "compute_capability", "threads", "tensorflow", "cuda", "cudnn")


def _digest(fields: dict[str, Any], length: int) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:length]


def device_labels(infos: list[Mapping[str, Any]]) -> list[str]:
    """Each description's label, with the identity fields that tell apart two descriptions
    whose labels are one ("CPU Xeon (8 threads), tensorflow 2.21.0")."""
    plain = [device_label(info) for info in infos]
    labels = []
    for info, mine in zip(infos, plain, strict=True):
        twins = [other for other, label in zip(infos, plain, strict=True) if label == mine]
        differ = [k for k in IDENTITY_FIELDS if len({str(t.get(k)) for t in twins}) > 1]
        labels.append(mine + "".join(f", {k} {info.get(k)}" for k in differ))
    return labels


def device_key(info: dict[str, Any], *, precision: str, xla: bool) -> str:
    """A stable key of what a figure depends on: the device, the software stack, the policy."""
    fields = {k: info.get(k) for k in IDENTITY_FIELDS}
    fields.update(precision=precision, xla=xla)
    return _digest(fields, 32)


def device_identity(info: Mapping[str, Any] | None) -> str | None:
    """Which device a stored description is, as far as figures compare: two descriptions
    with one identity (the same model and software, on any host) measure on one scale, and
    figures of two identities are never compared. None for no description."""
    if not info:
        return None
    return _digest({k: info.get(k) for k in IDENTITY_FIELDS}, 16)


def lock_name(info: dict[str, Any]) -> str:
    """One lock per physical device. The CPU is shared by every process of the machine, unless
    this process is pinned to some of its cores (a worker of a pool): then by those cores, so
    workers on disjoint cores measure while others train (sharing only caches and memory
    bandwidth, which the measured spread shows)."""
    if info.get("kind") != "gpu":
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if not cores or len(cores) >= (os.cpu_count() or 0):
            return "cpu"
        return "cpu" + "-".join(map(str, cores))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
    # The name is a lock file's: a MIG device (MIG-GPU-<uuid>/1/0) must not open folders.
    return "gpu" + re.sub(r"[^A-Za-z0-9_.-]", "_", visible)


def unsupported_precisions(info: dict[str, Any]) -> dict[str, str]:
    """Precision policies this device cannot run well, with the reason."""
    if info.get("kind") != "gpu":
        return {"mixed_float16": "float16 on a CPU is emulated and slower than float32"}
    out: dict[str, str] = {}
    capability = info.get("compute_capability") or (0, 0)
    if tuple(capability) < (7, 0):
        out["mixed_float16"] = f"GPU compute capability {capability} has no float16 tensor cores"
    if tuple(capability) < (8, 0):
        out["mixed_bfloat16"] = f"GPU compute capability {capability} has no bfloat16 support (needs Ampere)"
    return out

"""A description of the device a figure was measured on, stored with every figure."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
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


def device_label(info: dict[str, Any]) -> str:
    if info.get("kind") == "gpu":
        return f"GPU {info.get('name')}"
    return f"CPU {info.get('name')} ({info.get('threads')} threads)"


def device_key(info: dict[str, Any], *, precision: str, xla: bool) -> str:
    """A stable key of what a figure depends on: the device, the software stack, the policy.

    The host name is left out on purpose: the same device model with the same stack gives
    the same figures on another machine of a fleet.
    """
    fields = {k: info.get(k) for k in ("kind", "name", "compute_capability", "threads", "tensorflow", "cuda", "cudnn")}
    fields.update(precision=precision, xla=xla)
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:32]


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

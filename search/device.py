"""A description of the device a figure was measured on, stored with every figure."""

from __future__ import annotations

import os
import platform
from functools import cache
from typing import Any

from .quiet import import_tensorflow


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
        )
    else:
        threads = tf.config.threading.get_intra_op_parallelism_threads() or os.cpu_count()
        info.update(kind="cpu", name=_cpu_model(), threads=threads)
    return info


def device_label(info: dict[str, Any]) -> str:
    if info.get("kind") == "gpu":
        return f"GPU {info.get('name')}"
    return f"CPU {info.get('name')} ({info.get('threads')} threads)"

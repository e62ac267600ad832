"""Where each worker process runs: its GPU, its CPU cores and TensorFlow's thread pools.

The parent decides and passes the decision in environment variables, because
CUDA_VISIBLE_DEVICES and thread-pool sizes must be in place before TensorFlow initialises in
the worker; the worker applies them (`apply_before_import`, `configure_tensorflow`) and
records what TensorFlow really got on every trial it runs.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .errors import NasError

ENV_INDEX = "NAS_WORKER_INDEX"
ENV_CPUS = "NAS_CPUS"
ENV_INTRA = "NAS_INTRA_OP_THREADS"
ENV_INTER = "NAS_INTER_OP_THREADS"
ENV_GPU_LIMIT = "NAS_GPU_MEMORY_LIMIT_MB"
# A GPU shared by K workers gets this fraction of its memory split K ways; the rest is left
# for the CUDA context and cuDNN workspaces each process allocates outside TF's allocator.
GPU_SHARE = 0.9


@dataclass(frozen=True)
class Placement:
    index: int
    gpu: str | None
    cpus: tuple[int, ...]
    intra_op_threads: int
    inter_op_threads: int
    gpu_memory_limit_mb: int | None = None

    def env(self) -> dict[str, str]:
        env = {
            ENV_INDEX: str(self.index),
            ENV_CPUS: ",".join(map(str, self.cpus)),
            ENV_INTRA: str(self.intra_op_threads),
            ENV_INTER: str(self.inter_op_threads),
            "OMP_NUM_THREADS": str(self.intra_op_threads),
        }
        if self.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu
        if self.gpu_memory_limit_mb is not None:
            env[ENV_GPU_LIMIT] = str(self.gpu_memory_limit_mb)
        return env

    def label(self) -> str:
        where = f"GPU {self.gpu}" if self.gpu is not None else "CPU"
        cpus = f"cpu {self.cpus[0]}" if len(self.cpus) == 1 else f"cpus {self.cpus[0]}-{self.cpus[-1]}"
        return f"{where}, {cpus}, {self.intra_op_threads} threads"


def parse_gpus(text: str | None) -> list[str] | None:
    if text is None:
        return None
    gpus = [g.strip() for g in text.split(",") if g.strip()]
    if not gpus or not all(g.isdigit() for g in gpus):
        raise NasError(f"--gpus '{text}': expected GPU indices such as 0 or 0,1,3")
    if len(set(gpus)) != len(gpus):
        raise NasError(f"--gpus '{text}': a GPU is listed twice (use --workers-per-gpu to share one)")
    return gpus


def gpu_memory_mb(gpu: str) -> int | None:
    """Total memory of a GPU from nvidia-smi; None when it cannot be asked."""
    try:
        result = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", gpu],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        return int(result.stdout.strip().splitlines()[0])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def plan_workers(
    workers: int | None, gpus: list[str] | None, workers_per_gpu: int | None, cpus: list[int] | None = None
) -> list[Placement]:
    """Round-robin over the GPUs; the machine's cores split into disjoint sets (shared
    round-robin only when there are more workers than cores)."""
    per_gpu = workers_per_gpu or 1
    if workers is None:
        workers = len(gpus) * per_gpu if gpus else 1
    if gpus and workers > len(gpus) * per_gpu:
        raise NasError(
            f"--workers {workers} is more than {len(gpus)} GPU(s) x --workers-per-gpu {per_gpu}; "
            "raise --workers-per-gpu or list more GPUs"
        )
    cores = sorted(cpus if cpus is not None else os.sched_getaffinity(0))
    placements = []
    for i in range(workers):
        gpu = gpus[i % len(gpus)] if gpus else None
        if workers <= len(cores):
            share = len(cores) // workers
            mine = tuple(cores[i * share : (i + 1) * share]) if i < workers - 1 else tuple(cores[i * share :])
        else:
            mine = (cores[i % len(cores)],)
        sharing = sum(1 for j in range(workers) if gpus and gpus[j % len(gpus)] == gpu)
        limit = None
        if gpu is not None and sharing > 1:
            total = gpu_memory_mb(gpu)
            limit = int(total * GPU_SHARE / sharing) if total else None
        placements.append(
            Placement(
                index=i,
                gpu=gpu,
                cpus=mine,
                intra_op_threads=len(mine),
                inter_op_threads=1 if len(mine) == 1 else 2,
                gpu_memory_limit_mb=limit,
            )
        )
    return placements


def apply_before_import() -> None:
    """Pin this worker process to its cores (Linux); before TensorFlow sizes its pools."""
    cpus = os.environ.get(ENV_CPUS)
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})


def configure_tensorflow(tf: ModuleType) -> None:
    """Apply the thread and GPU-memory settings; must run before TensorFlow's runtime starts."""
    if intra := os.environ.get(ENV_INTRA):
        tf.config.threading.set_intra_op_parallelism_threads(int(intra))
    if inter := os.environ.get(ENV_INTER):
        tf.config.threading.set_inter_op_parallelism_threads(int(inter))
    limit = os.environ.get(ENV_GPU_LIMIT)
    for gpu in tf.config.list_physical_devices("GPU"):
        if limit:
            # A hard cap lets K workers share one GPU without the first taking it all; TF
            # refuses memory growth together with a cap, so it is one or the other.
            config = tf.config.LogicalDeviceConfiguration(memory_limit=int(limit))
            tf.config.set_logical_device_configuration(gpu, [config])
        else:
            tf.config.experimental.set_memory_growth(gpu, True)


def placement_attr(tf: ModuleType) -> dict[str, Any]:
    """What this process really runs with, for the trial's `worker` attribute."""
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    index = os.environ.get(ENV_INDEX)
    limit = os.environ.get(ENV_GPU_LIMIT)
    return {
        "index": int(index) if index is not None else None,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cpus": affinity,
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "gpu_memory_limit_mb": int(limit) if limit else None,
        "gpus_seen": len(tf.config.list_physical_devices("GPU")),
    }

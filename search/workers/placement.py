"""Where each worker process runs: its GPU, its CPU cores and TensorFlow's thread pools.

The parent decides and passes the decision in environment variables, because
CUDA_VISIBLE_DEVICES and thread-pool sizes must be in place before TensorFlow initialises in
the worker; the worker applies them (`nas.search.runtime`) and records what TensorFlow really got on
every trial it runs.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from nas.errors import NasError
from nas.search.runtime import ENV_CPUS, ENV_GPU, ENV_GPU_LIMIT, ENV_INDEX, ENV_INTER, ENV_INTRA

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
            env["CUDA_VISIBLE_DEVICES"] = env[ENV_GPU] = self.gpu
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
    if not gpus or not all(g.isascii() and g.isdigit() for g in gpus):  # "²".isdigit() too
        raise NasError(f"{{gpus}} '{text}': expected GPU indices such as 0 or 0,1,3")
    gpus = [g.lstrip("0") or "0" for g in gpus]  # 00 is GPU 0 (no int(): 5000 digits would raise)
    if len(set(gpus)) != len(gpus):
        raise NasError(f"{{gpus}} '{text}': a GPU is listed twice (use {{workers_per_gpu}} to share one)")
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


# More is a typo (each worker is a process with its own TensorFlow), and planning a billion
# workers would not end.
MAX_WORKERS = 1024


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
            f"{{workers}} {workers} is more than {len(gpus)} GPU(s) x {{workers_per_gpu}} {per_gpu}; "
            "raise {workers_per_gpu} or list more GPUs"
        )
    if workers > MAX_WORKERS:
        raise NasError(f"{workers} workers is more than {MAX_WORKERS} on one machine (see {{workers}}, {{gpus}})")
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


def uncapped_shared_gpus(placements: list[Placement]) -> list[str]:
    """Warnings for GPUs shared by several workers without a memory cap (nvidia-smi could not
    report the GPU's memory): TensorFlow's first worker may then take all of it."""
    sharing: dict[str, list[Placement]] = {}
    for p in placements:
        if p.gpu is not None:
            sharing.setdefault(p.gpu, []).append(p)
    return [
        f"Warning: {len(group)} workers share GPU {gpu} without a memory cap (nvidia-smi could not report "
        "its memory), so the first to start may take all of it"
        for gpu, group in sharing.items()
        if len(group) > 1 and any(p.gpu_memory_limit_mb is None for p in group)
    ]

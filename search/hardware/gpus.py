"""GPU paths that fail loud: a GPU asked for but not seen by TensorFlow is an error with its
likely cause, never a search that quietly measures the CPU instead.

The parent of a pool imports no TensorFlow (and must not take GPU memory), so it asks a short
child process what TensorFlow sees with the workers' CUDA_VISIBLE_DEVICES; a worker checks
again after its own start-up (`runtime.import_tensorflow`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Sequence

from nas.errors import NasError

INSTALL_HINT = "pip install -e '.[gpu]' installs TensorFlow's CUDA libraries"

# What TensorFlow (and the CUDA libraries it loads) print when the GPU stack cannot start.
_CUDA_FAILURE = re.compile(
    r"Could not load dynamic library|Cannot dlopen|cuInit|CUDA_ERROR|failed call to cu|cuDNN|"
    r"Could not find cuda drivers|driver version|libcuda|libcudart|libcublas|libcudnn",
    re.IGNORECASE,
)

_PROBE = """
import json, tensorflow as tf
print(json.dumps({"seen": len(tf.config.list_physical_devices("GPU")),
                  "cuda_build": bool(tf.test.is_built_with_cuda())}))
"""


def cuda_failures(log: str) -> list[str]:
    """TensorFlow's lines about CUDA or cuDNN failing to load, stripped of their log prefixes."""
    lines = []
    for line in log.splitlines():
        if _CUDA_FAILURE.search(line):
            # "2026-11-30 12:00:00.000000: W external/.../cuda_dnn.cc:123] text" -> "text"
            lines.append(re.sub(r"^.*?\.(?:cc|h):\d+\]\s*", "", line).strip())
    return lines


def nvidia_smi_gpus() -> int | None:
    """How many GPUs the NVIDIA driver lists; None when nvidia-smi is missing or fails."""
    try:
        result = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return sum(1 for line in result.stdout.splitlines() if line.startswith("GPU "))


def visible_to_this_process(gpus: Sequence[str]) -> list[str]:
    """`--gpus` indices count among the GPUs this process may use, as in CUDA: with
    CUDA_VISIBLE_DEVICES=2,3 set, --gpus 0 is device 2."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(gpus)
    devices = [d.strip() for d in visible.split(",") if d.strip()]
    if not devices or devices[0] == "-1":
        raise NasError(f"{{gpus}} {','.join(gpus)}: CUDA_VISIBLE_DEVICES='{visible}' hides every GPU from this process")
    out = []
    for gpu in gpus:
        if int(gpu) >= len(devices):
            raise NasError(
                f"{{gpus}} {gpu}: CUDA_VISIBLE_DEVICES='{visible}' makes {len(devices)} GPU(s) visible, "
                f"numbered 0 to {len(devices) - 1}"
            )
        out.append(devices[int(gpu)])
    return out


def missing_gpu_message(subject: str, seen: int, wanted: int, *, cuda_build: bool | None, log: str) -> str:
    """One line: which GPUs TensorFlow does not see, the likeliest cause, and the fix."""
    drivers = nvidia_smi_gpus()
    failures = cuda_failures(log)
    if cuda_build is False:
        cause = "this TensorFlow is built without CUDA"
    elif drivers is None:
        cause = "no NVIDIA driver answers here (nvidia-smi is missing or fails)"
    elif drivers < wanted:
        cause = f"the driver lists {drivers} GPU(s)"
    elif failures:
        cause = f"TensorFlow could not load CUDA: {failures[0][:200]}"
    else:
        cause = "a driver or CUDA version mismatch is likely (--debug shows TensorFlow's messages)"
    return f"{subject}: TensorFlow sees {seen} of {wanted} GPU(s) ({cause}); {INSTALL_HINT}"


def require_visible_gpus(gpus: Sequence[str], asked: str) -> None:
    """Raise NasError unless TensorFlow, started as a worker would be, sees every one of `gpus`
    (values for CUDA_VISIBLE_DEVICES). Costs one TensorFlow import in a child process."""
    env = os.environ | {"CUDA_VISIBLE_DEVICES": ",".join(gpus), "TF_CPP_MIN_LOG_LEVEL": "1"}
    try:
        result = subprocess.run(
            [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=600, check=False
        )
        answer = json.loads(result.stdout.strip().splitlines()[-1])
        seen, cuda_build = int(answer["seen"]), bool(answer["cuda_build"])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, KeyError):
        raise NasError(f"{{gpus}} {asked}: TensorFlow could not be started to list GPUs; {INSTALL_HINT}") from None
    if seen < len(gpus):
        raise NasError(
            missing_gpu_message(f"{{gpus}} {asked}", seen, len(gpus), cuda_build=cuda_build, log=result.stderr)
        )


def unused_gpu_warning(seen: int) -> str | None:
    """A warning when the driver lists GPUs that TensorFlow does not see (no CUDA build, a
    version mismatch): the search would otherwise measure the CPU without a word."""
    if seen or os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1"):
        return None
    drivers = nvidia_smi_gpus()
    if not drivers:
        return None
    return (
        f"Warning: the NVIDIA driver lists {drivers} GPU(s) but TensorFlow sees none, so this search "
        f"measures the CPU; {INSTALL_HINT} (--debug shows TensorFlow's CUDA messages)"
    )


def check_placed_gpu() -> str | None:
    """After TensorFlow started: a worker placed on a GPU (NAS_GPU) that TensorFlow does not see
    raises NasError with the likely cause; any other process gets the warning of
    `unused_gpu_warning`, or None."""
    from nas.search import runtime

    tf = runtime.import_tensorflow()
    seen = len(tf.config.list_physical_devices("GPU"))
    placed_on = os.environ.get(runtime.ENV_GPU)
    if placed_on and not seen:
        built = bool(tf.test.is_built_with_cuda())
        raise NasError(
            missing_gpu_message(f"worker on GPU {placed_on}", 0, 1, cuda_build=built, log=runtime.startup_log())
        )
    return None if placed_on else unused_gpu_warning(seen)

"""Keep TensorFlow's start-up noise off the user's terminal.

TensorFlow's C++ runtime writes to file descriptor 2 directly (absl pre-init warnings,
"Could not find cuda drivers", cuInit errors), so TF_CPP_MIN_LOG_LEVEL alone does not
silence it; we also point fd 2 at a temporary file while TensorFlow loads and initialises its
devices, and replay that file only when something went wrong.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import optuna

# How a pool's parent tells a worker process where it runs (set by workers.placement, read
# here before TensorFlow starts).
ENV_INDEX = "NAS_WORKER_INDEX"
ENV_CPUS = "NAS_CPUS"
ENV_INTRA = "NAS_INTRA_OP_THREADS"
ENV_INTER = "NAS_INTER_OP_THREADS"
ENV_GPU_LIMIT = "NAS_GPU_MEMORY_LIMIT_MB"
ENV_GPU = "NAS_GPU"  # the GPU a pool placed this worker on: not seeing it is an error

_startup_log = ""  # what TensorFlow printed while it started (kept to explain a missing GPU)

_debug = False
_tf: ModuleType | None = None


def set_debug(debug: bool) -> None:
    """Choose, before TensorFlow is imported, whether its noise reaches the terminal."""
    global _debug
    _debug = debug
    if not debug:
        # A worker placed on a GPU keeps TensorFlow's CUDA warnings (captured at start-up, see
        # import_tensorflow) to say why the GPU is missing; everyone else keeps only fatal ones.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1" if os.environ.get(ENV_GPU) else "3")
        os.environ.setdefault("ABSL_MIN_LOG_LEVEL", "3")
    logging.getLogger("optuna").setLevel(logging.DEBUG if debug else logging.WARNING)
    if not debug:
        # Optuna marks heartbeats and set_metric_names as experimental, and warns that
        # heartbeats are meant for optimize(): we drive them ourselves, on purpose (worker.py).
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message=r"Heartbeat of storage is supposed to be used")
        # Keras warns that fit()'s default shuffle=True is ignored for a tf.data input, which
        # our pipeline shuffles itself.
        warnings.filterwarnings("ignore", message=r"`shuffle=True` was passed")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)


@contextlib.contextmanager
def native_stderr_captured() -> Iterator[None]:
    """Hide what C++ code prints to fd 2 (TensorFlow's start-up, TFLite's converter and LiteRT
    log unconditionally); shown again if the block raises, and never hidden with --debug."""
    global _startup_log
    if _debug:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            sink.seek(0)
            sys.stderr.write(sink.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            _startup_log = sink.read()[-65536:].decode(errors="replace")


def import_tensorflow() -> ModuleType:
    """Import TensorFlow (and initialise its devices) without the start-up noise."""
    global _tf
    if _tf is not None:
        return _tf
    set_debug(_debug)
    apply_before_import()
    with native_stderr_captured():
        import tensorflow as tf

        tf.get_logger().setLevel(logging.DEBUG if _debug else logging.ERROR)
        configure_tensorflow(tf)  # a worker's threads and GPU memory, before the runtime starts
        tf.config.list_physical_devices()  # device init is where the CUDA lines come from
        with contextlib.suppress(ImportError):
            import absl.logging

            absl.logging.set_verbosity(absl.logging.INFO if _debug else absl.logging.ERROR)
    module: ModuleType = tf
    _tf = module
    return module


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


def startup_log() -> str:
    """What TensorFlow printed while it started (empty with --debug, where it was shown)."""
    return _startup_log

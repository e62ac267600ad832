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

_debug = False
_tf: ModuleType | None = None


def set_debug(debug: bool) -> None:
    """Choose, before TensorFlow is imported, whether its noise reaches the terminal."""
    global _debug
    _debug = debug
    if not debug:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("ABSL_MIN_LOG_LEVEL", "3")
    logging.getLogger("optuna").setLevel(logging.DEBUG if debug else logging.WARNING)
    if not debug:
        import optuna

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


def import_tensorflow() -> ModuleType:
    """Import TensorFlow (and initialise its devices) without the start-up noise."""
    global _tf
    if _tf is not None:
        return _tf
    from .placement import apply_before_import, configure_tensorflow

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

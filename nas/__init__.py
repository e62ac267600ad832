"""nas: hardware-aware neural architecture and hyperparameter search for TensorFlow/Keras.

The public Python surface is small on purpose; the CLI (`nas ...`) is the main entry point.
Importing this package does not import TensorFlow.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("nas")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]

"""Optional packages: which extra of nas brings each, and importing one so that a missing
package is a one-line `NasError` naming the extra to install, not a ModuleNotFoundError
traceback. nas is installed from its clone (the `nas` on the package index is another
project), so the hint is an editable install of the clone with the extra."""

from __future__ import annotations

import importlib
from types import ModuleType

from nas.errors import NasError

# Extra (pyproject.toml's optional-dependencies) -> the top-level modules it brings.
EXTRAS: dict[str, tuple[str, ...]] = {
    "onnx": ("tf2onnx", "onnx", "onnxruntime"),
    "tensorrt": ("tensorrt", "cuda", "tf2onnx", "onnx", "onnxruntime"),
    "postgres": ("psycopg",),
    "mysql": ("pymysql",),
}


def install_hint(extra: str | None) -> str:
    """How to install an extra (None: nas's own dependencies, for an environment installed
    before one of them was added)."""
    if extra is None:
        return "pip install -e . in the nas clone (it is a dependency of nas)"
    if extra not in EXTRAS:
        raise ValueError(f"no extra '{extra}'")  # a typo in our code, not the user's input
    return f"pip install -e '.[{extra}]' in the nas clone"


def require(module: str, purpose: str, extra: str | None = None) -> ModuleType:
    """`module`, imported; when it (or a package of the same extra it needs) is missing, a
    NasError: "{purpose} needs {package}, which is not installed: {hint}". A module that is
    there but fails on a missing package of its own keeps its traceback: reinstalling nas
    would not fix that."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or module).split(".")[0]
        if missing not in (module.split(".")[0], *EXTRAS.get(extra or "", ())):
            raise
        raise NasError(f"{purpose} needs {missing}, which is not installed: {install_hint(extra)}") from None

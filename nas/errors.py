"""The exceptions nas raises on purpose, for the CLI, the Python API and storage alike.

`NasError` is bad input the user can fix (a space file, a storage URL, a study name, an
option): the CLI prints it as one `Error: ...` line and exits with status 2, the Python API
raises it as it is. Its message names options as `{name}` placeholders (the Python API's
parameter names), so each caller shows them in its own words: the CLI as flags (`--format`),
the Python API as parameter names (`format`). Anything that is not an `Error` is a bug and
keeps its traceback.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Every option a message may name; other braces in a message (a value the user wrote) stay.
OPTIONS = frozenset(
    {
        "artifacts", "best", "format", "gpus", "keep_top_k", "no_weights", "out", "quantize", "recycle_after",
        "retrain_full", "search_weights", "seeds", "storage", "study", "trial", "trials", "where", "workers",
        "workers_per_gpu",
    }
)  # fmt: skip
# Where the Python API's parameter is named otherwise than the placeholder.
_API_NAMES = {"trial": "trials", "no_weights": "keep_weights=False", "best": "objective"}
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")


class Error(Exception):
    """Base of every exception nas raises on purpose."""


def one_line(text: str) -> str:
    """`text` with every unprintable character escaped as Python writes it (`\\n`, `\\x00`):
    a line break or control character the user wrote (a key, a file name, a URL) must neither
    split an error line nor reach the terminal raw."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class NasError(Error):
    """A problem with the user's input; one line that says what and where."""

    def __init__(self, message: str) -> None:
        message = one_line(message)
        super().__init__(message)
        self.template = message

    def render(self, option: Callable[[str], str]) -> str:
        """The message with each option written by `option(name)`."""
        return _PLACEHOLDER.sub(lambda m: option(m[1]) if m[1] in OPTIONS else m[0], self.template)

    def __str__(self) -> str:
        return self.render(lambda name: _API_NAMES.get(name, name))


class ConversionError(Error):
    """A converter (TFLite, tf2onnx, TensorRT) could not convert this model."""


class TrainingDiverged(Error):
    """The training loss became NaN or infinite; the trial fails with this reason."""


class SearchInterrupted(Error):
    """Ctrl-C or SIGTERM during a search: the running trial was failed and queued again."""

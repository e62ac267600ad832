"""The two Rich consoles every command prints to: results on stdout, progress and errors on stderr."""

from __future__ import annotations

from rich.console import Console

from nas.errors import NasError

out = Console()
err = Console(stderr=True)
for _console in (out, err):
    # Logs and pipes get Rich's 80 columns by default, which wraps every table row.
    if not _console.is_terminal:
        _console.width = 160


def flag(option: str) -> str:
    """How the command line spells an option a message names (nas.errors): --keep-top-k."""
    return "--" + option.replace("_", "-")


def message(exc: BaseException) -> str:
    """An exception's one line as the command line shows it, options written as flags."""
    return exc.render(flag) if isinstance(exc, NasError) else str(exc)

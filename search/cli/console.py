"""The two Rich consoles every command prints to: results on stdout, progress and errors on stderr."""

from __future__ import annotations

from rich.console import Console

out = Console()
err = Console(stderr=True)
for _console in (out, err):
    # Logs and pipes get Rich's 80 columns by default, which wraps every table row.
    if not _console.is_terminal:
        _console.width = 160

"""A benchmark's own child processes (a contender in a fresh process, a worker mode): each runs
`python -m benchmarks.<name>` in a working folder of its own, so the repository root goes to
it on PYTHONPATH (the package is not installed; `-m` finds it from the root only)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def environment() -> dict[str, str]:
    """This process's environment with the repository root first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def run_module(name: str, args: Sequence[str], cwd: Path) -> None:
    """`python -m benchmarks.<name> args` in `cwd`; raises if it fails."""
    subprocess.run([sys.executable, "-m", f"benchmarks.{name}", *args], check=True, cwd=cwd, env=environment())

"""How the `nas` process ends when Ctrl-C comes after its command is done: while the
interpreter shuts down (seconds with TensorFlow loaded), as the second press of a search's
"stop now" often does. It must still exit with status 130, not die of SIGINT."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from ..helpers import nas_env

# The real entry point, then a Ctrl-C to this process as it exits.
_AFTER_MAIN = textwrap.dedent(
    """
    import os, signal, sys, time
    from nas.search.cli import main
    sys.argv = ["nas", "space", "show", "tiny"]
    try:
        main()
    finally:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)
    """
)


def test_ctrl_c_during_shutdown_exits_with_status_130(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _AFTER_MAIN], cwd=tmp_path, env=nas_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 130, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    assert "tiny" in result.stdout  # what the command printed was flushed before the exit

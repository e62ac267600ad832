"""What a benchmark's figure is stamped with: the machine it ran on, the commit whose code it
measured, and when (benchmarks/RESULTS.md names all three for every figure)."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from pathlib import Path


def machine() -> str:
    """Architecture, usable cores, processor and its widest vector unit: runs made on another
    machine show it (a 2-core AVX2-only EPYC spent 2.3-4x as long per race trial as the
    AVX-512 one before it)."""
    model, vector = "unknown processor", "no AVX-512"
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            model = value.strip()
        elif key.strip() == "flags":
            vector = "AVX-512" if "avx512f" in value.split() else "AVX2" if "avx2" in value.split() else vector
    return f"{platform.machine()}, {len(os.sched_getaffinity(0))} usable cores, {model}, {vector}"


def commit() -> str:
    """This checkout's commit, short ("unknown" outside git)."""
    here = Path(__file__).resolve().parent
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def today() -> str:
    """The UTC date, ISO."""
    return dt.datetime.now(dt.UTC).date().isoformat()


def now() -> str:
    """The UTC time to the minute, ISO: two reports of one day still sort in order."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="minutes")

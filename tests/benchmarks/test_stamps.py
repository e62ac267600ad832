"""benchmarks/stamps.py: what every figure in RESULTS.md is stamped with, and that no
benchmark reaches another through sys.path (they are one package, run with `-m`)."""

from __future__ import annotations

import datetime as dt
import re

from .package import PACKAGE, benchmark


def test_machine_commit_and_dates() -> None:
    stamps = benchmark("stamps")
    machine = stamps.machine()
    assert re.fullmatch(r"[^,]+, \d+ usable cores, .+, (AVX-512|AVX2|no AVX-512)", machine), machine
    assert re.fullmatch(r"[0-9a-f]{7,}|unknown", stamps.commit())
    assert dt.date.fromisoformat(stamps.today())
    now = dt.datetime.fromisoformat(stamps.now())
    assert now.utcoffset() == dt.timedelta(0) and now.second == 0


def test_no_benchmark_edits_sys_path() -> None:
    offenders = [p.name for p in PACKAGE.rglob("*.py") if "sys.path" in p.read_text()]
    assert offenders == []

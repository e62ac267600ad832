"""What each tool pays per trial outside training and measuring (asking, storing, process and
framework costs), as the newest race that ran the tool measured it (benchmarks/race*.json);
the replay charges every simulated trial its tool's figure."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

RACES = tuple(sorted(Path(__file__).resolve().parent.glob("race*.json")))  # per tool, the newest figure counts


def overhead_sources(paths: Sequence[Path] = RACES) -> dict[str, dict[str, Any]]:
    """Per tool, the newest race report that measured its per-trial overhead: its seconds,
    file, commit and date (a tool's overhead changes with its code, so an old figure would
    charge nas for costs it no longer has)."""
    return dict(_overhead_sources(tuple(paths)))


@functools.cache  # read once per process: every replay job asks, and the reports are 1 MB of JSON
def _overhead_sources(paths: tuple[Path, ...]) -> dict[str, dict[str, Any]]:
    reports = [(json.loads(p.read_text()), p.name) for p in paths]
    # ISO dates, some with a UTC time: a day's timed reports sort after that day's date-only ones
    reports.sort(key=lambda r: r[0]["date"])  # stable: equal dates keep file order
    found: dict[str, dict[str, Any]] = {}
    for report, name in reports:
        for tool, row in report["rows"].items():
            seconds = float(row["overhead_s"])
            found[tool] = {"seconds": seconds, "file": name, "commit": report["commit"], "date": report["date"]}
    return found


def overheads(paths: Sequence[Path] = RACES) -> dict[str, float]:
    """Per-trial overhead of each tool in seconds, from the newest race that ran it."""
    return {tool: source["seconds"] for tool, source in overhead_sources(paths).items()}

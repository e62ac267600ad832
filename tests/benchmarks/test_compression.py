"""benchmarks/compression.py: the JSON it writes names its command and the commit, date and
machine of the run, before its figures (nothing is trained here)."""

from __future__ import annotations

from .package import benchmark
from .test_results_map import runnable, stamp_problems


def test_the_record_names_its_command_and_commit_before_the_figures() -> None:
    compression, stamps = benchmark("compression"), benchmark("stamps")
    rows, large = [{"setting": "none (float32)"}], {"params": 3, "none": 4, "int8": 1, "ratio": 0.25}
    record = compression.record(8, rows, large)
    assert list(record)[:4] == ["command", "commit", "date", "machine"]
    assert record["command"] == "python -m benchmarks.compression"  # the default epochs left out
    assert record["commit"] == stamps.commit() and record["machine"] == stamps.machine()
    assert (record["epochs"], record["rows"], record["mobilenet_v2_224"]) == (8, rows, large)
    assert not stamp_problems(record, runnable())
    assert compression.record(4, rows, large)["command"] == "python -m benchmarks.compression --epochs 4"

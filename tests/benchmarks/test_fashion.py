"""benchmarks/fashion.py: what makes a reference dominated, the table it prints, and the
references it builds (keras.applications with fresh weights for 32x32 grayscale, 10 classes;
the published 2-conv network at 28x28)."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .package import PACKAGE, benchmark
from .test_results_map import runnable, stamp_problems


def _row(name: str, kind: str, accuracy: float, low: float, high: float) -> dict[str, Any]:
    middle = (low + high) / 2
    return {
        "name": name,
        "kind": kind,
        "test_accuracy": accuracy,
        "images_per_s": middle,
        "low": low,
        "high": high,
        "params": 1000,
    }


def test_a_reference_is_dominated_only_at_least_as_accurate_and_faster_beyond_both_intervals() -> None:
    report = benchmark("fashion_report")
    reference = _row("mobilenet_v2_0.35", "reference", 0.90, 900, 1100)
    front = [
        _row("nas trial 1", "nas", 0.91, 1200, 1400),  # more accurate, faster beyond both intervals
        _row("nas trial 2", "nas", 0.90, 1150, 1300),  # as accurate: enough
        _row("nas trial 3", "nas", 0.95, 1000, 1500),  # intervals overlap: not beyond the noise
        _row("nas trial 4", "nas", 0.89, 5000, 6000),  # less accurate
    ]
    assert report.dominated_by(reference, front) == ["nas trial 1", "nas trial 2"]


def test_a_reference_is_compared_by_the_better_of_its_two_scorings() -> None:
    # nas train scores with the moving BatchNorm statistics; a reference whose re-estimated
    # figure is lower (the 2-conv network) keeps its moving one.
    report = benchmark("fashion_report")
    assert report.reference_accuracy({"test_accuracy": 0.9305, "test_accuracy_moving_statistics": 0.9332}) == 0.9332
    assert report.reference_accuracy({"test_accuracy": 0.9065, "test_accuracy_moving_statistics": 0.9003}) == 0.9065


def test_the_table_lists_every_network_most_accurate_first_with_who_dominates_it() -> None:
    report = benchmark("fashion_report")
    nas_row = _row("nas trial 1", "nas", 0.93, 1200, 1400)
    subnet = _row("supernet subnet 240", "supernet", 0.92, 1200, 1400)
    dominators = ["nas trial 1", "supernet subnet 240", "nas trial 7"]
    beaten = {**_row("mobilenet_v2_0.35", "reference", 0.90, 900, 1100), "dominated_by": dominators}
    standing = {**_row("efficientnet_b0", "reference", 0.94, 100, 120), "dominated_by": []}
    text = report.markdown(
        {"networks": [beaten, nas_row, standing, subnet], "published": {"human": 0.835}, "published_source": "README"}
    )
    lines = text.splitlines()
    assert [line.split(" | ")[0] for line in lines[2:6]] == [
        "| efficientnet_b0",
        "| nas trial 1",
        "| supernet subnet 240",
        "| mobilenet_v2_0.35",
    ]
    assert lines[2].endswith("| none |") and lines[3].endswith("| - |") and lines[4].endswith("| - |")
    # Who dominates a reference, grouped by front.
    assert lines[5].endswith("| trials 1, 7; supernet 240 |")
    assert "human 0.835" in lines[-1]


def test_each_front_is_judged_on_its_own_networks() -> None:
    report = benchmark("fashion_report")
    table = [
        _row("nas trial 1", "nas", 0.93, 1200, 1400),
        _row("supernet subnet 5", "supernet", 0.91, 3000, 3200),
        _row("mobilenet_v2_0.35", "reference", 0.90, 900, 1100),  # both fronts dominate it
        _row("mobilenet_v3_small", "reference", 0.905, 2500, 2700),  # the subnet only: trial 1 is slower
        _row("efficientnet_b0", "reference", 0.94, 100, 120),  # neither: the most accurate
    ]
    verdict = report.judge(table)
    assert verdict == {
        "nas": {"dominates": ["mobilenet_v2_0.35"], "not_dominated": ["mobilenet_v3_small", "efficientnet_b0"]},
        "supernet": {"dominates": ["mobilenet_v2_0.35", "mobilenet_v3_small"], "not_dominated": ["efficientnet_b0"]},
    }
    assert table[2]["dominated_by"] == ["nas trial 1", "supernet subnet 5"]
    assert table[3]["dominated_by"] == ["supernet subnet 5"] and table[4]["dominated_by"] == []
    # Without a supernet front (not final-trained yet) only the trials front is judged.
    assert set(report.judge([r for r in table if r["kind"] != "supernet"])) == {"nas"}


def test_a_published_line_s_label_moves_to_the_right_end_off_a_marker_and_point_labels_avoid_it() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = benchmark("fashion_report")
    fig, ax = plt.subplots(figsize=(9, 5.5))
    ax.set_xscale("log")
    ax.set_xlim(1000, 20000)
    ax.set_ylim(0.87, 0.97)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    # A marker at the left end of the 0.934 line, just above it where its label would go.
    under = report._box_around(ax.transData.transform((1080, 0.9345)), 5)
    taken = [under]
    report._label_published(ax, renderer, taken)
    placed = {t.get_text(): t.get_horizontalalignment() for t in ax.texts}
    published = {f"{label} {value:.3f}" for label, value in report.PUBLISHED.items() if value > 0.9}
    assert set(placed) == published
    moved = [text for text, align in placed.items() if align == "right"]
    assert moved == ["2 Conv + pooling + BatchNorm 0.934"], placed
    assert len(taken) == 1 + len(published)  # the labels' boxes, for the points' labels to avoid
    # A point right under the moved label: its name goes to a side that covers nothing taken.
    report._label_points(ax, renderer, [("s#1", 15000, 0.9335)], taken)
    box = report._corners(ax.texts[-1].get_window_extent(renderer))
    assert not any(report._overlap(box, other) for other in taken[:-1])
    plt.close(fig)


@pytest.mark.parametrize("name", ["mobilenet_v2_0.35", "mobilenet_v3_small_minimalistic", "two_conv_bn"])
def test_the_references_take_the_benchmark_s_images_and_give_ten_classes(name: str) -> None:
    from nas.search import runtime

    runtime.import_tensorflow()
    build, size = benchmark("fashion_references").REFERENCES[name]
    model = build()
    assert tuple(model.input_shape[1:]) == (size, size, 1) and model.output_shape[-1] == 10
    assert size == (28 if name == "two_conv_bn" else 32)


def test_a_piece_stops_its_nas_process_even_when_started_with_sigint_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A piece started by `nohup ... &` from a script inherits SIGINT ignored; the process it
    # runs must still stop at the piece's SIGINT (not wait out the grace and be killed).
    fashion = benchmark("fashion")
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import time; time.sleep(120)'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(fashion.sys, "executable", str(fake))
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        started = time.monotonic()
        code = fashion.run_nas(["train", "nothing"], 1.0, tmp_path / "artifacts", database=tmp_path / "x.db")
    finally:
        signal.signal(signal.SIGINT, previous)
    # Python ends an uncaught KeyboardInterrupt by SIGINT (nas catches it: 130); not SIGKILL's
    # -9 after the grace.
    assert code == -signal.SIGINT
    assert time.monotonic() - started < 30


def test_a_piece_adds_its_command_to_the_progress_log_once_and_stamps_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fashion, state = benchmark("fashion"), benchmark("fashion_state")
    committed = json.loads((PACKAGE / "fashion-runs" / "progress.json").read_text())
    (tmp_path / "progress.json").write_text(json.dumps(committed))
    monkeypatch.setattr(state, "WORK", tmp_path)
    monkeypatch.setattr(fashion, "run_nas", lambda *_, **__: 0)  # no training: the log only
    monkeypatch.setattr(fashion, "front_members", lambda: [0, 3])
    fashion.train(1.0, "python -m benchmarks.fashion train --minutes 1")
    fashion.train(1.0, "python -m benchmarks.fashion train --minutes 50")  # listed already: not again
    log = json.loads((tmp_path / "progress.json").read_text())
    assert log["command"] == [*committed["command"], "python -m benchmarks.fashion train --minutes 1"]
    assert log["commit"] == benchmark("stamps").commit() == log["chunks"][-1]["commit"]
    assert log["chunks"][:-2] == committed["chunks"] and len(log["chunks"]) == len(committed["chunks"]) + 2
    assert {k: v for k, v in log.items() if k not in ("command", "commit", "chunks")} == {
        k: v for k, v in committed.items() if k not in ("command", "commit", "chunks")
    }  # the stamped_from note and the search's seconds as they were
    assert list(log)[:2] == ["command", "commit"] and not stamp_problems(log, runnable())
    assert state.logged({"chunks": []}, "python -m benchmarks.fashion search", "abc1234") == {
        "command": ["python -m benchmarks.fashion search"],
        "commit": "abc1234",
        "chunks": [],
    }


def test_the_reference_piece_hands_each_reference_its_command(monkeypatch: pytest.MonkeyPatch) -> None:
    fashion, called = benchmark("fashion"), []
    monkeypatch.setattr(fashion, "reference", lambda *args: called.append(args))
    monkeypatch.setattr(sys, "argv", ["fashion", "reference", "two_conv_bn", "--minutes", "30"])
    fashion.main()
    [(name, minutes, command)] = called
    assert name == "two_conv_bn" and 29 < minutes <= 30
    assert command == "python -m benchmarks.fashion reference two_conv_bn --minutes 30"
    monkeypatch.setattr(sys, "argv", ["fashion", "reference", "all"])
    fashion.main()
    assert {c[2] for c in called[1:]} == {"python -m benchmarks.fashion reference all"}
    assert len(called) == 1 + len(benchmark("fashion_references").REFERENCES)

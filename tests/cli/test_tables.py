"""The Pareto and status tables rendered through Rich at terminal widths: nothing is cut, what
does not fit is left out whole and named, and --wide keeps every column."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from nas.search.cli.tables import (
    PARETO_LEGEND,
    STATUS_LEGEND,
    fitted,
    not_shown_line,
    parameter_lines,
    pareto_columns,
    print_table,
    status_columns,
)


def _record(trial: int, accuracy: float, throughput: float, **extra: Any) -> dict[str, Any]:
    """A record as nas.search.results.pareto_records makes it, with realistic figures."""
    record = {
        "trial": trial,
        "accuracy": accuracy,
        "throughput": throughput,
        "throughput_low": throughput * 0.92,
        "throughput_high": throughput * 1.08,
        "confirmed_throughput": throughput * 1.03,
        "confirmed_low": throughput * 1.0,
        "confirmed_high": throughput * 1.06,
        "params": 680_550,
        "flops": 12_345_678,
        "latency_p50_ms": 2.92,
        "latency_p95_ms": 3.41,
        "flops_per_s": 3.2e11,
        "peak_fraction": 0.123,
        "on_front": True,
        "overlaps": [],
        "parameters": {"width_multiplier": 0.5, "stage0.kernel": 3, "learning_rate": 0.0123, "batch_size": 64},
    }
    return record | extra


RECORDS = [
    _record(12, 0.9972, 11_643.2, overlaps=[15, 17, 19]),
    _record(15, 0.9944, 24_856.7, overlaps=[12], parameters={"width_multiplier": 0.25, "stage0.kernel": 3,
                                                             "learning_rate": 0.004, "batch_size": 64}),
    _record(17, 0.9861, 27_255.0, on_front=False, confirmed_throughput=None, confirmed_low=None, confirmed_high=None),
    _record(1234, 0.9361, 1_234_567.0, params=12_345_678),
]  # fmt: skip


def _render(columns: list[Any], width: int) -> tuple[str, list[str]]:
    """What a terminal of `width` columns shows (the CLI's own printing), and what was left out."""
    layout = fitted(columns, width)
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    print_table(console, layout)
    return console.file.getvalue(), layout.dropped  # type: ignore[attr-defined]


@pytest.mark.parametrize("width", [80, 100, 200])
@pytest.mark.parametrize("wide", [False, True])
def test_the_pareto_table_never_cuts_a_number(width: int, wide: bool) -> None:
    text, dropped = _render(pareto_columns(RECORDS, ["accuracy", "throughput"], wide=wide), width)
    assert "…" not in text
    lines = text.splitlines()
    # The compact table fits; --wide keeps every column in full, in longer lines if it must.
    assert max(len(line) for line in lines) <= width or (wide and width < 200)
    for r in RECORDS:
        # Every front trial on one line, its accuracy and throughput whole.
        (row,) = [line for line in lines if line.split("│")[1:2] and line.split("│")[1].strip() == str(r["trial"])]
        assert f"{r['accuracy']:.4f}" in row and f"{r['throughput']:,.0f}" in row, row
    assert dropped == []
    if wide:
        assert "10,712-12,575" in text and "≈ 15, 17, 19" in text and "1,135,802-1,333,332" in text
    else:  # the compact table fits 80 columns whole
        assert "11,643 ±8%" in text and "11,992 ±3%" in text  # trial 12 confirmed at 1.03x, ±3%


def test_columns_are_left_out_whole_least_important_first_and_named() -> None:
    columns = pareto_columns(RECORDS, ["accuracy", "throughput"], wide=False)
    widths = {}
    for width in (80, 60, 50, 44, 30):
        text, dropped = _render(columns, width)
        widths[width] = dropped
        assert "…" not in text
    assert widths[80] == []
    assert widths[50][:1] == [""]  # the mark goes first, then params, then the confirmed figure
    assert widths[30] == ["", "params", "confirmed"]  # the required columns stay, even too wide
    assert not_shown_line(["", "params"]) is not None and "--wide" in str(not_shown_line(["params"]))
    assert not_shown_line([]) is None


def test_the_compact_table_marks_notes_and_leaves_out_an_empty_confirmed_column() -> None:
    unconfirmed = [r | {"confirmed_throughput": None} for r in RECORDS[2:]]
    headers = [c.header for c in pareto_columns(unconfirmed, ["accuracy", "throughput"], wide=False)]
    assert headers == ["trial", "accuracy", "img/s", "params", ""]
    marks = pareto_columns(RECORDS, ["accuracy", "throughput"], wide=False)[-1].cells
    assert marks == ["≈", "≈", "*", ""]


def test_a_supernet_front_shows_its_fine_tuned_accuracy_beside_the_inherited_one() -> None:
    tuned = [RECORDS[0] | {"finetuned_accuracy": 0.9986}, RECORDS[1] | {"finetuned_accuracy": None}]
    columns = pareto_columns(tuned, ["accuracy", "throughput"], wide=False)
    assert [c.header for c in columns][:3] == ["trial", "accuracy", "fine-tuned"]
    assert columns[2].cells == ["0.9986", "-"] and columns[2].drop == 0  # never left out for width
    text, dropped = _render(columns, 80)
    assert dropped == [] and "0.9986" in text
    wide = pareto_columns(tuned, ["accuracy", "throughput"], wide=True)
    assert wide[3].header == "fine-tuned" and wide[3].cells == ["0.9986", "-"]
    # No column where no trial was fine-tuned (every `trials` study).
    assert "fine-tuned" not in [c.header for c in pareto_columns(RECORDS, ["accuracy", "throughput"], wide=False)]


def test_a_final_trained_front_shows_its_test_accuracy_beside_the_search_s() -> None:
    trained = [RECORDS[0] | {"test_accuracy": 0.9412}, RECORDS[1] | {"test_accuracy": None}]
    columns = pareto_columns(trained, ["accuracy", "throughput"], wide=False)
    assert [c.header for c in columns][:3] == ["trial", "accuracy", "test"]
    assert columns[2].cells == ["0.9412", "-"] and columns[2].drop == 0  # never left out for width
    text, dropped = _render(columns, 80)
    assert dropped == [] and "0.9412" in text
    wide = pareto_columns(trained, ["accuracy", "throughput"], wide=True)
    assert [c.header for c in wide][4] == "test (final)" and wide[4].cells == ["0.9412", "-"]
    assert "test" not in [c.header for c in pareto_columns(RECORDS, ["accuracy", "throughput"], wide=False)]


def test_parameter_lines_print_what_is_shared_once() -> None:
    lines = parameter_lines(RECORDS)
    assert lines[0] == "all: stage0.kernel=3, batch_size=64"
    assert lines[1] == "trial 12: width_multiplier=0.5, learning_rate=0.0123"
    assert lines[2] == "trial 15: width_multiplier=0.25, learning_rate=0.004"
    assert parameter_lines(RECORDS[:1]) == [
        "trial 12: width_multiplier=0.5, stage0.kernel=3, learning_rate=0.0123, batch_size=64"
    ]
    same = [RECORDS[0], RECORDS[0] | {"trial": 13}]
    assert parameter_lines(same)[1:] == ["trial 12: (as above)", "trial 13: (as above)"]
    assert parameter_lines([]) == []


def _status_row(study: str, **extra: Any) -> dict[str, Any]:
    row = {"study": study, "finished": 1_234, "budget": 2_000, "running": 8, "failed": 54, "screened": 1_500}
    return row | {"stopped_early": 17, "queued": 3, "pareto": 12, "best_accuracy": 0.99722} | extra


@pytest.mark.parametrize("width", [80, 100, 200])
@pytest.mark.parametrize("wide", [False, True])
def test_the_status_table_never_cuts_a_number(width: int, wide: bool) -> None:
    rows = [_status_row("mobilenet-on-the-jetson-nano-2026"), _status_row("tiny", budget=None, best_accuracy=None)]
    text, dropped = _render(status_columns(rows, wide=wide), width)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width or (wide and width < 200)
    assert "mobilenet-on-the-jetson-nano-2026" in text and "0.9972" in text
    assert ("1500" in text) == (wide or width == 200)  # screened: the first count left out
    if not wide:
        assert "1234/2000" in text and "1234/-" in text
        # The long study name leaves room for fewer counts: the least read go first.
        assert dropped == {80: ["queued", "screened", "early", "failed"], 100: ["queued", "screened"], 200: []}[width]
    assert len(STATUS_LEGEND) <= 80 and len(PARETO_LEGEND) <= 80  # one line under the table

"""The tables the CLI prints (the Pareto front, `nas status`): a compact default that fits the
terminal without cutting a number, and `--wide` with every column.

Rich squeezes a table wider than the terminal by wrapping and cutting cells ("4,335…"), so a
table here is laid out first: when it does not fit, whole columns are dropped, least
important first, and a line says which (the `kubectl get` / `-o wide` convention).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from nas.search.cli.display import format_objective
from nas.search.space import human


@dataclass
class Column:
    header: str
    cells: list[str] = field(default_factory=list)
    justify: str = "right"
    # Dropped when the table does not fit: the highest first; 0 never.
    drop: int = 0


@dataclass
class Fitted:
    table: Table
    width: int  # what the table needs to show every cell whole
    dropped: list[str]  # headers of the columns left out


def fitted(columns: Sequence[Column], width: int) -> Fitted:
    """The table of `columns`, leaving out optional columns (highest `drop` first) until it is
    at most `width` wide. What cannot be left out is printed at its own width (`print_table`),
    longer than the terminal, rather than cut."""
    shown = list(columns)
    dropped: list[str] = []
    while True:
        table = _table(shown)
        needed = _width(table)
        optional = [c for c in shown if c.drop]
        if needed <= width or not optional:
            return Fitted(table, needed, dropped)
        worst = max(optional, key=lambda c: c.drop)
        shown.remove(worst)
        dropped.append(worst.header)


def print_table(console: Console, layout: Fitted) -> None:
    """Every cell whole: a table wider than the console (--wide in a narrow terminal) gets
    lines as long as it needs, which the terminal wraps, instead of Rich's cut cells."""
    if layout.width <= console.width:
        console.print(layout.table)
        return
    # Console.print caps `width` at the console's own: a console as wide as the table, on the same file.
    wider = Console(
        file=console.file,
        width=layout.width,
        color_system=console.color_system,  # type: ignore[arg-type]
        force_terminal=console.is_terminal,
        legacy_windows=False,
    )
    wider.print(layout.table)


def _table(columns: Sequence[Column]) -> Table:
    table = Table()
    for c in columns:
        table.add_column(c.header, justify=c.justify, no_wrap=True)  # type: ignore[arg-type]
    for row in zip(*(c.cells for c in columns), strict=True):
        table.add_row(*row)
    return table


def _width(table: Table) -> int:
    return Console(width=100_000).measure(table).maximum


def not_shown_line(dropped: list[str]) -> str | None:
    return f"Not shown at this width: {', '.join(dropped)} (--wide shows every column)." if dropped else None


# --- the Pareto front ------------------------------------------------------------------


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"{low:,.0f}-{high:,.0f}"


def _plus_minus(value: float | None, low: float | None, high: float | None) -> str:
    """`4,751 ±8%`: the figure and the half-width of its 95% interval, relative to it."""
    if value is None:
        return "-"
    if low is None or high is None or not value:
        return f"{value:,.0f}"
    share = (high - low) / 2 / value * 100
    return f"{value:,.0f} ±{share:.1f}%" if share < 1 else f"{value:,.0f} ±{share:.0f}%"


def _note(record: dict[str, Any]) -> str:
    notes = [] if record.get("on_front", True) else ["within noise"]
    if record.get("overlaps"):
        notes.append("≈ " + ", ".join(map(str, record["overlaps"])))
    return "; ".join(notes)


def _tested(record: dict[str, Any]) -> str:
    """The final test accuracy; over several seeds their mean ± standard deviation."""
    tested, sd = record.get("test_accuracy"), record.get("test_accuracy_sd")
    if tested is None:
        return "-"
    return format_objective("accuracy", tested) + ("" if sd is None else f"±{sd:.4f}")


def _mark(record: dict[str, Any]) -> str:
    return ("" if record.get("on_front", True) else "*") + ("≈" if record.get("overlaps") else "")


def _wide_cells(r: dict[str, Any], objectives: list[str]) -> list[str]:
    confirmed = r.get("confirmed_throughput")
    again = _interval(r.get("confirmed_low"), r.get("confirmed_high"))
    latency = f"{r['latency_p50_ms']:.2f}/{r['latency_p95_ms']:.2f} ms" if r.get("latency_p50_ms") else "-"
    tuned = r.get("finetuned_accuracy")
    return [
        str(r["trial"]),
        *(format_objective(name, r.get(name)) for name in objectives),
        "-" if tuned is None else format_objective("accuracy", tuned),
        _tested(r),
        _interval(r.get("throughput_low"), r.get("throughput_high")),
        "-" if confirmed is None else f"{confirmed:,.0f} ({again})",
        f"{r['params']:,}" if r.get("params") is not None else "-",
        _si(r.get("flops")),
        latency,
        _si(r.get("flops_per_s")),
        f"{r['peak_fraction']:.1%}" if r.get("peak_fraction") is not None else "-",
        _note(r),
    ]


WIDE_HEADERS = (
    "fine-tuned",
    "test (final)",
    "95% interval",
    "confirmed",
    "params",
    "FLOPs",
    "latency p50/p95",
    "FLOP/s",
    "of peak",
    "note",
)


def pareto_columns(records: list[dict[str, Any]], objectives: list[str], *, wide: bool) -> list[Column]:
    """Compact: trial, the objectives (throughput with its interval as ±%), the confirmed
    figure where there is one, params and a mark; --wide: every column in full."""
    if wide:
        rows = [_wide_cells(r, objectives) for r in records]
        headers = ["trial", *objectives, *WIDE_HEADERS]
        by_column: list[list[str]] = [list(c) for c in zip(*rows, strict=True)] if rows else [[] for _ in headers]
        return [
            Column(h, c, justify="left" if h == "note" else "right") for h, c in zip(headers, by_column, strict=True)
        ]
    columns = [Column("trial", [str(r["trial"]) for r in records])]
    for name in objectives:
        if name == "throughput":
            cells = [_plus_minus(r.get(name), r.get("throughput_low"), r.get("throughput_high")) for r in records]
            columns.append(Column("img/s", cells))
        else:
            columns.append(Column(name, [format_objective(name, r.get(name)) for r in records]))
        if name == "accuracy" and any(r.get("finetuned_accuracy") is not None for r in records):
            tuned = [r.get("finetuned_accuracy") for r in records]
            columns.append(Column("fine-tuned", ["-" if a is None else format_objective(name, a) for a in tuned]))
        if name == "accuracy" and any(r.get("test_accuracy") is not None for r in records):
            columns.append(Column("test", [_tested(r) for r in records]))
    if any(r.get("confirmed_throughput") is not None for r in records):
        cells = [
            _plus_minus(r.get("confirmed_throughput"), r.get("confirmed_low"), r.get("confirmed_high")) for r in records
        ]
        columns.append(Column("confirmed", cells, drop=1))
    columns.append(Column("params", [_si(r.get("params")) for r in records], drop=2))
    if any(_mark(r) for r in records):
        columns.append(Column("", [_mark(r) for r in records], justify="left", drop=3))
    return columns


# One line that fits 80 columns; --wide has the long one.
PARETO_LEGEND = "±: 95% interval of img/s. *: within noise of the front. ≈: intervals overlap."
PARETO_LEGEND_WIDE = (
    "95% interval: of the throughput measured during the search. ≈ N: the throughput intervals overlap, "
    "the measurement cannot order these trials. within noise: beaten by another trial's median only, not "
    "beyond the interval. confirmed: measured again together after the search (nas pareto STUDY --confirm). "
    "fine-tuned: a supernet study's accuracy after fine-tuning from the inherited weights (accuracy: inherited). "
    "test (final): accuracy on the test set after `nas train` (the search's accuracy is on validation data; "
    "±: the standard deviation over `nas train --seeds N`)."
)


def parameter_lines(records: list[dict[str, Any]]) -> list[str]:
    """The sampled parameters, one line per trial with only what differs between the trials;
    what they all share comes once, first."""
    if not records:
        return []
    names = list(dict.fromkeys(k for r in records for k in r["parameters"]))
    missing = object()
    shared = {
        k: records[0]["parameters"][k]
        for k in names
        if len(records) > 1 and all(r["parameters"].get(k, missing) == records[0]["parameters"].get(k) for r in records)
    }
    lines = ["all: " + ", ".join(f"{k}={_short(v)}" for k, v in shared.items())] if shared else []
    for r in records:
        own = ", ".join(f"{k}={_short(v)}" for k, v in r["parameters"].items() if k not in shared)
        lines.append(f"trial {r['trial']}: {own or '(as above)'}")
    return lines


def _short(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _si(value: float | None, unit: str = "") -> str:
    return "-" if value is None else human(value, unit, sep=" ")


# --- nas status -----------------------------------------------------------------------


def status_columns(rows: list[dict[str, Any]], *, wide: bool) -> list[Column]:
    def count(key: str) -> list[str]:
        return [str(r[key]) for r in rows]

    best = ["-" if r["best_accuracy"] is None else f"{r['best_accuracy']:.4f}" for r in rows]
    # Halving stops a subnet for its accuracy, not a constraint: said apart from the rest.
    screened = []
    for r in rows:
        halved = (r.get("screened_by_kind") or {}).get("halving")
        screened.append(f"{r['screened']} ({halved} halving)" if halved else str(r["screened"]))
    study = Column("study", [r["study"] for r in rows], justify="left")
    if wide:
        return [
            study,
            Column("finished", count("finished")),
            Column("budget", [str(r["budget"] or "-") for r in rows]),
            Column("running", count("running")),
            Column("failed", count("failed")),
            Column("screened", screened),
            Column("stopped early", count("stopped_early")),
            Column("queued", count("queued")),
            Column("pareto", count("pareto")),
            Column("best accuracy", best),
        ]
    return [
        study,
        Column("done", [f"{r['finished']}/{r['budget'] or '-'}" for r in rows]),
        Column("front", count("pareto")),
        Column("best acc", best),
        Column("running", count("running"), drop=1),
        Column("failed", count("failed"), drop=2),
        Column("queued", count("queued"), drop=5),
        Column("screened", screened, drop=4),
        Column("early", count("stopped_early"), drop=3),
    ]


STATUS_LEGEND = "done: finished/budget. front: trials on the Pareto front. --wide: every column."

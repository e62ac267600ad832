"""How a search or worker ends on the command line: the Pareto front, why it stopped (with the
exit status scripts read), and the front's table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from nas.errors import NasError
from nas.search.cli.console import err, out
from nas.search.records import StoppedBy

if TYPE_CHECKING:
    from nas.search.engine import SearchOptions


def warn_unused_gpus() -> None:
    from nas.search.hardware import check_placed_gpu

    if warning := check_placed_gpu():
        err.print(warning, markup=False, highlight=False, soft_wrap=True)


def report_end(
    options: SearchOptions, stopped_by: StoppedBy, finished: int, budget: int, *, show_front: bool, wide: bool = False
) -> None:
    """The Pareto front, then why the search stopped; exit status 130 for an interrupt and 2
    for a runaway of failures, so scripts can tell."""
    from nas.search.engine import load_existing_study
    from nas.search.results import objective_names, pareto_records, screened_line, stopped_early_line
    from nas.storage import open_storage

    if show_front:
        loaded = load_existing_study(open_storage(options.storage, create=False), options.study_name, options.storage)
        records = pareto_records(loaded)
        if records:
            title = f"Pareto front of '{options.study_name}' ({finished} finished trials, {options.storage.masked})"
            show_pareto(records, objective_names(loaded), title, wide=wide)
        trials = loaded.get_trials(deepcopy=False)
        for line in (screened_line(trials), stopped_early_line(trials)):
            if line:
                err.print(line, highlight=False)
    if stopped_by == StoppedBy.FAILURES:
        raise NasError(
            f"stopped after {options.max_consecutive_failures} failed trials in a row; "
            "see fail_reason of the last trials (`nas pareto` / `optuna trials`) or run with --debug"
        )
    if stopped_by == StoppedBy.TIMEOUT:
        err.print(f"Timeout reached: {finished} of {budget} trials finished; run again to continue.")
    if stopped_by == StoppedBy.INTERRUPTED:
        err.print(
            f"Stopped: {finished} of {budget} trials finished and saved, none left running. "
            "Run the same command again to resume."
        )
        raise typer.Exit(130)
    if stopped_by == StoppedBy.CRASHED:
        raise NasError(f"every worker ended before the budget ({finished} of {budget} finished); see the lines above")


def show_pareto(records: list[dict[str, Any]], objectives: list[str], title: str, *, wide: bool = False) -> None:
    from nas.search.cli.tables import PARETO_LEGEND, PARETO_LEGEND_WIDE, parameter_lines, pareto_columns

    out.print(title, highlight=False)
    show_table(pareto_columns(records, objectives, wide=wide), PARETO_LEGEND_WIDE if wide else PARETO_LEGEND)
    out.print("Parameters:", highlight=False)
    for line in parameter_lines(records):
        out.print("  " + line, highlight=False, soft_wrap=True)


def show_table(columns: list[Any], legend: str) -> None:
    """A table that fits the terminal whole (tables.fitted), the legend, and what was left out."""
    from nas.search.cli.tables import fitted, not_shown_line, print_table

    layout = fitted(columns, out.width)
    print_table(out, layout)
    out.print(legend, highlight=False, soft_wrap=True)
    if line := not_shown_line(layout.dropped):
        out.print(line, highlight=False, soft_wrap=True)

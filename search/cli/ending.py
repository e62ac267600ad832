"""How a search or worker ends on the command line: the Pareto front, why it stopped (with the
exit status scripts read), and the front's table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from nas.errors import NasError
from nas.search.cli.console import err, out
from nas.search.records import StoppedBy

if TYPE_CHECKING:
    import optuna

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
            for note in front_notes(loaded, records, remeasured=False):
                err.print(note, markup=False, highlight=False, soft_wrap=True)
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


def front_notes(study: optuna.Study, records: list[dict[str, Any]], *, remeasured: bool) -> list[str]:
    """What a front's reader must know of a study measured on several devices: which, how many
    trials each, and which figures the front compares; nothing for one device."""
    from nas.search.engine import confirmable, devices, mixed_devices
    from nas.search.results import devices_line, one_front_confirmed

    mixed = mixed_devices(study)
    one = remeasured and one_front_confirmed(study) and bool(records)
    found = devices(study.get_trials(deepcopy=False))
    line = devices_line([(d.label, d.trials) for d in found], bool(mixed) and not one)
    if line is None:
        return []
    notes = [f"Study '{study.study_name}' was {line}."]
    if one:
        notes.append(f"One front: the throughput measured again together on {records[0]['compared_on']} (confirmed).")
    elif mixed and remeasured and not confirmable(study):
        notes.append("The confirmation measures throughput only, and another objective was measured on each device.")
    elif mixed:
        notes.append(f"`nas pareto {study.study_name} --confirm` measures them again together here, as one front.")
    return notes


def show_pareto(records: list[dict[str, Any]], objectives: list[str], title: str, *, wide: bool = False) -> None:
    """The front's table, one per device where records were compared on several."""
    from nas.search.cli.tables import PARETO_LEGEND, PARETO_LEGEND_WIDE, parameter_lines, pareto_columns
    from nas.search.engine import UNKNOWN_DEVICE

    out.print(title, highlight=False)
    fronts = list(dict.fromkeys(r.get("compared_on") for r in records))
    for i, device in enumerate(fronts):
        members = [r for r in records if r.get("compared_on") == device]
        if len(fronts) > 1:
            count = f"{len(members)} trial{'s' if len(members) != 1 else ''}"
            heading = f"Front of the trials measured on {device or UNKNOWN_DEVICE} ({count}):"
            out.print(heading, markup=False, highlight=False)
        legend = (PARETO_LEGEND_WIDE if wide else PARETO_LEGEND) if i == len(fronts) - 1 else ""
        show_table(pareto_columns(members, objectives, wide=wide), legend)
    out.print("Parameters:", highlight=False)
    for line in parameter_lines(records):
        out.print("  " + line, highlight=False, soft_wrap=True)


def show_table(columns: list[Any], legend: str) -> None:
    """A table that fits the terminal whole (tables.fitted), the legend, and what was left out."""
    from nas.search.cli.tables import fitted, not_shown_line, print_table

    layout = fitted(columns, out.width)
    print_table(out, layout)
    if legend:
        out.print(legend, highlight=False, soft_wrap=True)
    if line := not_shown_line(layout.dropped):
        out.print(line, highlight=False, soft_wrap=True)

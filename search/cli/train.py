"""`nas train`: the finishing step of both strategies (engine/final.py): the front, or the
trials asked for, trained again with the space's `final:` recipe, scored once on the test set,
measured again, and kept for `nas export`."""

from __future__ import annotations

from typing import Annotated

import typer

from nas.errors import NasError
from nas.search.cli.console import err, out
from nas.search.cli.options import ArtifactsOpt, DebugOpt, StorageOpt


def parse_trials(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        numbers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise NasError(f"--trials: {text!r} is not a list of trial numbers such as 3,7") from None
    if not numbers or any(n < 0 for n in numbers):
        raise NasError(f"--trials: {text!r} is not a list of trial numbers such as 3,7")
    return list(dict.fromkeys(numbers))


def train(
    study: Annotated[str, typer.Argument(help="Study name.")],
    trials: Annotated[
        str | None, typer.Option("--trials", help="Trial numbers, e.g. 3,7 (default: the Pareto front).")
    ] = None,
    from_scratch: Annotated[
        bool,
        typer.Option("--from-scratch", help="In a supernet study: fresh weights instead of the inherited ones."),
    ] = False,
    again: Annotated[
        bool, typer.Option("--again", help="Train again a trial already final-trained with the same recipe.")
    ] = False,
    storage: StorageOpt = None,
    artifacts: ArtifactsOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Train the front (or --trials) again with the space's `final:` recipe, score each on the
    test set, measure its throughput again, and keep the models for `nas export`. A killed run
    resumes from its last finished epoch; a trial already trained with the same recipe is kept."""
    import os
    from dataclasses import replace

    from rich.table import Table

    from nas.search import runtime
    from nas.search.cli.display import StepView
    from nas.search.engine import join_study
    from nas.search.strategies import strategy_for
    from nas.storage import resolve_storage_url

    runtime.set_debug(debug)
    asked = parse_trials(trials)
    url = resolve_storage_url(storage)
    joined = join_study(url, study)
    if artifacts:
        joined = replace(joined, options=replace(joined.options, artifacts=os.path.abspath(artifacts)))
    runtime.import_tensorflow()
    view = StepView(err)
    try:
        figures = strategy_for(joined.space).train_final(joined, view, trials=asked, scratch=from_scratch, again=again)
    finally:
        view.stop()
    shown = [str(n) for n in asked] if asked else sorted(figures, key=lambda n: -figures[n].test_accuracy)
    table = Table(title=f"Final training of '{study}' (test set: read once, after training)")
    for column in ("trial", "search accuracy", "test accuracy", "img/s (again)", "epochs", "seconds"):
        table.add_column(column, justify="right")
    for number in shown:
        f = figures.get(number)
        if f is None:
            continue
        search = f.search_accuracy
        table.add_row(
            number,
            "-" if search is None else f"{search:.4f}",
            f"{f.test_accuracy:.4f}",
            f"{f.throughput:,.0f}",
            str(f.epochs),
            f"{f.seconds:,.0f}",
        )
    out.print(table)
    out.print(f"`nas pareto {study}` shows the test accuracy; `nas export {study}` exports these models.")

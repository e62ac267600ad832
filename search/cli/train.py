"""`nas train`: the finishing step of both strategies (engine/final.py): the front, or the
trials asked for, trained again with the space's `final:` recipe, scored once on the test set,
measured again, and kept for `nas export`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from nas.errors import NasError
from nas.search.cli.console import err, out
from nas.search.cli.options import ArtifactsOpt, BestOpt, DebugOpt, StorageOpt, WhereOpt

if TYPE_CHECKING:
    import optuna

    from nas.search.results import Choice


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


def _chosen(study: optuna.Study, choice: Choice, limit: int) -> list[int]:
    """The trials --where/--best choose, said on stderr; capped at final.trials as the default front is."""
    numbers, met = choice.trials_to_train(study, limit)
    capped = f" ({met} meet it; final.trials: {limit}, the most accurate)" if met > len(numbers) else ""
    listed = f"trial{'s' * (len(numbers) != 1)} {', '.join(map(str, numbers))}"
    err.print(f"Chosen {choice.describe()}: {listed}{capped}", markup=False, highlight=False)
    return numbers


def train(
    study: Annotated[str, typer.Argument(help="Study name.")],
    trials: Annotated[
        str | None,
        typer.Option(
            "--trials",
            help="Trial numbers, e.g. 3,7 (default: the front's most accurate members, at most the space's "
            "final.trials).",
        ),
    ] = None,
    where: WhereOpt = None,
    best: BestOpt = None,
    from_scratch: Annotated[
        bool,
        typer.Option("--from-scratch", help="In a supernet study: fresh weights instead of the inherited ones."),
    ] = False,
    again: Annotated[
        bool, typer.Option("--again", help="Train again a trial already final-trained with the same recipe.")
    ] = False,
    seeds: Annotated[
        int,
        typer.Option(
            min=1,
            max=100,
            help="Train each network N times (seeds 0..N-1) and keep the mean and spread; seeds already "
            "trained with the same recipe are kept.",
        ),
    ] = 1,
    storage: StorageOpt = None,
    artifacts: ArtifactsOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Train the front's most accurate members (at most the space's final.trials), or the trials
    --trials names or --where/--best choose, again with the space's `final:` recipe; score each
    on the test set, measure its throughput again, and keep the models for `nas export`. A killed
    run resumes from its last finished epoch; a trial already trained with the same recipe is kept
    (--again trains it again). With --seeds N the figures are the seeds' mean and spread."""
    import os
    from dataclasses import replace

    from rich.table import Table

    from nas.search import runtime
    from nas.search.cli.display import StepView
    from nas.search.engine import join_study
    from nas.search.results import Choice, either
    from nas.search.strategies import strategy_for
    from nas.storage import resolve_storage_url

    runtime.set_debug(debug)
    asked = parse_trials(trials)
    choice = Choice.parse(where, best)
    either(asked, choice, "trials")
    url = resolve_storage_url(storage)
    joined = join_study(url, study)
    if choice:
        asked = _chosen(joined.study, choice, joined.space.spec.final.trials)
    if artifacts:
        joined = replace(joined, options=replace(joined.options, artifacts=os.path.abspath(artifacts)))
    runtime.import_tensorflow()
    view = StepView(err)
    try:
        strategy = strategy_for(joined.space)
        figures = strategy.train_final(joined, view, trials=asked, scratch=from_scratch, again=again, seeds=seeds)
    finally:
        view.stop()
    shown = [str(n) for n in asked] if asked else sorted(figures, key=lambda n: -figures[n].test_accuracy)
    table = Table(title=f"Final training of '{study}' (test set: read once, after training)")
    for column in ("trial", "search accuracy", "test accuracy", "img/s (again)", "seeds", "epochs", "seconds"):
        table.add_column(column, justify="right")
    for number in shown:
        f = figures.get(number)
        if f is None:
            continue
        search = f.search_accuracy
        table.add_row(
            number,
            "-" if search is None else f"{search:.4f}",
            _spread(f"{f.test_accuracy:.4f}", f.test_accuracy_sd, ".4f"),
            _spread(f"{f.throughput:,.0f}", f.throughput_sd, ",.0f"),
            str(len(f.runs)),
            str(f.epochs),
            f"{f.seconds:,.0f}",
        )
    out.print(table)
    if many := [n for n in shown if n in figures and len(figures[n].runs) > 1]:
        kept = ", ".join(f"trial {n} seed {figures[n].kept_seed}" for n in many)
        out.print(
            f"With {' or '.join(sorted({f'{len(figures[n].runs)} seeds' for n in many}))}: the mean ± the standard "
            f"deviation over the seeds; the model kept for export is the seed's closest to the mean ({kept})."
        )
    out.print(f"`nas pareto {study}` shows the test accuracy; `nas export {study}` exports these models.")


def _spread(mean: str, sd: float | None, form: str) -> str:
    """`0.9312 ± 0.0021` over several seeds, the figure alone for one."""
    return mean if sd is None else f"{mean} ± {sd:{form}}"

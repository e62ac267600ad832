"""`nas finetune`: a supernet study's front fine-tuned from its inherited weights; `nas search`
runs it after a supernet search that ended normally (strategies/supernet/strategy.py and
finetune.py)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from nas.search.cli.console import err
from nas.search.cli.options import ArtifactsOpt, DebugOpt, StorageOpt

if TYPE_CHECKING:
    from nas.storage import StorageURL


def finetune(
    study: Annotated[str, typer.Argument(help="Study name (searched with search.strategy: supernet).")],
    epochs: Annotated[
        int | None, typer.Option(min=1, help="Epochs per subnet (default: the space's search.supernet.finetune).")
    ] = None,
    storage: StorageOpt = None,
    artifacts: ArtifactsOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Fine-tune the Pareto front of a supernet study from its inherited weights and store the
    accuracies and models (`nas pareto` shows them, `nas export` exports the fine-tuned models)."""
    from nas.search import runtime
    from nas.storage import resolve_storage_url

    runtime.set_debug(debug)
    url = resolve_storage_url(storage)
    runtime.import_tensorflow()
    figures = finetune_here(url, study, artifacts=artifacts, epochs=epochs)
    err.print(f"{len(figures)} subnets of the front fine-tuned; `nas pareto {study}` shows them", highlight=False)


def finetune_here(
    url: StorageURL, name: str, *, artifacts: str | None = None, epochs: int | None = None
) -> dict[str, object]:
    """In this process (TensorFlow loaded); a study of another strategy is told so."""
    from dataclasses import replace

    from nas.search.cli.display import ConsoleEvents
    from nas.search.engine import join_study
    from nas.search.strategies import strategy_for

    joined = join_study(url, name)
    if artifacts:
        joined = replace(joined, options=replace(joined.options, artifacts=os.path.abspath(artifacts)))
    return strategy_for(joined.space).finetune(joined, ConsoleEvents(err), epochs=epochs)

"""`nas finetune`: a supernet study's front fine-tuned from its inherited weights; `nas search`
runs it after a supernet search that ended normally (results/finetune.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from nas.search.cli.console import err
from nas.search.cli.options import ArtifactsOpt, DebugOpt, StorageOpt

if TYPE_CHECKING:
    from nas.search.engine import SearchOptions
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
) -> dict[str, dict[str, object]]:
    """In this process (TensorFlow loaded)."""
    from nas.search.engine import load_existing_study
    from nas.search.results.finetune import finetune_front
    from nas.storage import open_storage

    storage = open_storage(url, create=False)
    study = load_existing_study(storage, name, url)
    return finetune_front(
        study,
        storage,
        url,
        artifacts=artifacts,
        epochs=epochs,
        say=lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True),
    )


def finetune_in_child(options: SearchOptions, placement_env: dict[str, str]) -> None:
    """The pool's parent never loads TensorFlow: `nas finetune` runs on the first worker's
    device. A failure is a warning: the search itself is complete and saved."""
    env = os.environ | placement_env | {"NAS_STORAGE": options.storage.raw}
    command = [sys.executable, "-m", "nas", "finetune", options.study_name]
    command += ["--artifacts", options.artifacts] if options.artifacts else []
    result = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in result.stderr.splitlines():
        if line.startswith(("Fine-tuning", "trial ", "Warning")):
            err.print(line, markup=False, highlight=False, soft_wrap=True)
    if result.returncode != 0:
        last = next((line for line in reversed(result.stderr.splitlines()) if line.strip()), "no output")
        err.print(f"Warning: fine-tuning the front failed ({last}); run `nas finetune {options.study_name}`")

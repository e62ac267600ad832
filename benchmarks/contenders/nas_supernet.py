"""nas (supernet): the preset with `search.strategy: supernet` and that strategy's defaults.

Its clock includes the supernet's training (`nas search --timeout 0` first), its trials get
what is left less FINETUNE_RESERVE for fine-tuning the front, and each fine-tuned subnet
replaces its inherited figure from the time the fine-tuning ended."""

from __future__ import annotations

import datetime as dt
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.contenders.nas_trials import search_command, study_trials
from benchmarks.contenders.preset import preset

# The first command trains the supernet; the second gets what is left of the budget less this
# share, kept for fine-tuning the front after its last trial (up to 16 subnets, 3 epochs each:
# 4-11 s apiece here), so that the whole run fits in the budget; the race's report shows when
# each contender's last result came.
FINETUNE_RESERVE = 0.25


def run(name: str, seed: int, budget: float, epochs: int | None, folder: Path, quick: bool) -> list[dict[str, Any]]:
    command = search_command(folder, preset(epochs, asha=False, quick=quick, supernet=True), seed)
    started = time.time()
    # nas' --timeout counts from its search loop, which a supernet study enters after the
    # supernet's training: train first (start no trial), then search the rest of the budget.
    subprocess.run([*command, "--timeout", "0"], cwd=folder, check=True, capture_output=True, text=True)
    budget = max(0.0, budget * (1 - FINETUNE_RESERVE) - (time.time() - started))
    subprocess.run([*command, "--timeout", str(budget)], cwd=folder, check=True, capture_output=True, text=True)
    study, trials, where = study_trials(folder, started)
    return trials + finetuned_entries(study, trials, where, started)


def finetuned_entries(
    study: Any, trials: list[dict[str, Any]], where: dict[int, int], started: float
) -> list[dict[str, Any]]:
    """A supernet study's fine-tuned front subnets, each as an entry that `replaces` its trial's
    inherited one from the time the fine-tuning ended (the study records when its last subnet
    finished; every one counts from then, which is late for the first ones, never early)."""
    from nas.search.records import StudyAttr

    record = study.user_attrs.get(StudyAttr.FINETUNED)
    if not record:
        return []
    # The record's time is to the second, cut down: one second more is never early.
    ended = dt.datetime.fromisoformat(record["finetuned_at"]).timestamp() + 1.0 - started
    entries = []
    for number, figures in record["trials"].items():
        inherited = trials[where[int(number)]]
        entries.append(
            inherited
            | {
                "end_s": ended,
                "accuracy": figures["accuracy"],
                "inside_s": figures["seconds"],
                "replaces": where[int(number)],
            }
        )
    return entries

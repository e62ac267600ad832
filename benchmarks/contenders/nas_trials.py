"""nas with default settings, and nas with `search.early_stopping: {method: asha, min_epochs:
1, eta: 3}`: `nas search <preset> --timeout B --seed S` through the CLI, as its users run it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.contenders.preset import preset


def search_command(folder: Path, space: dict[str, Any], seed: int) -> list[str]:
    """`nas search` on `space` (written into `folder`) with its study in `folder`'s nas.db."""
    path = folder / "race.yaml"
    path.write_text(yaml.safe_dump(space))
    return [sys.executable, "-m", "nas", "search", str(path), "--seed", str(seed), "--storage", storage(folder)]


def storage(folder: Path) -> str:
    return f"sqlite:///{folder / 'nas.db'}"


def study_trials(folder: Path, started: float) -> tuple[Any, list[dict[str, Any]], dict[int, int]]:
    """The race study, its finished trials as race entries (seconds since `started`) and, by
    trial number, each one's index among them."""
    import optuna

    study = optuna.load_study(study_name="race", storage=storage(folder))
    trials: list[dict[str, Any]] = []
    where: dict[int, int] = {}
    for t in study.trials:
        if t.state.name not in ("COMPLETE", "PRUNED") or t.datetime_complete is None:
            continue
        durations = t.user_attrs.get("durations", {})
        where[t.number] = len(trials)
        trials.append(
            {
                "end_s": t.datetime_complete.timestamp() - started,
                "accuracy": t.values[0] if t.values else None,
                "throughput": t.values[1] if t.values else None,
                "inside_s": durations.get("measure", 0.0) + durations.get("train", 0.0),
                "stopped": bool(t.user_attrs.get("early_stopped") or t.user_attrs.get("screened")),
                "params": t.params,
            }
        )
    return study, trials, where


def run(name: str, seed: int, budget: float, epochs: int | None, folder: Path, quick: bool) -> list[dict[str, Any]]:
    command = search_command(folder, preset(epochs, asha=name == "nas (asha)", quick=quick), seed)
    started = time.time()
    subprocess.run([*command, "--timeout", str(budget)], cwd=folder, check=True, capture_output=True, text=True)
    return study_trials(folder, started)[1]

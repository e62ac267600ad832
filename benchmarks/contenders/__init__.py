"""The tools benchmarks/race.py races, one a module, each run the way its users run it. Every
runner has one signature, `run(name, seed, budget, epochs, folder, quick)`, returns the run's
trials as race entries (end_s, accuracy, throughput, inside_s, stopped, params) and imports
its tools when it runs, so listing the contenders costs nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.contenders import kerastuner, nas_supernet, nas_trials, optuna_tpe

Runner = Callable[[str, int, float, int | None, Path, bool], list[dict[str, Any]]]

# In this order: a kept run's file is named by its contender's index (benchmarks/race-runs).
RUNNERS: dict[str, Runner] = {
    "nas": nas_trials.run,
    "nas (asha)": nas_trials.run,
    "KerasTuner Hyperband": kerastuner.run,
    "KerasTuner BayesianOptimization": kerastuner.run,
    "Optuna TPE": optuna_tpe.run,
    "nas (supernet)": nas_supernet.run,
}

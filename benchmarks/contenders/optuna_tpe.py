"""Optuna: a hand-written objective (the user's Keras builder, `model.fit`, the timing loop)
returning (accuracy, images/s) to a multi-objective TPE study; no pruning (Optuna's pruners
refuse multi-objective studies)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.contenders.keras_model import UserTrials, suggest


def run(name: str, seed: int, budget: float, epochs: int | None, folder: Path, quick: bool) -> list[dict[str, Any]]:
    user = UserTrials(budget, epochs)
    import keras
    import optuna

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        def ask(kind: str, key: str, *domain: Any) -> Any:
            if kind == "choice":
                return trial.suggest_categorical(key, domain[0])
            if kind == "int":
                return trial.suggest_int(key, domain[0], domain[1])
            return trial.suggest_float(key, domain[0], domain[1], log=domain[2])

        values = suggest(ask)
        keras.utils.set_random_seed(seed + trial.number)
        return user.train_and_time(values, user.model(values))

    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True)
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    study.optimize(objective, timeout=budget)
    return user.trials

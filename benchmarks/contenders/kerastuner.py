"""KerasTuner `Hyperband` (max_epochs = the preset's epochs, factor 3, iterations until the
budget ends) and `BayesianOptimization`, with a HyperModel written as a KerasTuner user writes
it: the user's Keras builder in `build(hp)`, `model.fit` with the callbacks KerasTuner passes
(its best-epoch checkpoint kept), throughput from the timing loop in `fit`, and the two
objectives folded into the one score KerasTuner ranks by (benchmarks/scoring.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.contenders.keras_model import UserTrials, suggest
from benchmarks.scoring import single_score


def run(name: str, seed: int, budget: float, epochs: int | None, folder: Path, quick: bool) -> list[dict[str, Any]]:
    user = UserTrials(budget, epochs)
    import keras_tuner as kt

    class BudgetReached(kt.errors.FatalError):  # type: ignore[misc]
        """KerasTuner ends a search early only on a fatal error."""

    class MobileNetHyperModel(kt.HyperModel):  # type: ignore[misc]
        def build(self, hp: Any) -> Any:
            def ask(kind: str, key: str, *domain: Any) -> Any:
                if kind == "choice":
                    return hp.Choice(key, domain[0])
                if kind == "int":
                    return hp.Int(key, domain[0], domain[1])
                return hp.Float(key, domain[0], domain[1], sampling="log" if domain[2] else "linear")

            self.values = suggest(ask)
            return user.model(self.values)

        def fit(self, hp: Any, model: Any, *args: Any, **kwargs: Any) -> dict[str, float]:
            # The first trial always runs, as nas' and Optuna's do (their clocks start with their
            # search loops, which ask for a trial at once): here the tuner's set-up and first build
            # come first and can outlast a short budget on loaded cores, leaving no front.
            if user.trials and time.monotonic() >= user.deadline:
                raise BudgetReached("time budget reached")
            # KerasTuner's callbacks (it saves the model every epoch when, as here, the
            # objective is computed after fit) and, under Hyperband, the epochs of the bracket.
            fit = {k: v for k, v in kwargs.items() if k in ("callbacks", "epochs", "initial_epoch")}
            accuracy, throughput = user.train_and_time(self.values, model, **fit)
            return {"score": single_score(accuracy, throughput), "val_accuracy": accuracy}

    common = {
        "objective": kt.Objective("score", "max"),
        "seed": seed + 1,  # KerasTuner takes a seed of 0 for none (`seed or random.randint(...)`)
        "overwrite": True,
        "directory": str(folder),
        "project_name": "kt",
    }
    if name == "KerasTuner Hyperband":
        # KerasTuner's advice: hyperband_iterations "as high a value as is within your resource
        # budget"; its default (1) ends the search after one pass of the brackets (10 trials,
        # under 3 minutes here), so it would leave most of the budget unused.
        tuner = kt.Hyperband(
            MobileNetHyperModel(), max_epochs=user.epochs, factor=3, hyperband_iterations=1000, **common
        )
    else:
        tuner = kt.BayesianOptimization(MobileNetHyperModel(), max_trials=100_000, **common)
    try:
        tuner.search(verbose=0)
    except BudgetReached:
        pass
    except RuntimeError as exc:  # KerasTuner re-raises a fatal error from fit wrapped on some paths
        if "time budget reached" not in str(exc):
            raise
    return user.trials

"""The engine's front (optuna_private.front_trials) is Optuna's best_trials without the copy:
the same trials, constraints respected, on studies with failed, pruned and running trials."""

from __future__ import annotations

import numpy as np
import optuna

from nas.search.engine.optuna_private import front_trials


def _study(constrained: bool, seed: int) -> optuna.Study:
    rng = np.random.default_rng(seed)
    study = optuna.create_study(directions=["maximize", "maximize"])
    for i in range(300):
        trial = study.ask()
        if constrained:
            trial.set_user_attr("unused", i)
            study._storage.set_trial_system_attr(trial._trial_id, "constraints", [float(rng.normal())])
        state = rng.choice(["complete", "pruned", "fail", "running"], p=[0.8, 0.1, 0.05, 0.05])
        if state == "complete":
            # Coarse values: ties and duplicates, which the front keeps.
            study.tell(trial, [float(rng.integers(0, 30)), float(rng.integers(0, 30))])
        elif state != "running":
            study.tell(
                trial, state=optuna.trial.TrialState.PRUNED if state == "pruned" else optuna.trial.TrialState.FAIL
            )
    return study


def test_the_front_is_optunas_best_trials_with_and_without_constraints() -> None:
    for constrained in (False, True):
        for seed in range(3):
            study = _study(constrained, seed)
            expected = [t.number for t in study.best_trials]
            assert expected  # not a vacuous comparison
            assert [t.number for t in front_trials(study)] == expected

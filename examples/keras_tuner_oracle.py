"""An ordinary KerasTuner HyperModel and Tuner, running on nas' Optuna-backed oracle.

    python examples/keras_tuner_oracle.py [--trials 6] [--storage sqlite:///kt.db]

The one change from a plain KerasTuner script is `oracle=OptunaOracle(...)`: proposals come
from Optuna's TPE sampler, both objectives are kept (a Pareto front instead of one blended
score), and the trials land in a database that `nas status`, `nas report`,
`optuna-dashboard` and the `optuna` CLI read. Run it again with more trials and it resumes.
"""

from __future__ import annotations

import argparse

import keras
import keras_tuner
import numpy as np
from sklearn.datasets import load_digits

from nas.tuner import OptunaOracle


def build(hp: keras_tuner.HyperParameters) -> keras.Model:
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(hp.Int("units", 16, 128, step=16), "relu")])
    if hp.Boolean("dropout"):
        # Conditional: sampled only in trials where dropout is on.
        with hp.conditional_scope("dropout", [True]):
            model.add(keras.layers.Dropout(hp.Float("rate", 0.1, 0.5)))
    model.add(keras.layers.Dense(10, "softmax"))
    model.compile(
        optimizer=keras.optimizers.Adam(hp.Float("learning_rate", 1e-3, 3e-2, sampling="log")),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--storage", default="sqlite:///kt.db")
    parser.add_argument("--directory", default="kt")
    args = parser.parse_args()

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    tuner = keras_tuner.Tuner(
        hypermodel=build,
        oracle=OptunaOracle(
            objective=[keras_tuner.Objective("val_accuracy", "max"), keras_tuner.Objective("val_loss", "min")],
            max_trials=args.trials,
            study_name="keras-tuner-digits",
            storage=args.storage,
        ),
        directory=args.directory,
        project_name="digits",
        overwrite=False,  # resume
    )
    tuner.search(x[:1400], y[:1400], validation_data=(x[1400:], y[1400:]), epochs=5, verbose=0)
    for trial in tuner.oracle.get_best_trials():  # the Pareto front
        accuracy, loss = (trial.metrics.get_best_value(m) for m in ("val_accuracy", "val_loss"))
        values = trial.hyperparameters.values
        print(f"front: trial {trial.trial_id} val_accuracy {accuracy:.4f} val_loss {loss:.4f} {values}")


if __name__ == "__main__":
    main()

"""Training and evaluation of one candidate."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import keras

from .data import Dataset, pipeline
from .space import Candidate


class TrainingDiverged(Exception):
    """The loss became NaN or infinite; the trial fails with this reason."""


@dataclass(frozen=True)
class TrainResult:
    accuracy: float  # validation accuracy of the trained model
    loss: float
    history: dict[str, list[float]]  # per epoch: loss, accuracy, val_loss, val_accuracy
    seconds: float


def make_optimizer(name: str, learning_rate: float, total_steps: int) -> keras.optimizers.Optimizer:
    # Cosine decay over the whole run: with only a few epochs per trial it gives clearly
    # better final accuracy than a constant rate, for every optimizer.
    schedule = keras.optimizers.schedules.CosineDecay(learning_rate, decay_steps=max(1, total_steps))
    if name == "adam":
        return keras.optimizers.Adam(schedule)
    if name == "adamw":
        return keras.optimizers.AdamW(schedule)
    if name == "sgd":
        return keras.optimizers.SGD(schedule, momentum=0.9, nesterov=True)
    if name == "rmsprop":
        return keras.optimizers.RMSprop(schedule)
    raise ValueError(f"unknown optimizer {name!r}")


class _EpochReporter(keras.callbacks.Callback):  # type: ignore[misc]
    def __init__(self, epochs: int, on_epoch: Callable[[int, int, dict[str, float]], None]) -> None:
        super().__init__()
        self._epochs = epochs
        self._on_epoch = on_epoch

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        logs = {k: float(v) for k, v in (logs or {}).items()}
        if not all(math.isfinite(v) for k, v in logs.items() if "loss" in k):
            self.model.stop_training = True
        self._on_epoch(epoch + 1, self._epochs, logs)


def train_and_evaluate(
    model: keras.Model,
    c: Candidate,
    data: Dataset,
    *,
    seed: int,
    on_epoch: Callable[[int, int, dict[str, float]], None] = lambda *_: None,
) -> TrainResult:
    started = time.perf_counter()
    steps = math.ceil(len(data.y_train) / c.batch_size) * c.epochs
    model.compile(
        optimizer=make_optimizer(c.optimizer, c.learning_rate, steps),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    train = pipeline(data.x_train, data.y_train, c.batch_size, shuffle_seed=seed)
    val = pipeline(data.x_val, data.y_val, max(c.batch_size, 256), shuffle_seed=None)
    fit = model.fit(
        train,
        validation_data=val,
        epochs=c.epochs,
        verbose=0,
        callbacks=[keras.callbacks.TerminateOnNaN(), _EpochReporter(c.epochs, on_epoch)],
    )
    history = {k: [float(v) for v in values] for k, values in fit.history.items()}
    losses = history.get("loss", [])
    if not losses or not all(math.isfinite(v) for v in losses) or len(losses) < c.epochs:
        raise TrainingDiverged(
            f"training loss became {losses[-1] if losses else 'undefined'} "
            f"in epoch {len(losses)} of {c.epochs}"
        )
    # The final model is what a user would deploy, so its accuracy is the objective (not the
    # best epoch's); Keras evaluated exactly those weights at the end of the last epoch.
    accuracy, loss = history["val_accuracy"][-1], history["val_loss"][-1]
    return TrainResult(accuracy, loss, history, time.perf_counter() - started)

"""One trial: build the sampled network, measure it on this device, train it, score it."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import keras
import optuna

from .data import Dataset
from .device import describe_device
from .measure import measure_throughput
from .model import build_model, count_flops
from .space import SearchSpace
from .train import train_and_evaluate

PhaseCallback = Callable[[str], None]


class TrialRunner:
    """Runs trials of one space on one dataset; objectives come back in the space's order."""

    def __init__(self, space: SearchSpace, data: Dataset, *, seed: int, on_phase: PhaseCallback) -> None:
        self.space = space
        self.data = data
        self.seed = seed
        self.on_phase = on_phase

    def run(self, trial: optuna.Trial) -> list[float]:
        durations: dict[str, float] = {}
        started = time.perf_counter()

        @contextmanager
        def phase(name: str) -> Iterator[None]:
            self.on_phase(name)
            t0 = time.perf_counter()
            try:
                yield
            finally:
                durations[name] = round(time.perf_counter() - t0, 4)
                trial.set_user_attr("durations", durations)

        spec = self.space.spec
        model: keras.Model | None = None
        try:
            with phase("build"):
                candidate = self.space.sample(
                    trial, num_classes=self.data.num_classes, channels=self.data.channels
                )
                model = build_model(candidate, seed=self.seed + trial.number)
                trial.set_user_attr("params", int(model.count_params()))
                trial.set_user_attr("flops", count_flops(model))

            with phase("measure"):
                m = spec.measure
                tp = measure_throughput(
                    model,
                    m.batch_size,
                    rounds=m.rounds,
                    round_seconds=m.round_seconds,
                    max_spread=m.max_spread,
                )
                trial.set_user_attr("device", describe_device())
                trial.set_user_attr("throughput", tp.to_dict())
                trial.set_user_attr("throughput_spread", round(tp.spread, 4))

            def on_epoch(epoch: int, epochs: int, logs: dict[str, float]) -> None:
                acc = logs.get("val_accuracy")
                self.on_phase(f"train epoch {epoch}/{epochs}" + (f", val acc {acc:.3f}" if acc else ""))

            with phase("train"):
                result = train_and_evaluate(
                    model, candidate, self.data, seed=self.seed + trial.number, on_epoch=on_epoch
                )
                trial.set_user_attr("history", result.history)
                trial.set_user_attr("val_loss", result.loss)

            durations["total"] = round(time.perf_counter() - started, 4)
            trial.set_user_attr("durations", durations)
            figures: dict[str, float] = {"accuracy": result.accuracy, "throughput": tp.images_per_s}
            return [figures[name] for name in spec.objectives]
        finally:
            # Without this, every trial's graphs and weights stay alive in the process and a
            # long search grows until it is killed (the classic KerasTuner complaint).
            del model
            keras.backend.clear_session(free_memory=True)
            gc.collect()


def describe_failure(exc: BaseException) -> str:
    """One line for the trial's fail_reason attribute."""
    from .quiet import import_tensorflow
    from .train import TrainingDiverged

    tf = import_tensorflow()
    if isinstance(exc, tf.errors.ResourceExhaustedError):
        return "out of memory (ResourceExhaustedError): " + str(exc).strip().splitlines()[0][:300]
    if isinstance(exc, TrainingDiverged):
        return str(exc)
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__

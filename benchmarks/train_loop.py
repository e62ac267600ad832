"""Graph-building and per-epoch cost of our training loop against `model.fit`, same models.

    python -m benchmarks.train_loop [--models 3] [--epochs 3]

Each model is trained once with Keras' `fit` and once with nas' loop (search/training/train.py), in
this process, alternating, and the script prints the time to the end of the first epoch
(where graph building lands) and the mean time of the later epochs, with ratios.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from nas.search import runtime

runtime.set_debug(False)
runtime.import_tensorflow()

import keras
import optuna

from nas.search.data import load_dataset, pipeline
from nas.search.nets import build_model
from nas.search.space import load_space
from nas.search.training import make_optimizer, train_and_evaluate


def with_fit(model: keras.Model, candidate, data, epochs: int) -> list[float]:  # type: ignore[no-untyped-def]
    model.compile(
        optimizer=make_optimizer(candidate.optimizer, candidate.learning_rate, 1000),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=False,
    )
    train = pipeline(data.x_train, data.y_train, candidate.batch_size, shuffle_seed=0)
    val = pipeline(data.x_val, data.y_val, 256, shuffle_seed=None)
    marks = [time.perf_counter()]

    class Mark(keras.callbacks.Callback):  # type: ignore[misc]
        def on_epoch_end(self, epoch: int, logs: object = None) -> None:
            marks.append(time.perf_counter())

    model.fit(train, validation_data=val, epochs=epochs, verbose=0, callbacks=[Mark()])
    return [b - a for a, b in itertools.pairwise(marks)]


def with_nas(model: keras.Model, candidate, data, epochs: int) -> list[float]:  # type: ignore[no-untyped-def]
    marks = [time.perf_counter()]
    train_and_evaluate(model, candidate, data, seed=0, on_epoch=lambda *_: marks.append(time.perf_counter()))
    return [b - a for a, b in itertools.pairwise(marks)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    space = load_space("mobilenet")
    data = load_dataset(space.spec.dataset)
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.RandomSampler(0))
    first: dict[str, list[float]] = {"fit": [], "nas": []}
    later: dict[str, list[float]] = {"fit": [], "nas": []}
    for i in range(args.models):
        candidate = space.sample(study.ask(), num_classes=data.num_classes, channels=data.channels)
        candidate = type(candidate)(**{**candidate.__dict__, "epochs": args.epochs})
        for name, loop in (("fit", with_fit), ("nas", with_nas)):
            keras.backend.clear_session(free_memory=True)
            epochs = loop(build_model(candidate, seed=i), candidate, data, args.epochs)
            first[name].append(epochs[0])
            later[name].append(statistics.mean(epochs[1:]))
            print(f"model {i} {name}: first epoch {epochs[0]:.2f} s, later epochs {later[name][-1]:.2f} s")
    f_fit, f_nas = statistics.median(first["fit"]), statistics.median(first["nas"])
    l_fit, l_nas = statistics.median(later["fit"]), statistics.median(later["nas"])
    print(f"first epoch, graphs built: fit {f_fit:.2f} s, nas {f_nas:.2f} s, ratio {f_fit / f_nas:.2f}x")
    print(f"later epochs:              fit {l_fit:.2f} s, nas {l_nas:.2f} s, ratio {l_fit / l_nas:.2f}x")


if __name__ == "__main__":
    main()

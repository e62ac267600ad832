"""Memory across trials: how much each trained model leaves behind in a long-lived process.

    python benchmarks/memory.py [--trials 12]

Each variant runs in its own process and, per trial, builds a candidate of the `tiny`
preset, measures it, trains it for 3 epochs and then releases Keras/TensorFlow state the
way the search does (`gc.freeze()` once after start-up, as search/engine/loop.py does, then
`keras.backend.clear_session(free_memory=True)`, which runs `gc.collect()`, after each trial).
Variants: nas' own training loop (search/training/train.py) and Keras' `model.fit`. Prints the
resident set size after each trial and the growth per trial (least-squares slope over the
second half).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys


def trials(count: int, loop: str) -> list[float]:
    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    import gc

    import keras
    import optuna

    from nas.search.data import load_dataset, pipeline
    from nas.search.hardware import measure_throughput
    from nas.search.nets import build_model
    from nas.search.space import load_space
    from nas.search.training import make_optimizer, train_and_evaluate

    space = load_space("tiny")
    data = load_dataset(space.spec.dataset)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(0))
    gc.freeze()  # as the search loop does before its first trial
    rss = []
    for i in range(count):
        candidate = space.sample(study.ask(), num_classes=10, channels=1)
        model = build_model(candidate, seed=i)
        measure_throughput(model, 32, rounds=3, round_seconds=0.02)
        if loop == "nas":
            train_and_evaluate(model, candidate, data, seed=i)
        else:
            optimizer = make_optimizer(candidate.optimizer, candidate.learning_rate, 100)
            model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", jit_compile=False)
            train = pipeline(data.x_train, data.y_train, candidate.batch_size, shuffle_seed=i)
            model.fit(train, epochs=candidate.epochs, verbose=0)
        del model
        keras.backend.clear_session(free_memory=True)
        with open("/proc/self/statm") as f:
            rss.append(int(f.read().split()[1]) * resource.getpagesize() / 2**20)
    return rss


def slope(values: list[float]) -> float:
    half = values[len(values) // 2 :]
    return statistics.linear_regression(range(len(half)), half).slope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--loop", choices=["nas", "fit"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loop:
        print(json.dumps(trials(args.trials, args.loop)))
        return
    growth = {}
    for loop in ("fit", "nas"):
        done = subprocess.run(
            [sys.executable, __file__, "--trials", str(args.trials), "--loop", loop],
            capture_output=True,
            text=True,
            check=True,
        )
        rss = json.loads(done.stdout.strip().splitlines()[-1])
        growth[loop] = slope(rss)
        print(f"{loop:4s} RSS MiB after each trial: {' '.join(f'{v:.0f}' for v in rss)}")
        print(f"{loop:4s} growth per trial (second half): {growth[loop]:.1f} MiB")
    print(f"model.fit leaves {growth['fit'] / growth['nas']:.1f}x as much behind per trial as nas' loop")


if __name__ == "__main__":
    main()

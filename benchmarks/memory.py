"""Memory across trials: what each trained model leaves behind in a long-lived process, and
what the garbage collection after each trial costs as that grows.

    python -m benchmarks.memory [--trials 12] [--space tiny] [--epochs N] [--variants fit,nas,nas-freeze-once]

Each variant runs in its own process and, per trial, builds a candidate of the space, measures
it, trains it and then releases Keras/TensorFlow state with
`keras.backend.clear_session(free_memory=True)`, which runs a full `gc.collect()`. Variants:
- `nas`: nas' own training loop (search/training/train.py), with what the search loop does now:
  `freeze_survivors()` (search/engine/collector.py) once after start-up and after every trial;
- `nas-freeze-once`: the same loop, frozen once after start-up only (the search before
  collector.py);
- `fit`: Keras' `model.fit`, frozen once after start-up.
Prints, per trial, the resident set size and the seconds of that release (clear_session plus
the freeze where the variant has it), the growth per trial (least-squares slope over the second
half) and the mean release seconds of the first and the last five trials.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import statistics
import subprocess
import sys
import time

VARIANTS = ("nas", "nas-freeze-once", "fit")


def trials(count: int, variant: str, space_name: str, epochs: int | None) -> dict[str, list[float]]:
    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()

    import keras
    import optuna

    from nas.search.data import load_dataset, pipeline
    from nas.search.engine import freeze_survivors
    from nas.search.hardware import measure_throughput
    from nas.search.nets import build_model
    from nas.search.space import load_space
    from nas.search.training import make_optimizer, train_and_evaluate

    space = load_space(space_name)
    data = load_dataset(space.spec.dataset)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(0))
    freeze_survivors()  # as the search loop does before its first trial
    rss, release = [], []
    for i in range(count):
        candidate = space.sample(study.ask(), num_classes=10, channels=1)
        if epochs is not None:
            candidate = dataclasses.replace(candidate, epochs=epochs)
        model = build_model(candidate, seed=i)
        measure_throughput(model, 32, rounds=3, round_seconds=0.02)
        if variant == "fit":
            optimizer = make_optimizer(candidate.optimizer, candidate.learning_rate, 100)
            model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", jit_compile=False)
            train = pipeline(data.x_train, data.y_train, candidate.batch_size, shuffle_seed=i)
            model.fit(train, epochs=candidate.epochs, verbose=0)
        else:
            train_and_evaluate(model, candidate, data, seed=i)
        del model
        started = time.perf_counter()
        keras.backend.clear_session(free_memory=True)
        if variant == "nas":
            freeze_survivors()
        release.append(time.perf_counter() - started)
        with open("/proc/self/statm") as f:
            rss.append(int(f.read().split()[1]) * resource.getpagesize() / 2**20)
    return {"rss": rss, "release": release}


def slope(values: list[float]) -> float:
    half = values[len(values) // 2 :]
    return statistics.linear_regression(range(len(half)), half).slope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--space", default="tiny", help="a preset or space file")
    parser.add_argument("--epochs", type=int, help="train each candidate this many epochs instead")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(trials(args.trials, args.variant, args.space, args.epochs)))
        return
    variants = args.variants.split(",")
    if unknown := set(variants) - set(VARIANTS):
        parser.error(f"unknown variants {sorted(unknown)} (use {', '.join(VARIANTS)})")
    summary = {}
    for variant in variants:
        command = [sys.executable, __file__, "--trials", str(args.trials), "--space", args.space, "--variant", variant]
        if args.epochs is not None:
            command += ["--epochs", str(args.epochs)]
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        rss, release = figures["rss"], figures["release"]
        summary[variant] = {
            "growth_mib_per_trial": slope(rss),
            "release_s_first5": statistics.mean(release[:5]),
            "release_s_last5": statistics.mean(release[-5:]),
            **figures,
        }
        print(f"{variant}: RSS MiB after each trial: {' '.join(f'{v:.0f}' for v in rss)}")
        print(f"{variant}: release s after each trial: {' '.join(f'{v:.2f}' for v in release)}")
        row = summary[variant]
        print(
            f"{variant}: growth per trial (second half) {row['growth_mib_per_trial']:.1f} MiB; release "
            f"{row['release_s_first5']:.3f} s (first 5 trials) -> {row['release_s_last5']:.3f} s (last 5)"
        )
    if "fit" in summary and "nas" in summary:
        ratio = summary["fit"]["growth_mib_per_trial"] / summary["nas"]["growth_mib_per_trial"]
        print(f"model.fit leaves {ratio:.1f}x as much behind per trial as nas' loop")
    print(json.dumps({v: {k: x for k, x in row.items() if not isinstance(x, list)} for v, row in summary.items()}))


if __name__ == "__main__":
    main()

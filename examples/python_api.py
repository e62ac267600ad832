"""From a search to a deployed model in Python, with `nas.api` only: search, final-train,
choose, load the Keras model, predict, export to TFLite.

    python examples/python_api.py [--trials 3] [--storage sqlite:///api-demo.db] [--out api-demo-export]

A tiny space on scikit-learn's built-in digits (8x8 images, no download), so it runs on a
laptop's CPU in about a minute; run it again and the search resumes instead of starting over.
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_digits

import nas.api as nas

SPACE = {
    "name": "api-demo",
    # A fifth of the images is kept apart as the test set `train()` scores on, once.
    "dataset": {"source": "digits", "image_size": 8, "subset": 500, "test_fraction": 0.2},
    "model": {
        "stem_filters": 8,
        "stem_stride": 1,
        "head_filters": 32,
        "stages": [
            {"filters": 8, "kernel": {"choice": [3, 5]}, "expansion": {"choice": [1, 2]}},
            {"filters": 16, "stride": 2, "depth": {"int": [1, 2]}},
        ],
    },
    "training": {"epochs": 2, "batch_size": 32, "learning_rate": {"float": [0.005, 0.03], "log": True}},
    # Short measurements: figures for a demo, not for keeping (the defaults are).
    "measure": {"batch_sizes": [32], "rounds": 3, "round_seconds": 0.05, "warmup_seconds": 2, "baseline_rounds": 5},
    "final": {"epochs": 4, "warmup_epochs": 1, "trials": 1},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--storage", default="sqlite:///api-demo.db")
    parser.add_argument("--out", default="api-demo-export")
    args = parser.parse_args()

    # 1. Search: the study is kept in the database; a second run resumes it.
    study = nas.search(SPACE, storage=args.storage, trials=args.trials, on_message=print)
    for record in study.pareto():
        print(f"front: trial {record['trial']} accuracy {record['accuracy']:.4f} {record['throughput']:,.0f} img/s")

    # 2. Choose: the most accurate network at least half as fast as the fastest one.
    fastest = study.best("throughput")["throughput"]
    chosen = study.best("accuracy", where=[f"throughput>={fastest / 2:.0f}"])
    number = chosen["trial"]
    print(f"chosen: trial {number} ({chosen['accuracy']:.4f}, {chosen['throughput']:,.0f} img/s)")

    # 3. Final-train it with the space's `final:` recipe; the test set is read here, once.
    figures = study.train(trials=[number], on_message=print)[number]
    print(f"trial {number}: test accuracy {figures['test_accuracy']:.4f}")

    # 4. The Keras model (final-trained, as `nas_weights` says) predicts like any Keras model.
    model = study.model(number)
    images = (load_digits().images[-10:, :, :, None] / 16.0).astype(np.float32)  # [0, 1], NHWC
    predicted = model.predict(images, verbose=0).argmax(axis=1)
    print(f"{model.nas_weights} model of trial {number}: predicted {predicted.tolist()}")
    print(f"                         labels    {load_digits().target[-10:].tolist()}")

    # 5. Export to TFLite, checked against the Keras model in the LiteRT interpreter.
    manifest = study.export("tflite", args.out, trials=[number])
    for record in manifest["trials"]:
        print(f"exported trial {record['trial']} ({record['weights']} weights): {record['verdict']}")


if __name__ == "__main__":
    main()

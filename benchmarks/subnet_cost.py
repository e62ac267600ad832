"""What one supernet subnet's trial costs, part by part, on the seed-0 Fashion-MNIST supernet
(issue 47's goal: 1,000 subnets an hour, measuring included).

    python -m benchmarks.subnet_cost [--subnets 6]

For subnets of that study spread over its throughput (its own trials, so the figures are those
of subnets a search scores), in one process: extraction, BatchNorm re-calibration, scoring the
10,002 validation images layer by layer from Python (eagerly, as nas did before this benchmark)
and through one traced graph (as it does now, the trace included), each scoring run twice in
alternating order, and nas' throughput and latency measuring by the study's own protocol.
Writes benchmarks/subnet_cost.json; needs the seed-0 supernet's committed checkpoint of the
round benchmarks/fashion_supernet.py runs (its `HERE`/artifacts/fashion_supernet_s0/
supernet.npz; the figures committed were round 1's, benchmarks/fashion-runs/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import stamps
from benchmarks.fashion_supernet import DATABASE, HERE, _setup

OUT = HERE.parent.parent / "subnet_cost.json"


def _seconds(work: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = work()
    return time.perf_counter() - started, value


def eager_accuracy(model: Any, x: np.ndarray, y: np.ndarray) -> float:
    """The scoring nas did before: each batch through the Keras model from Python."""
    from nas.search.data import pipeline
    from nas.search.strategies.supernet.halving import SCORE_BATCH

    correct = 0
    for images, labels in pipeline(x, y, SCORE_BATCH, shuffle_seed=None):
        correct += int((np.asarray(model(images, training=False)).argmax(-1) == np.asarray(labels)).sum())
    return correct / len(y)


def spread_trials(study: Any, count: int) -> list[Any]:
    """`count` COMPLETE trials evenly spread over the study's measured throughput."""
    done = sorted((t for t in study.trials if t.values), key=lambda t: t.values[1])
    return [done[int((k + 0.5) * len(done) / count)] for k in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subnets", type=int, default=6)
    args = parser.parse_args()

    import keras
    import optuna

    from nas.search.hardware import HardwareProfiler
    from nas.search.strategies.supernet.evaluation import calibration_batches, evaluate
    from nas.search.strategies.supernet.extract import extract, recalibrate
    from nas.search.strategies.supernet.network import Supernet
    from nas.search.strategies.supernet.train import load_checkpoint

    space, elastic, data = _setup()
    largest = elastic.space.candidate(elastic.largest, num_classes=data.num_classes, channels=data.channels)
    supernet = Supernet(largest, seed=0)
    load_checkpoint(HERE / "artifacts" / "fashion_supernet_s0" / "supernet.npz", supernet)
    batches = calibration_batches(data, largest.batch_size, space.spec.search.supernet.calibration_batches)
    study = optuna.load_study(study_name="fashion_supernet_s0", storage=f"sqlite:///{DATABASE}")
    measure = space.spec.measure.model_copy(update={"latency": True})
    profiler = HardwareProfiler(measure, None)
    profiler.baseline(measure.batch_sizes[0])  # once per device, as in a search: not a subnet's cost
    rows = []
    for trial in spread_trials(study, args.subnets):
        candidate = elastic.space.candidate(trial.params, num_classes=data.num_classes, channels=data.channels)
        extracting, model = _seconds(lambda c=candidate: extract(supernet, c))
        recalibrating, _ = _seconds(lambda m=model: recalibrate(m, batches))
        eager, traced = [], []
        for order in range(2):  # alternating, so drift hits both alike
            for kind in ("eager", "traced") if order == 0 else ("traced", "eager"):
                if kind == "eager":
                    took, accuracy = _seconds(lambda m=model: eager_accuracy(m, data.x_val, data.y_val))
                    eager.append(took)
                else:
                    took, (_, accuracy) = _seconds(lambda m=model: evaluate(m, data))
                    traced.append(took)
                # The study's figure was scored eagerly; traced, a near-tie may flip one image.
                slack = 0.0 if kind == "eager" else 1.01 / len(data.y_val)
                assert abs(accuracy - trial.values[0]) <= slack + 5e-5, (trial.number, kind, accuracy)
        cost = profiler.measure(model, precision="float32", xla=False)
        primary = cost.throughput[measure.batch_sizes[0]]
        assert cost.latency is not None
        rows.append(
            {
                "trial": trial.number,
                "accuracy": round(trial.values[0], 4),
                "images_per_s": round(primary.images_per_s),
                "extract_s": round(extracting, 3),
                "recalibrate_s": round(recalibrating, 3),
                "score_eager_s": [round(t, 3) for t in eager],
                "score_traced_s": [round(t, 3) for t in traced],
                "throughput_s": round(primary.seconds, 3),
                "latency_s": round(cost.latency.seconds, 3),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
        keras.backend.clear_session(free_memory=True)
    ratios = [statistics.fmean(r["score_eager_s"]) / statistics.fmean(r["score_traced_s"]) for r in rows]
    document = {
        "command": "python -m benchmarks.subnet_cost",
        "commit": stamps.commit(),
        "date": stamps.today(),
        "machine": stamps.machine(),
        "subnets": rows,
        "eager_over_traced": [round(r, 2) for r in ratios],
    }
    OUT.write_text(json.dumps(document, indent=1) + "\n")
    print(f"eager over traced scoring: {', '.join(f'{r:.2f}x' for r in ratios)}")


if __name__ == "__main__":
    main()

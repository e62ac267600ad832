"""The supernet's training step on the Fashion-MNIST supernet space: the time of one sandwich
step (the largest, the smallest and two random subnets, batch 128 at 28x28, Adam), after its
graph is traced, and the tracing itself. The spatial shape is held at resolution 28 and the
given stem stride, so the random subnets vary channels, depth, kernels and SE only: one graph.
Run it at two commits to compare forward passes (RESULTS.md "Supernet step").

    python -m benchmarks.supernet_step --stride 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

from benchmarks import stamps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stride", type=int, choices=[1, 2], default=2, help="the stem's stride")
    parser.add_argument("--steps", type=int, default=12, help="steps timed after the first")
    args = parser.parse_args()
    from nas.search.runtime import import_tensorflow, set_debug

    set_debug(False)
    import_tensorflow()
    from benchmarks.fashion_supernet import space_document
    from nas.search.nets import NetworkPlan, plan_network
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space
    from nas.search.strategies.supernet.network import Supernet
    from nas.search.strategies.supernet.steps import SandwichStep, draw_sandwich
    from nas.search.training.train import make_optimizer

    elastic = elastic_space(space_from_dict(space_document()))
    supernet = Supernet(elastic.space.candidate(elastic.largest, num_classes=10, channels=1), seed=0)
    optimizer = make_optimizer("adam", 0.004, 1000)
    optimizer.build(supernet.trainable_variables)
    step = SandwichStep(supernet, (28, 28, 1), optimizer)

    def plan(params: dict[str, Any]) -> NetworkPlan:
        return plan_network(elastic.space.candidate(params, num_classes=10, channels=1))

    keep = {"resolution": 28, "stem_stride": args.stride}
    ends = (plan(elastic.largest | keep), plan(elastic.smallest | keep))
    rng = np.random.default_rng(0)
    x = np.random.default_rng(1).random((128, 28, 28, 1)).astype("float32")
    y = np.random.default_rng(2).integers(0, 10, 128).astype("int32")
    t0 = time.perf_counter()
    float(step(x, y, draw_sandwich(elastic, rng, keep, ends, plan))[0])
    first = time.perf_counter() - t0
    times = []
    for _ in range(args.steps):
        sandwich = draw_sandwich(elastic, rng, keep, ends, plan)
        t0 = time.perf_counter()
        float(step(x, y, sandwich)[0])
        times.append(time.perf_counter() - t0)
    print(
        json.dumps(
            {
                "command": f"python -m benchmarks.supernet_step --stride {args.stride}",
                "commit": stamps.commit(),
                "machine": stamps.machine(),
                "date": stamps.now(),
                "first_step_s": round(first, 1),
                "step_median_s": round(statistics.median(times), 3),
            }
        )
    )


if __name__ == "__main__":
    main()

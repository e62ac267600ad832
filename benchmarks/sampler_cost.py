"""The sampler's own cost as a supernet study grows to thousands of trials (issue 47: subnets
cost seconds, so a sampler whose ask grows with the study would come to dominate).

A SQLite study of the Fashion-MNIST supernet space (benchmarks/fashion_supernet.py's) is
filled with finished trials in bulk (random parameters, two objectives, as many user
attributes as a nas trial stores), and at each size the time of what the engine does per
trial around the evaluation is measured over `--repeats` trials: ask through nas' sampler
(multivariate TPE with constant liar, inside DistinctSampler, inside PartialFixedSampler for
the supernet's fixed knobs), sample the space, tell, then read the study's Pareto front and
its counts as the engine does after each trial (`front_s`). The ratio to the smallest size is
the figure.

    python -m benchmarks.sampler_cost --sizes 100,1000,3000 --out benchmarks/sampler_cost.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from benchmarks import stamps

ATTRS = 20  # user attributes of a finished nas trial, about


def _fill(study: optuna.Study, elastic: Any, count: int, rng: np.random.Generator) -> None:
    """`count` finished trials with the sampler's distributions, added in one go."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    distributions: dict[str, Any] = {}
    for name, p in elastic.space.parameters().items():
        if p.fixed:
            continue
        if p.choices:
            distributions[name] = CategoricalDistribution(list(p.choices))
        elif p.kind == "int":
            distributions[name] = IntDistribution(int(p.low), int(p.high))
        else:
            distributions[name] = FloatDistribution(p.low, p.high, log=p.log)
    trials = []
    for _ in range(count):
        params = elastic.random_params(rng) | elastic.fixed
        params = {k: v for k, v in params.items() if k in distributions}
        trials.append(
            optuna.trial.create_trial(
                params=params,
                distributions={k: distributions[k] for k in params},
                values=[float(rng.uniform(0.7, 0.93)), float(rng.uniform(3e3, 3e4))],
                user_attrs={f"attr{i}": float(rng.random()) for i in range(ATTRS)},
            )
        )
    study.add_trials(trials)


def measure(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    from benchmarks.fashion_supernet import space_document
    from nas.search.engine.optuna_private import front_trials
    from nas.search.engine.samplers import make_sampler
    from nas.search.engine.study import counts
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space
    from nas.search.strategies.supernet.evaluation import fixed_sampler

    elastic = elastic_space(space_from_dict(space_document()))
    rng = np.random.default_rng(0)
    out = []
    with tempfile.TemporaryDirectory() as folder:
        storage = f"sqlite:///{Path(folder) / 'cost.db'}"
        sampler = fixed_sampler(make_sampler("tpe", 0), elastic)
        study = optuna.create_study(storage=storage, directions=["maximize", "maximize"], sampler=sampler)
        have = 0
        for size in sizes:
            _fill(study, elastic, size - have, rng)
            have = size
            ask, front = [], []
            for _ in range(repeats):
                t0 = time.perf_counter()
                trial = study.ask()
                elastic.space.sample(trial, num_classes=10, channels=1)
                study.tell(trial, [float(rng.uniform(0.7, 0.93)), float(rng.uniform(3e3, 3e4))])
                t1 = time.perf_counter()
                front_trials(study)  # the front, as the engine reads it after each trial
                counts(study)  # the budget's count, before and after each trial
                front.append(time.perf_counter() - t1)
                ask.append(t1 - t0)
            have += repeats
            row = {
                "trials": size,
                "ask_tell_s": round(statistics.median(ask), 4),
                "front_s": round(statistics.median(front), 4),
            }
            out.append(row)
            print(json.dumps(row), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,1000,3000", help="study sizes to measure at")
    parser.add_argument("--repeats", type=int, default=10, help="trials timed at each size")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rows = measure([int(s) for s in args.sizes.split(",")], args.repeats)
    first = rows[0]["ask_tell_s"] + rows[0]["front_s"]
    for row in rows:
        row["ratio_to_first"] = round((row["ask_tell_s"] + row["front_s"]) / first, 2)
    result = {
        "command": "python -m benchmarks.sampler_cost --sizes " + args.sizes + f" --repeats {args.repeats}",
        "commit": stamps.commit(),
        "date": stamps.now(),
        "machine": stamps.machine(),
        "rows": rows,
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

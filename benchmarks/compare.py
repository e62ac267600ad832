"""Time to a good Pareto front: nas against KerasTuner, same space, same budget, same machine.

    python -m benchmarks.compare [--budget 60] [--seeds 3] [--out compare.json] [--plot hv.png]
    python -m benchmarks.compare --quick          # about 2 minutes: 1 seed, 15 s per contender

Contenders, run one after another, each in a fresh process, for the same wall-clock budget
per seed ("start no trial after B seconds"), on the same data and space:
  - nas, default sampler (TPE, multivariate, constant liar) and screening;
  - nas, random sampler;
  - KerasTuner BayesianOptimization and RandomSearch with a MultiObjective (KerasTuner sums
    the objectives): validation accuracy + log10(throughput) / 10, both maximised.
The KerasTuner HyperModel builds the same networks from the same parameters (nas' own
builder), trains them with the same loop and epochs, and measures throughput with the same
routine (without nas' measurement cache), so the two objectives mean the same everywhere.

Metrics: hypervolume of the (accuracy, log10 throughput) front against the fixed reference
point (0, log10 1000 images/s), over wall-clock time and over trials; per-trial overhead
(share of a trial's wall time, from the previous trial's end, spent outside measuring and
training); medians over seeds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks import scoring, stamps
from benchmarks.launch import ROOT, run_module


@dataclass(frozen=True)
class Point:
    end_s: float  # since the contender started
    accuracy: float
    throughput: float
    inside_s: float  # measuring + training
    build_s: float  # building the Keras model (outside, but the same work for every tool)


def hv_curve(points: list[Point]) -> list[tuple[float, float]]:
    """(time, hypervolume so far) after each trial."""
    done: list[tuple[float, float]] = []
    curve = []
    for p in sorted(points, key=lambda p: p.end_s):
        done.append((p.accuracy, p.throughput))
        curve.append((p.end_s, scoring.front_hypervolume(done)))
    return curve


def overhead(points: list[Point], *, count_build: bool = True) -> float:
    """Median share of a trial's wall time (from the previous trial's end) outside measuring
    and training (and, with count_build=False, outside building the model too). The first
    trial is left out: it also carries start-up."""
    inside = [(p.end_s, p.inside_s + (0.0 if count_build else p.build_s)) for p in points]
    return scoring.overhead_share(scoring.idle_gaps(inside))


def make_space(folder: Path, epochs: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    space = yaml.safe_load((ROOT / "spaces" / "tiny.yaml").read_text())
    space["name"] = "compare"
    space["dataset"].pop("subset")  # all 1,797 digits
    space["training"]["epochs"] = epochs
    space["model"]["width_multiplier"] = {"choice": [0.25, 0.5, 0.75, 1.0]}
    space["model"]["stages"][1]["kernel"] = {"choice": [3, 5]}
    space["model"]["stages"][1]["expansion"] = {"choice": [2, 4, 6]}
    path = folder / "compare.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


def run_nas(space: Any, data: Any, sampler: str, seed: int, budget: float, folder: Path) -> list[Point]:
    from nas.search.engine import SearchEvents, SearchOptions, run_search
    from nas.search.strategies import strategy_for
    from nas.storage import resolve_storage_url

    storage = resolve_storage_url(f"sqlite:///{folder / f'nas-{sampler}-{seed}.db'}")
    options = SearchOptions(
        storage=storage, study_name="compare", trials=100_000, sampler=sampler, seed=seed, timeout=budget
    )
    started = time.time()
    outcome = run_search(space, options, SearchEvents(), data=data, strategy=strategy_for(space))
    points = []
    for t in outcome.study.trials:
        if t.state.name != "COMPLETE" or t.datetime_complete is None:
            continue
        d = t.user_attrs["durations"]
        points.append(
            Point(
                t.datetime_complete.timestamp() - started,
                t.values[0],
                t.values[1],
                d.get("measure", 0) + d["train"],
                d["build"],
            )
        )
    return points


def run_kerastuner(space: Any, data: Any, kind: str, seed: int, budget: float, folder: Path) -> list[Point]:
    import keras
    import keras_tuner as kt

    from nas.search.hardware import HardwareProfiler
    from nas.search.nets import build_model
    from nas.search.training import train_and_evaluate

    class BudgetReached(kt.errors.FatalError):  # type: ignore[misc]
        """Raised from fit() to end the search: KerasTuner stops on fatal errors only."""

    points: list[Point] = []
    started = time.time()
    deadline = time.monotonic() + budget

    class SameNetworks(kt.HyperModel):  # type: ignore[misc]
        def build(self, hp: Any) -> keras.Model:
            values = {}
            for name, p in space.searchable().items():
                if p.choices:
                    values[name] = hp.Choice(name, list(p.choices))
                elif p.kind == "int":
                    values[name] = hp.Int(name, int(p.low), int(p.high), step=int(p.step or 1))
                else:
                    sampling = "log" if p.log else "linear"
                    values[name] = hp.Float(name, p.low, p.high, step=p.step, sampling=sampling)
            self.candidate = space.candidate(values, num_classes=data.num_classes, channels=data.channels)
            t0 = time.perf_counter()
            model = build_model(self.candidate, seed=seed)
            self.build_s = time.perf_counter() - t0
            return model

        def fit(self, hp: Any, model: keras.Model, *args: Any, **kwargs: Any) -> dict[str, float]:
            if time.monotonic() >= deadline:
                raise BudgetReached("time budget reached")
            t0 = time.perf_counter()
            cost = HardwareProfiler(space.spec.measure, cache=None).measure(model, precision="float32", xla=False)
            result = train_and_evaluate(model, self.candidate, data, seed=seed)
            inside = time.perf_counter() - t0
            tput = cost.primary.images_per_s
            points.append(Point(time.time() - started, result.accuracy, tput, inside, self.build_s))
            score = scoring.throughput_score(tput)
            # KerasTuner checks that the dict holds its MultiObjective's own name, then sums the
            # named objectives (negated, as it minimises); give it that sum under that name.
            combined = -(result.accuracy + score)
            return {"val_accuracy": result.accuracy, "throughput_score": score, "multi_objective": combined}

    objective = [kt.Objective("val_accuracy", "max"), kt.Objective("throughput_score", "max")]
    common = {"objective": objective, "max_trials": 100_000, "seed": seed, "overwrite": True, "directory": str(folder)}
    if kind == "bayesian":
        tuner = kt.BayesianOptimization(SameNetworks(), project_name=f"kt-bo-{seed}", **common)
    else:
        tuner = kt.RandomSearch(SameNetworks(), project_name=f"kt-rs-{seed}", **common)
    with contextlib.suppress(BudgetReached):
        tuner.search(verbose=0)
    return points


def run_isolated(name: str, seed: int, budget: float, epochs: int, folder: Path) -> list[Point]:
    """One contender and seed in a fresh process: in one long-lived process every tool slows
    down as TensorFlow state piles up (per-trial overhead tripled by the third seed in a
    first version of this script), which would penalise whoever runs later."""
    out = folder / f"points-{seed}-{list(CONTENDERS).index(name)}.json"
    command = ["--run-one", name, "--seed", str(seed), "--budget", str(budget)]
    command += ["--epochs", str(epochs), "--out", str(out)]
    run_module("compare", command, folder)
    return [Point(**p) for p in json.loads(out.read_text())]


def run_one(name: str, seed: int, budget: float, epochs: int, out: Path) -> None:
    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    from nas.search.data import load_dataset
    from nas.search.space import load_space

    folder = out.parent
    space = load_space(str(make_space(folder / f"space-{seed}", epochs)))
    data = load_dataset(space.spec.dataset)
    points = CONTENDERS[name](space, data, seed, budget, folder)
    out.write_text(json.dumps([asdict(p) for p in points]))


CONTENDERS = {
    "nas (tpe)": lambda s, d, seed, b, f: run_nas(s, d, "tpe", seed, b, f),
    "nas (random)": lambda s, d, seed, b, f: run_nas(s, d, "random", seed, b, f),
    "KerasTuner BayesianOptimization": lambda s, d, seed, b, f: run_kerastuner(s, d, "bayesian", seed, b, f),
    "KerasTuner RandomSearch": lambda s, d, seed, b, f: run_kerastuner(s, d, "random", seed, b, f),
}


def time_to_reach(curve: list[tuple[float, float]], target: float) -> float | None:
    return next((t for t, hv in curve if hv >= target - 1e-12), None)


def summarise(runs: dict[str, list[list[Point]]], budget: float) -> dict[str, Any]:
    kt_final = statistics.median((hv_curve(p)[-1][1] if p else 0.0) for p in runs["KerasTuner BayesianOptimization"])
    rows = {}
    for name, seeds in runs.items():
        curves = [hv_curve(points) for points in seeds]
        reach = [time_to_reach(c, kt_final) for c in curves]
        rows[name] = {
            "final_hv": statistics.median(c[-1][1] if c else 0.0 for c in curves),
            "trials": statistics.median(len(p) for p in seeds),
            "overhead": statistics.median(overhead(p) for p in seeds),
            "overhead_besides_build": statistics.median(overhead(p, count_build=False) for p in seeds),
            # A seed that never reaches the target counts as the whole budget (and is marked).
            "time_to_kt_bo_final_s": statistics.median(r if r is not None else budget for r in reach),
            "seeds_reaching_it": sum(r is not None for r in reach),
            "curves": curves,
            "points": [[asdict(p) for p in points] for points in seeds],
        }
    return {"kt_bo_final_hv": kt_final, "rows": rows}


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_time, by_trial) = plt.subplots(1, 2, figsize=(11, 4))
    for name, row in summary["rows"].items():
        for i, curve in enumerate(row["curves"]):
            if not curve:
                continue
            times, hvs = zip(*curve, strict=True)
            label = name if i == 0 else None
            color = f"C{list(summary['rows']).index(name)}"
            by_time.step(times, hvs, where="post", color=color, alpha=0.8, label=label)
            by_trial.step(range(1, len(hvs) + 1), hvs, where="post", color=color, alpha=0.8, label=label)
    by_time.axhline(summary["kt_bo_final_hv"], color="grey", linestyle=":", label="KerasTuner BO final (median)")
    by_time.set(xlabel="wall-clock time (s)", ylabel="hypervolume (accuracy x log10 img/s)")
    by_trial.set(xlabel="trials", ylabel="hypervolume")
    by_time.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    # Every search here starts cold, as a new user's does: a device profile would skip measuring the device.
    os.environ.pop("NAS_DEVICE_PROFILE", None)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=None, help="seconds per contender and seed (default 60)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 seed, 15 s per contender (unless --budget)")
    parser.add_argument(
        "--contenders",
        default=None,
        help="comma-separated subset (KerasTuner BayesianOptimization always runs: it sets the target)",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--run-one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_one is not None:
        run_one(args.run_one, args.seed, args.budget, args.epochs, args.out)
        return
    if args.quick:
        args.seeds = 1
    if args.budget is None:
        args.budget = 15.0 if args.quick else 60.0
    chosen = list(CONTENDERS)
    if args.contenders:
        wanted = {name.strip() for name in args.contenders.split(",")} | {"KerasTuner BayesianOptimization"}
        if unknown := wanted - set(CONTENDERS):
            print(f"error: unknown contenders {sorted(unknown)}; choose from {list(CONTENDERS)}", file=sys.stderr)
            sys.exit(2)
        chosen = [name for name in CONTENDERS if name in wanted]

    started = time.perf_counter()
    runs: dict[str, list[list[Point]]] = {name: [] for name in chosen}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            for name in chosen:
                points = run_isolated(name, seed, args.budget, args.epochs, Path(tmp))
                runs[name].append(points)
                print(f"seed {seed} {name}: {len(points)} trials", flush=True)
    summary = summarise(runs, args.budget)
    report = {
        "command": "python -m benchmarks.compare"
        + (" --quick" if args.quick else "")
        + (f" --budget {args.budget:g}" if not args.quick or args.budget != 15.0 else "")
        + (f" --seeds {args.seeds}" if not args.quick and args.seeds != 3 else "")
        + (f" --epochs {args.epochs}" if args.epochs != 3 else "")
        + (f" --contenders '{args.contenders}'" if args.contenders else ""),
        "commit": stamps.commit(),
        "date": stamps.today(),
        "machine": stamps.machine(),
        "budget_s": args.budget,
        "seeds": args.seeds,
        "epochs": args.epochs,
        "reference_point": list(scoring.REFERENCE),
        "total_s": round(time.perf_counter() - started, 1),
        **summary,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    if args.plot:
        plot(summary, args.plot)
    print()
    print(f"budget {args.budget:.0f} s per contender and seed, {args.seeds} seeds (medians), {report['total_s']} s")
    print(
        "| contender | trials | final hypervolume | time to KerasTuner BO's final HV "
        "| overhead per trial | ... not counting model building |"
    )
    print("|---|---|---|---|---|---|")
    for name, row in summary["rows"].items():
        reach = f"{row['time_to_kt_bo_final_s']:.0f} s ({row['seeds_reaching_it']}/{args.seeds} seeds)"
        print(
            f"| {name} | {row['trials']:.0f} | {row['final_hv']:.4f} | {reach} | {row['overhead']:.1%} "
            f"| {row['overhead_besides_build']:.1%} |"
        )


if __name__ == "__main__":
    main()

"""Replay search methods against the tabulated benchmark (benchmarks/table.py) in simulated
time: nothing is trained or timed, every figure comes from the table, and the clock advances
by what the table says each step cost, so one method on one seed takes a fraction of a second
and differences between methods can be measured over many seeds.

    python -m benchmarks.replay [--table FILE] [--seeds 30] [--workers 1,4] [--budget 600]
                                [--contenders a,b,...] [--out FILE]

nas contenders run nas' own engine: each simulated worker is the engine's worker loop
(engine/loop.py's run_worker: the study's lock, heartbeats, TrialRunner's sampling, screening
and early stopping's rungs in the study, nas' sampler set-up with TPE, constant liar and seeds
per worker), handed the table's evaluation in place of the strategy's; only building,
measuring and training go through that seam. Plain Optuna and random search are scripted as an Optuna user
would (every trial trains all epochs and times its own network: no cache). Asynchronous
workers are threads under one simulated clock: only the worker whose clock is earliest runs,
so a trial asked while others run sees them RUNNING, a rung reads only what was there at its
moment, and a seed replays exactly.

Every trial costs its tool's per-trial overhead as the newest race that ran the tool measured
it (benchmarks/race*.json: asking, storing, process and framework costs outside measuring and
training).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import multiprocessing
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from benchmarks import gp_fast, scoring, stamps
from benchmarks import table as tables
from benchmarks.overheads import overhead_sources, overheads
from benchmarks.scoring import bootstrap_interval
from benchmarks.simclock import ClockedEvaluation, SimClock, run_workers
from nas.search.engine import JoinedStudy, SearchEvents, SearchOptions, TrialReport, prepare_study, run_worker
from nas.search.space import SearchSpace, space_from_dict
from nas.storage import resolve_storage_url


@dataclass(frozen=True)
class Point:
    end_s: float
    accuracy: float
    throughput: float


@dataclass(frozen=True)
class Contender:
    name: str
    kind: str  # "nas", "keras_tuner", "optuna", "random"
    sampler: str = "tpe"
    early_stopping: dict[str, Any] | None = None  # nas' search.early_stopping section
    overhead_tool: str | None = None  # whose measured per-trial overhead it pays (default: its name)


CONTENDERS = [
    Contender("nas tpe", "nas", "tpe", overhead_tool="nas"),
    Contender("nas nsga2", "nas", "nsga2", overhead_tool="nas"),
    Contender("nas random", "nas", "random", overhead_tool="nas"),
    Contender("nas tpe asha eta 2", "nas", "tpe", {"method": "asha", "min_epochs": 1, "eta": 2}, "nas (asha)"),
    Contender("nas tpe asha eta 3", "nas", "tpe", {"method": "asha", "min_epochs": 1, "eta": 3}, "nas (asha)"),
    Contender("KerasTuner Hyperband", "keras_tuner", "hyperband"),
    Contender("KerasTuner BayesianOptimization", "keras_tuner", "bayesian"),
    Contender("Optuna TPE", "optuna", "tpe"),
    Contender("random search", "random", "random", overhead_tool="Optuna TPE"),
]


def _space(table: tables.Table, early_stopping: dict[str, Any] | None) -> SearchSpace:
    """The space the table was built from (its header keeps the document), with the
    contender's early stopping (the `search` section is outside the space's fingerprint)."""
    document = copy.deepcopy(table.header["document"])
    if early_stopping:
        document.setdefault("search", {})["early_stopping"] = early_stopping
    space = space_from_dict(document, "the table's space")
    assert space.matches(table.header["space"])
    return space


def replay_nas(
    c: Contender, table: tables.Table, seed: int, workers: int, budget: float, overhead: float
) -> list[Point]:
    """nas as its users run it: the engine's own worker loop (engine/loop.py: asking under the
    study's lock, heartbeats, telling, retention, its events), one per simulated worker, each
    handed the table's evaluation instead of the strategy's. The study lives in a SQLite file
    (in memory where /dev/shm exists), as a search's does; every trial first pays the race's
    per-trial overhead on the simulated clock."""
    space = _space(table, c.early_stopping)
    clock = SimClock(workers)
    evaluation = ClockedEvaluation(table, space, clock)  # shared: the measurement cache is the study's
    points: list[Point] = []

    class Collect(SearchEvents):
        def trial_finished(self, report: TrialReport, finished: int, pareto_size: int) -> None:
            if report.values and clock.now() <= budget:  # trained (not screened or stopped early)
                points.append(Point(clock.now(), *report.values))

    def keep_going() -> bool:
        if clock.now() >= budget:
            return False
        clock.advance(overhead)  # the tool's own cost of a trial, before it asks for one
        return True

    fast = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="nas-replay-", dir=fast) as folder:
        url = resolve_storage_url(f"sqlite:///{folder}/replay.db")
        options = SearchOptions(
            storage=url, study_name="replay", trials=10**9, sampler=c.sampler, seed=seed, keep_weights=False
        )
        storage, study = prepare_study(space, options, SearchEvents())

        def work(index: int) -> None:
            clock.enter(index)
            try:
                # A study object of its own: each worker sets its own sampler on it.
                joined = JoinedStudy(
                    optuna.load_study(study_name=study.study_name, storage=storage), storage, space, options
                )
                run_worker(joined, Collect(), lambda _: evaluation, worker_index=index, keep_going=keep_going)
            finally:
                clock.leave()

        run_workers(workers, work)
        storage.engine.dispose()
    return points


def replay_optuna(
    c: Contender, table: tables.Table, seed: int, workers: int, budget: float, overhead: float
) -> list[Point]:
    """An Optuna user's script: the space's choices suggested directly, each trial trained in
    full and its network timed by the user's own code every time (no cache)."""
    space = _space(table, None)
    rows = table.by_key()
    choices = {name: list(p.values()) for name, p in space.searchable().items()}
    clock = SimClock(workers)
    storage = optuna.storages.InMemoryStorage()
    name = optuna.create_study(storage=storage, directions=["maximize", "maximize"]).study_name
    points: list[Point] = []

    def work(index: int) -> None:
        clock.enter(index)
        try:
            study = optuna.load_study(study_name=name, storage=storage)
            worker_seed = seed * 1000 + index  # a user's n_jobs workers share one seeded sampler
            if c.kind == "random":
                study.sampler = optuna.samplers.RandomSampler(seed=worker_seed)
            else:
                study.sampler = optuna.samplers.TPESampler(seed=worker_seed, multivariate=True)  # as in the race
            while clock.now() < budget:
                clock.advance(overhead)
                trial = study.ask()
                params = {n: trial.suggest_categorical(n, v) for n, v in choices.items()}
                row = rows[tables.config_key(params)]
                durations = row["durations"]
                clock.advance(durations["build"] + row["network_measure_seconds"] + sum(row["epoch_seconds"]))
                values = [row["accuracy"], row["throughput"]["images_per_s"]]
                study.tell(trial, values)
                if clock.now() <= budget:
                    points.append(Point(clock.now(), *values))
        finally:
            clock.leave()

    run_workers(workers, work)
    return points


def replay_keras_tuner(
    c: Contender, table: tables.Table, seed: int, workers: int, budget: float, overhead: float
) -> list[Point]:
    """KerasTuner's oracle driven as its Tuner drives it (create_trial, update_trial with the
    trial's metrics, end_trial), one tuner id per worker sharing the oracle as a chief does.
    Its objective is the race's single score (accuracy + SCORE_WEIGHT * log10 images/s).
    Hyperband's trial trains epochs `tuner/initial_epoch` to `tuner/epochs` from the checkpoint
    of an earlier trial: the table's curve at `tuner/epochs` stands for it, and only the
    epochs trained are charged (tabulated benchmarks read lower fidelities off the full curve
    this way). Each trial is timed by the user's own code: no cache."""
    import keras_tuner as kt

    space = _space(table, None)
    rows = table.by_key()
    choices = {name: list(p.values()) for name, p in space.searchable().items()}
    hp = kt.HyperParameters()
    for name, values in choices.items():
        hp.Choice(name, values)
    objective = kt.Objective("score", "max")
    epochs = len(table.rows[0]["val_accuracy"])
    kt_seed = seed + 1  # KerasTuner takes a seed of 0 for none (`seed or random.randint(...)`)
    with tempfile.TemporaryDirectory(prefix="nas-replay-kt-") as folder, gp_fast.fast_predict():
        if c.sampler == "hyperband":
            oracle: Any = kt.oracles.HyperbandOracle(
                objective, max_epochs=epochs, factor=3, hyperband_iterations=1000, seed=kt_seed, hyperparameters=hp
            )
        else:
            oracle = kt.oracles.BayesianOptimizationOracle(
                objective, max_trials=100_000, seed=kt_seed, hyperparameters=hp
            )
        oracle._set_project_dir(folder, "kt")  # what a Tuner does on creation
        oracle.verbose = 0  # what Tuner.search(verbose=0) sets: no progress table per trial
        clock = SimClock(workers)
        points: list[Point] = []

        def work(index: int) -> None:
            clock.enter(index)
            try:
                while clock.now() < budget:
                    clock.advance(overhead)
                    trial = oracle.create_trial(f"worker{index}")
                    if trial.status == kt.engine.trial.TrialStatus.STOPPED:
                        return
                    if trial.status == kt.engine.trial.TrialStatus.IDLE:
                        # Hyperband waits for the rest of a round: its Tuner asks again at once;
                        # here the worker asks again a simulated second later.
                        clock.advance(IDLE_POLL_S)
                        continue
                    values = trial.hyperparameters.values
                    # KerasTuner hands choices back in one type per parameter (6 as 6.0, False
                    # as 0): the space's own value equal to it names the configuration.
                    params = {n: next(v for v in choices[n] if v == values[n]) for n in choices}
                    row = rows[tables.config_key(params)]
                    last = int(values.get("tuner/epochs", epochs))
                    first = int(values.get("tuner/initial_epoch", 0))
                    trained = sum(row["epoch_seconds"][first:last])
                    clock.advance(row["durations"]["build"] + row["network_measure_seconds"] + trained)
                    accuracy, throughput = row["val_accuracy"][last - 1], row["throughput"]["images_per_s"]
                    score = accuracy + scoring.SCORE_WEIGHT * math.log10(throughput)
                    oracle.update_trial(trial.trial_id, {"score": score, "val_accuracy": accuracy}, step=last)
                    trial.status = kt.engine.trial.TrialStatus.COMPLETED
                    oracle.end_trial(trial)
                    if clock.now() <= budget:
                        points.append(Point(clock.now(), accuracy, throughput))
            finally:
                clock.leave()

        run_workers(workers, work)
    return points


def replay(
    c: Contender, table: tables.Table, seed: int, workers: int, budget: float, cost: dict[str, float]
) -> list[Point]:
    overhead = cost[c.overhead_tool or c.name]
    if c.kind == "nas":
        return replay_nas(c, table, seed, workers, budget, overhead)
    if c.kind == "keras_tuner":
        return replay_keras_tuner(c, table, seed, workers, budget, overhead)
    return replay_optuna(c, table, seed, workers, budget, overhead)


def reference_point(table: tables.Table) -> tuple[float, float]:
    """(accuracy 0, log10 of 90% of the table's slowest throughput): every configuration adds
    volume on both axes, so neither axis is swamped by the other."""
    slowest = min(r["throughput"]["images_per_s"] for r in table.rows)
    return 0.0, math.log10(0.9 * slowest)


def hv_curve(points: list[Point], ref: tuple[float, float], grid: list[float]) -> list[float]:
    return [scoring.front_hypervolume([(p.accuracy, p.throughput) for p in points if p.end_s <= t], ref) for t in grid]


GRID_POINTS = 60
IDLE_POLL_S = 1.0
TARGET = "KerasTuner Hyperband"  # the time-to-target goal is set by its median final hypervolume


def _replay_job(job: tuple[Contender, Path, int, int, float]) -> tuple[list[float], int]:
    """One (contender, seed, workers) replay in a pool process: its hypervolume curve."""
    contender, path, seed, workers, budget = job
    table = _loaded(path)
    points = replay(contender, table, seed, workers, budget, overheads())
    grid = [budget * (i + 1) / GRID_POINTS for i in range(GRID_POINTS)]
    return hv_curve(points, reference_point(table), grid), len(points)


_TABLES: dict[Path, tables.Table] = {}


def _loaded(path: Path) -> tables.Table:
    if path not in _TABLES:
        _TABLES[path] = tables.Table.load(path)
    return _TABLES[path]


def time_to(curve: list[float], grid: list[float], target: float) -> float:
    """The first grid time at which `curve` reaches `target` (infinity: never)."""
    return next((t for t, hv in zip(grid, curve, strict=True) if hv >= target), math.inf)


def run(
    path: Path, contenders: list[Contender], seeds: int, workers: list[int], budget: float, jobs: int = 1
) -> dict[str, Any]:
    table = _loaded(path)
    grid = [budget * (i + 1) / GRID_POINTS for i in range(GRID_POINTS)]
    started = time.perf_counter()
    plan = [(c, path, seed, w, budget) for w in workers for c in contenders for seed in range(seeds)]
    if jobs > 1:
        # Spawned, not forked: the parent has TensorFlow's threads running.
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            done = pool.map(_replay_job, plan, chunksize=1)
    else:
        done = [_replay_job(job) for job in plan]
    outcome = {(job[0].name, job[2], job[3]): result for job, result in zip(plan, done, strict=True)}
    results: dict[str, Any] = {}
    default = contenders[0].name
    for w in workers:
        curves = {c.name: [outcome[c.name, seed, w][0] for seed in range(seeds)] for c in contenders}
        trials = {c.name: [outcome[c.name, seed, w][1] for seed in range(seeds)] for c in contenders}
        final = {name: [curve[-1] for curve in runs] for name, runs in curves.items()}
        target = statistics.median(final[TARGET]) if TARGET in final else None
        rows = {}
        for name, values in final.items():
            q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
            row: dict[str, Any] = {
                "final_hv_median": round(statistics.median(values), 5),
                "final_hv_iqr": [round(q[0], 5), round(q[2], 5)],
                "trials_median": statistics.median(trials[name]),
                "median_curve": [round(statistics.median(run[i] for run in curves[name]), 5) for i in range(len(grid))],
                "quartile_curves": [
                    [round(statistics.quantiles([run[i] for run in curves[name]], n=4)[k], 5) for i in range(len(grid))]
                    for k in (0, 2)
                ]
                if seeds > 1
                else None,
            }
            if target is not None:
                # On the median curve: per seed, half of Hyperband's own runs end below its median.
                row["time_to_target_median_s"] = time_to(row["median_curve"], grid, target)
            if name != default:
                diffs = [a - b for a, b in zip(final[default], values, strict=True)]
                low, high = bootstrap_interval(diffs)
                row["default_minus_this"] = {
                    "mean": round(statistics.fmean(diffs), 5),
                    "ci95": [round(low, 5), round(high, 5)],
                    "real": low > 0 or high < 0,
                }
            rows[name] = row
        results[str(w)] = {"target_hv": target, "rows": rows}
    return {
        "seeds": seeds,
        "budget_s": budget,
        "grid_s": grid,
        "reference_point": list(reference_point(table)),
        "overheads_s": overheads(),
        "overhead_sources": overhead_sources(),
        "default": default,
        "table": {k: table.header[k] for k in ("commit", "date", "machine", "rows")},
        "workers": results,
        "jobs": jobs,
        "seconds": round(time.perf_counter() - started, 1),
    }


def plot(report: dict[str, Any], path: Path) -> None:
    """Median hypervolume over simulated time with the inter-quartile band, one panel per
    worker count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = report["workers"]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
    for ax, (w, by_workers) in zip(axes[0], panels.items(), strict=True):
        for k, (name, row) in enumerate(by_workers["rows"].items()):
            ax.plot(report["grid_s"], row["median_curve"], color=f"C{k}", label=name)
            if row["quartile_curves"]:
                low, high = row["quartile_curves"]
                ax.fill_between(report["grid_s"], low, high, color=f"C{k}", alpha=0.15)
        if by_workers["target_hv"] is not None:
            ax.axhline(by_workers["target_hv"], color="grey", linestyle=":", label="Hyperband final (median)")
        ax.set(title=f"{w} worker(s), {report['seeds']} seeds", xlabel="simulated time (s)", ylabel="hypervolume")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", type=Path, default=tables.TABLE)
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--workers", default="1,4")
    parser.add_argument("--budget", type=float, default=600.0, help="simulated seconds per replay")
    parser.add_argument("--contenders", default=None, help="comma-separated names (default: all)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=1, help="replays in parallel processes")
    parser.add_argument("--plot", type=Path, default=None, help="hypervolume over time, as PNG")
    args = parser.parse_args()
    chosen = CONTENDERS
    if args.contenders:
        names = args.contenders.split(",")
        known = {c.name: c for c in CONTENDERS}
        if unknown := [n for n in names if n not in known]:
            parser.error(f"unknown contender(s) {unknown}; choose from {sorted(known)}")
        chosen = [known[n] for n in names]
    workers = [int(w) for w in args.workers.split(",")]
    report = {
        "command": "python -m benchmarks.replay"
        + f" --seeds {args.seeds} --workers {args.workers} --budget {args.budget:g} --jobs {args.jobs}"
        + (f" --table {args.table}" if args.table != tables.TABLE else "")
        + (f" --contenders '{args.contenders}'" if args.contenders else "")
        + (f" --out {args.out}" if args.out else "")
        + (f" --plot {args.plot}" if args.plot else ""),
        "commit": stamps.commit(),
        "date": stamps.today(),
        "machine": stamps.machine(),
    } | run(args.table, chosen, args.seeds, workers, args.budget, args.jobs)
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text)
    if args.plot:
        plot(report, args.plot)
    for w, by_workers in report["workers"].items():
        rows = by_workers["rows"]
        print(f"\n{w} worker(s), {report['seeds']} seeds, {report['budget_s']:g} simulated s")
        print("| contender | final HV median | IQR | trials | to Hyperband's median (s) | default - this (95% CI) |")
        print("|---|---|---|---|---|---|")
        for name, row in rows.items():
            diff = row.get("default_minus_this")
            shown = f"{diff['mean']:+.4f} [{diff['ci95'][0]:+.4f}, {diff['ci95'][1]:+.4f}]" if diff else "-"
            iqr = row["final_hv_iqr"]
            median, trials = row["final_hv_median"], row["trials_median"]
            reach = row.get("time_to_target_median_s")
            reached = "-" if reach is None else "never" if math.isinf(reach) else f"{reach:.0f}"
            print(f"| {name} | {median:.4f} | {iqr[0]:.4f}-{iqr[1]:.4f} | {trials} | {reached} | {shown} |")
    print(f"\n{report['seconds']} s")


if __name__ == "__main__":
    main()

"""End-to-end race: nas against KerasTuner Hyperband and BayesianOptimization and plain Optuna,
each run the way its users run it, on the `mobilenet` preset's space on digits. From the
repository root:

    python -m benchmarks.race [--budget 900] [--seeds 3] [--out race.json] [--plot race.png]
    python -m benchmarks.race --quick     # 1 seed, 20 s per contender, 2 epochs: checks the script
    python -m benchmarks.race --seeds 1 --runs benchmarks/race-runs   # seed 0 now ...
    python -m benchmarks.race --seeds 3 --runs benchmarks/race-runs   # ... seeds 1 and 2 later

With --runs, each contender's run of one seed is kept there as it ends (its trials, commit and
date) and a later call reuses the kept runs of the same budget and epochs, so a race of 3 x 5
runs of 15 minutes can be run a seed at a time; the fronts are always re-measured together.

Contenders (benchmarks/contenders/, one a module, each says how it runs its tool), one after
another, each in a fresh process with the same wall-clock budget (no trial but the first
starts after it; a running one finishes):
- nas, default settings, and nas with ASHA early stopping (`nas_trials`);
- nas (supernet), whose clock includes the supernet's training and the fine-tuning of its
  front (`nas_supernet`);
- KerasTuner `Hyperband` and `BayesianOptimization` (`kerastuner`), ranking by the one score
  KerasTuner has: val_accuracy + 0.1 * log10(images/s);
- Optuna: a hand-written objective to a multi-objective TPE study (`optuna_tpe`).
KerasTuner's and Optuna's trials build the same MobileNetV2 family in plain Keras, train it
with `model.fit` and time it with a short loop, as their users would (`keras_model`).

Every tool times throughput its own way, so afterwards one process rebuilds every
contender's final front (by its own figures) and measures all of them together with nas'
protocol (round-robin, interleaved with the reference network); the final hypervolume of
(accuracy, log10 images/s) above (0, log10 1000) uses those re-measured figures and the
accuracies the tools reported. Hypervolume over wall time gives each trial one figure on that
scale (`curve_figures`): its re-measured one if it is on the front, else its own figure times the
lowest re-measured/own ratio among the front members that dominate it, so it stays dominated and
each curve ends exactly at its final hypervolume.
Reported: final hypervolume, time to reach KerasTuner Hyperband's final hypervolume, trials
finished and stopped early, overhead per trial (seconds, and share of wall time, between trial ends spent
outside training and measuring); medians over seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import scoring, stamps
from benchmarks.contenders import RUNNERS
from benchmarks.contenders.keras_model import TIMING_BATCH, keras_mobilenet
from benchmarks.contenders.preset import QUICK_MEASURE, preset
from benchmarks.launch import run_module

CONTENDERS = tuple(RUNNERS)  # names, in the order their kept runs are numbered


def run_one(name: str, seed: int, budget: float, epochs: int | None, out: Path, quick: bool) -> None:
    from nas.search import runtime

    runtime.set_debug(False)
    folder = out.parent / f"{CONTENDERS.index(name)}-{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(RUNNERS[name](name, seed, budget, epochs, folder, quick)))


# --- afterwards: one protocol for every front -----------------------------------------------


def replaced(trials: list[dict[str, Any]]) -> set[int]:
    """Indexes of the entries another entry replaces (a supernet subnet's inherited figure, once
    it is fine-tuned: its stored weights are then the fine-tuned ones)."""
    return {t["replaces"] for t in trials if "replaces" in t}


def own_front(trials: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The non-dominated trials by the tool's own figures; every trained model counts (a
    Hyperband trial of a short bracket is a model a KerasTuner user can pick), but not one
    that a later entry replaces."""
    gone = replaced(trials)
    done = [t for k, t in enumerate(trials) if t["accuracy"] is not None and k not in gone]

    def dominated(a: dict[str, Any]) -> bool:
        return any(
            b["accuracy"] >= a["accuracy"]
            and b["throughput"] >= a["throughput"]
            and (b["accuracy"], b["throughput"]) != (a["accuracy"], a["throughput"])
            for b in done
        )

    return [t for t in done if not dominated(t)]


def remeasure(fronts_file: Path, out: Path, quick: bool) -> None:
    """Worker mode: every front member rebuilt and measured together, in this one process."""
    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    from nas.search.data import load_dataset
    from nas.search.hardware import HardwareProfiler
    from nas.search.hardware.reference import reference_forward
    from nas.search.hardware.timing import measure_together
    from nas.search.nets import build_model
    from nas.search.space import MeasureSpec, load_space, space_from_dict

    fronts = json.loads(fronts_file.read_text())
    mobilenet = load_space("mobilenet")
    data = load_dataset(mobilenet.spec.dataset)
    shape = data.x_train.shape[1:]
    models = []
    for entry in fronts:
        if entry["contender"].startswith("nas"):
            space = space_from_dict(preset(None, asha=False), "race")
            candidate = space.candidate(entry["params"], num_classes=data.num_classes, channels=data.channels)
            models.append((build_model(candidate, seed=0), False))
        else:
            models.append((keras_mobilenet(entry["params"], shape, data.num_classes), False))
    spec = MeasureSpec(batch_sizes=[TIMING_BATCH], **(QUICK_MEASURE if quick else {}))
    profiler = HardwareProfiler(spec, cache=None)
    figures = measure_together(
        models,
        TIMING_BATCH,
        rounds=3 * spec.rounds,
        round_seconds=spec.round_seconds,
        reference=reference_forward(TIMING_BATCH, spec.warmup_seconds),
        baseline=profiler.baseline(TIMING_BATCH),
        warmup_seconds=spec.warmup_seconds,
    )
    out.write_text(json.dumps([f.images_per_s for f in figures]))


def hypervolume(points: list[tuple[float, float]]) -> float:
    """Of (accuracy, images/s) points, above the race's reference (0, log10 1000)."""
    return scoring.front_hypervolume(points)


def _idle_gaps(trials: list[dict[str, Any]]) -> list[tuple[float, float]]:
    # Fine-tuning, after the last trial, is not a trial's overhead.
    return scoring.idle_gaps((t["end_s"], t["inside_s"]) for t in trials if "replaces" not in t)


def overhead(trials: list[dict[str, Any]]) -> float:
    """Median share of a trial's wall time spent outside training and measuring."""
    return scoring.overhead_share(_idle_gaps(trials))


def overhead_s(trials: list[dict[str, Any]]) -> float:
    """Median seconds per trial outside training and measuring."""
    return scoring.overhead_seconds(_idle_gaps(trials))


def curve_figures(trials: list[dict[str, Any]], front: list[dict[str, Any]], figures: list[float]) -> dict[int, float]:
    """Each trained trial's throughput on the re-measured scale, by its index in `trials`.

    Only the final front is re-measured (every trial would take far longer than the race).
    A front member gets its re-measured figure; any other trial its own figure times the lowest
    re-measured/own ratio among the front members that dominate it by own figures. That keeps
    it dominated by one of them (no higher accuracy, throughput no higher than that member's
    re-measured one), so the curve's last value is exactly the final hypervolume; a median
    ratio for everyone let a dominated trial rise above the front it lost to."""
    ratio = {id(t): f / t["throughput"] for t, f in zip(front, figures, strict=True)}
    on_scale: dict[int, float] = {}
    gone = replaced(trials)
    for k, t in enumerate(trials):
        if t["accuracy"] is None or k in gone:
            continue
        if id(t) in ratio:
            on_scale[k] = t["throughput"] * ratio[id(t)]
            continue
        dominating = [
            ratio[id(f)] for f in front if f["accuracy"] >= t["accuracy"] and f["throughput"] >= t["throughput"]
        ]
        on_scale[k] = t["throughput"] * min(dominating)
    for k, t in enumerate(trials):  # a replaced entry is the same network as its replacement: its figure
        if "replaces" in t:
            on_scale[t["replaces"]] = on_scale[k]
    return on_scale


def summarise(runs: dict[str, list[list[dict[str, Any]]]], remeasured: dict[tuple[str, int], list[float]],
              budget: float) -> dict[str, Any]:  # fmt: skip
    rows: dict[str, Any] = {}
    curves: dict[str, list[list[tuple[float, float]]]] = {}
    for name, seeds in runs.items():
        finals, scaled_curves = [], []
        for seed, trials in enumerate(seeds):
            front, figures = own_front(trials), remeasured[(name, seed)]
            finals.append(hypervolume([(t["accuracy"], f) for t, f in zip(front, figures, strict=True)]))
            on_scale = curve_figures(trials, front, figures)
            done: dict[int, tuple[float, float]] = {}
            curve = []
            for k in sorted(on_scale, key=lambda k: (trials[k]["end_s"], k)):
                done[k] = (trials[k]["accuracy"], on_scale[k])
                done.pop(trials[k].get("replaces", -1), None)
                curve.append((trials[k]["end_s"], hypervolume(list(done.values()))))
            scaled_curves.append(curve)
        curves[name] = scaled_curves
        rows[name] = {
            "final_hv": statistics.median(finals),
            "final_hv_by_seed": finals,
            "trials": statistics.median(len(t) - len(replaced(t)) for t in seeds),
            "finetuned": statistics.median(len(replaced(t)) for t in seeds),
            "stopped_early": statistics.median(sum(x["stopped"] for x in t) for t in seeds),
            "overhead": statistics.median(overhead(t) for t in seeds),
            "overhead_s": statistics.median(overhead_s(t) for t in seeds),
            "last_s": statistics.median(max((x["end_s"] for x in t), default=0.0) for t in seeds),
        }

    def reach(name: str, targets: list[float]) -> tuple[float, int]:
        """(median time for `name`'s curves to reach each seed's target, budget if never; seeds reaching it)"""
        times = [
            next((s for s, hv in curve if hv >= target - 1e-12), None)
            for curve, target in zip(curves[name], targets, strict=True)
        ]
        return statistics.median(t if t is not None else budget for t in times), sum(t is not None for t in times)

    target = rows["KerasTuner Hyperband"]["final_hv"]
    for name, row in rows.items():
        row["time_to_hyperband_final_s"], row["seeds_reaching_it"] = reach(name, [target] * len(curves[name]))
        if "nas" in rows:  # early stopping on vs off: each seed against nas' final of that seed
            row["time_to_nas_final_s"], row["seeds_reaching_nas_final"] = reach(name, rows["nas"]["final_hv_by_seed"])
    return {"hyperband_final_hv": target, "rows": rows, "curves": curves}


def plot(summary: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, (name, seeds) in enumerate(summary["curves"].items()):
        for i, curve in enumerate(seeds):
            if curve:
                times, hvs = zip(*curve, strict=True)
                ax.step(times, hvs, where="post", color=f"C{k}", alpha=0.8, label=name if i == 0 else None)
    ax.axhline(summary["hyperband_final_hv"], color="grey", linestyle=":", label="Hyperband final (median)")
    ax.set(xlabel="wall-clock time (s)", ylabel="hypervolume (accuracy x log10 img/s)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


class RunMismatch(Exception):
    """A kept run of another budget or epochs: mixing it in would compare unlike runs."""


def kept_run(path: Path, budget: float, epochs: int | None) -> dict[str, Any] | None:
    """The run kept at `path` if there is one, checked to be of this race's budget and epochs."""
    if not path.exists():
        return None
    kept = json.loads(path.read_text())
    if (kept["budget_s"], kept["epochs"]) != (budget, epochs):
        raise RunMismatch(
            f"{path} holds a run of budget {kept['budget_s']:g} s and epochs {kept['epochs']}, not "
            f"{budget:g} s and {epochs}: use another --runs folder"
        )
    return dict(kept)


def main() -> None:
    # Every search here starts cold, as a new user's does: a device profile would skip measuring the device.
    os.environ.pop("NAS_DEVICE_PROFILE", None)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=None, help="seconds per contender and seed (default 900)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=None, help="training epochs (default: the preset's)")
    parser.add_argument(
        "--quick", action="store_true", help="1 seed, 20 s per contender, 2 epochs (unless --budget, --epochs)"
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--runs", type=Path, default=None, help="keep each run here and reuse the kept ones")
    parser.add_argument(
        "--contenders",
        default=None,
        help="comma-separated subset of the contenders (KerasTuner Hyperband always runs: it sets the target)",
    )
    parser.add_argument(
        "--from-report", type=Path, default=None, help="summarise a written report again, without measuring"
    )
    parser.add_argument("--run-one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--remeasure", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_one is not None:
        run_one(args.run_one, args.seed, args.budget, args.epochs, args.result, args.quick)
        return
    if args.remeasure is not None:
        remeasure(args.remeasure, args.result, args.quick)
        return
    if args.from_report is not None:
        summarise_again(args.from_report, args.out, args.plot)
        return
    if args.quick:
        args.seeds = 1
        args.epochs = args.epochs or 2
    if args.budget is None:
        args.budget = 20.0 if args.quick else 900.0

    started = time.perf_counter()
    chosen = CONTENDERS
    if args.contenders:
        wanted = {name.strip() for name in args.contenders.split(",")} | {"KerasTuner Hyperband"}
        if unknown := wanted - set(CONTENDERS):
            print(f"error: unknown contenders {sorted(unknown)}; choose from {list(CONTENDERS)}", file=sys.stderr)
            sys.exit(2)
        chosen = tuple(name for name in CONTENDERS if name in wanted)
    runs: dict[str, list[list[dict[str, Any]]]] = {name: [] for name in chosen}
    provenance: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="nas-race-") as tmp:
        work = Path(tmp)
        store = args.runs or work
        store.mkdir(parents=True, exist_ok=True)
        for seed in range(args.seeds):
            for name in chosen:
                path = store / f"run-{CONTENDERS.index(name)}-{seed}.json"
                try:
                    kept = kept_run(path, args.budget, args.epochs)
                except RunMismatch as exc:
                    print(f"error: {exc}", file=sys.stderr)
                    sys.exit(2)
                if kept is None:
                    result = work / f"trials-{CONTENDERS.index(name)}-{seed}.json"
                    command = ["--run-one", name, "--seed", str(seed)]
                    command += ["--budget", str(args.budget), "--result", str(result)]
                    command += ["--epochs", str(args.epochs)] if args.epochs else []
                    command += ["--quick"] if args.quick else []
                    run_module("race", command, work)
                    kept = {"contender": name, "seed": seed, "budget_s": args.budget, "epochs": args.epochs}
                    kept |= {"commit": stamps.commit(), "date": stamps.today(), "machine": stamps.machine()}
                    kept["trials"] = json.loads(result.read_text())
                    path.write_text(json.dumps(kept))
                    how = "ran"
                else:
                    how = f"kept from {kept['date']} at {kept['commit']}"
                runs[name].append(kept.pop("trials"))
                provenance.append(kept)
                print(f"seed {seed} {name}: {len(runs[name][-1])} trials ({how})", flush=True)
        fronts = [
            {"contender": name, "seed": seed, "params": t["params"], "accuracy": t["accuracy"], "own": t["throughput"]}
            for name, seeds in runs.items()
            for seed, trials in enumerate(seeds)
            for t in own_front(trials)
        ]
        (work / "fronts.json").write_text(json.dumps(fronts))
        figures_file = work / "remeasured.json"
        command = ["--remeasure", str(work / "fronts.json"), "--result", str(figures_file)]
        command += ["--quick"] if args.quick else []
        run_module("race", command, work)
        figures = json.loads(figures_file.read_text())
    for entry, figure in zip(fronts, figures, strict=True):
        entry["remeasured"] = figure
    report = {
        "command": "python -m benchmarks.race"
        + (" --quick" if args.quick else f" --seeds {args.seeds}")
        + (f" --budget {args.budget:g}" if not args.quick or args.budget != 20.0 else "")
        + (f" --epochs {args.epochs}" if args.epochs and not (args.quick and args.epochs == 2) else "")
        + (f" --runs {args.runs}" if args.runs else "")
        + (f" --contenders '{args.contenders}'" if args.contenders else ""),
        "commit": stamps.commit(),
        # to the minute: the replay charges each tool the newest race's overhead, and two races
        # of one day must still be ordered (a date alone sorts before its own day's times)
        "date": stamps.now(),
        "machine": stamps.machine(),
        "budget_s": args.budget,
        "seeds": args.seeds,
        "epochs": args.epochs,
        "reference_point": list(scoring.REFERENCE),
        "total_s": round(time.perf_counter() - started, 1),
        "run_provenance": provenance,  # each run's commit and date (kept runs may be older)
        "fronts": fronts,
        "runs": runs,
    }
    finish(report, args.out, args.plot)


def summarise_again(path: Path, out: Path | None, plot_path: Path | None) -> None:
    """The summary, table and plot of a written report, from its runs and re-measured fronts
    (no measuring: for a summary that changed after the race ran)."""
    report = json.loads(path.read_text())
    report["summarised_again"] = {"commit": stamps.commit(), "date": stamps.today()}
    finish(report, out, plot_path)


def finish(report: dict[str, Any], out: Path | None, plot_path: Path | None) -> None:
    """Adds the summary to `report`, writes it and the plot, prints the table."""
    runs, seeds = report["runs"], report["seeds"]
    remeasured: dict[tuple[str, int], list[float]] = {(n, s): [] for n in runs for s in range(seeds)}
    for entry in report["fronts"]:
        remeasured[(entry["contender"], entry["seed"])].append(entry["remeasured"])
    summary = summarise(runs, remeasured, report["budget_s"])
    report |= {
        "hyperband_final_hv": summary["hyperband_final_hv"],
        "rows": summary["rows"],
        "curves": summary["curves"],  # (seconds, hypervolume) per contender and seed, as plotted
    }
    if out:
        out.write_text(json.dumps(report, indent=1))
    if plot_path:
        plot(summary, plot_path)
    print()
    print(f"{report['command']} at {report['commit']} on {report['date']}, {report['machine']}")
    if again := report.get("summarised_again"):
        print(f"summarised again at {again['commit']} on {again['date']}")
    print(f"budget {report['budget_s']:.0f} s per contender and seed, {seeds} seeds (medians), {report['total_s']} s")
    provenance = report["run_provenance"]
    made = sorted({(p["commit"], p["date"], p.get("machine", "machine not recorded")) for p in provenance})
    print("runs made at " + ", ".join(f"{c} ({d}, {m})" for c, d, m in made))
    print(
        "| contender | trials | stopped early | final hypervolume (re-measured) "
        "| time to Hyperband's final | time to nas' final (same seed) | overhead per trial | last result at |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, row in summary["rows"].items():
        reach = f"{row['time_to_hyperband_final_s']:.0f} s ({row['seeds_reaching_it']}/{seeds} seeds)"
        to_nas = (
            f"{row['time_to_nas_final_s']:.0f} s ({row['seeds_reaching_nas_final']}/{seeds} seeds)"
            if "time_to_nas_final_s" in row
            else "-"
        )
        print(
            f"| {name} | {row['trials']:.0f} | {row['stopped_early']:.0f} | {row['final_hv']:.4f} | {reach} "
            f"| {to_nas} | {row['overhead_s']:.2f} s ({row['overhead']:.1%}) | {row.get('last_s', math.nan):.0f} s |"
        )


if __name__ == "__main__":
    main()

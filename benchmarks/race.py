"""End-to-end race: nas against KerasTuner Hyperband and BayesianOptimization and plain Optuna,
each run the way its users run it, on the `mobilenet` preset's space on digits.

    python benchmarks/race.py [--budget 900] [--seeds 3] [--out race.json] [--plot race.png]
    python benchmarks/race.py --quick     # 1 seed, 20 s per contender, 2 epochs: checks the script
    python benchmarks/race.py --seeds 1 --runs benchmarks/race-runs   # seed 0 now ...
    python benchmarks/race.py --seeds 3 --runs benchmarks/race-runs   # ... seeds 1 and 2 later

With --runs, each contender's run of one seed is kept there as it ends (its trials, commit and
date) and a later call reuses the kept runs of the same budget and epochs, so a race of 3 x 5
runs of 15 minutes can be run a seed at a time; the fronts are always re-measured together.

Contenders, one after another, each in a fresh process with the same wall-clock budget (no
trial but the first starts after it; a running one finishes):
- nas, default settings: `nas search <preset> --timeout B --seed S` through the CLI; and nas
  with `search.early_stopping: {method: asha, min_epochs: 1, eta: 3}`.
- nas (supernet): the preset with `search.strategy: supernet` and that strategy's defaults. Its
  clock includes the supernet's training (`nas search --timeout 0` first), its trials get what
  is left less FINETUNE_RESERVE for fine-tuning the front, and each fine-tuned subnet replaces
  its inherited figure from the time the fine-tuning ended.
- KerasTuner `Hyperband` (max_epochs = the preset's epochs, factor 3, iterations until the
  budget ends) and
  `BayesianOptimization`, with a HyperModel written as a KerasTuner user writes it: the
  preset's MobileNetV2 family in Keras layers in `build(hp)`, `model.fit` with the callbacks
  KerasTuner passes (its best-epoch checkpoint kept), throughput from a short timing loop in
  `fit`, and the two objectives folded into the one score KerasTuner ranks by:
  val_accuracy + 0.1 * log10(images/s).
- Optuna: a hand-written objective (the same Keras builder, `model.fit`, the same timing loop)
  returning (accuracy, images/s) to a multi-objective TPE study; no pruning (Optuna's pruners
  refuse multi-objective studies).

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
import datetime as dt
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REFERENCE = (0.0, 3.0)  # accuracy 0, 1,000 images/s
SCORE_WEIGHT = 0.1  # KerasTuner's single score: accuracy + 0.1 * log10(images/s)
TIMING_BATCH = 64
CONTENDERS = (
    "nas",
    "nas (asha)",
    "KerasTuner Hyperband",
    "KerasTuner BayesianOptimization",
    "Optuna TPE",
    "nas (supernet)",
)
# The supernet contender's first command trains the supernet; its second gets what is left of
# the budget less this share, kept for fine-tuning the front after its last trial (up to 16
# subnets, 3 epochs each: 4-11 s apiece here), so that the whole run fits in the budget; the
# report's last column shows when each contender's last result came.
FINETUNE_RESERVE = 0.25


# --- the space, as the preset and as a KerasTuner / Optuna user writes it ---------------------


# --quick checks the script: the device's baseline and peak, rounds, warm-ups and latency
# measured briefly, and no confirmation after the budget (the race re-measures every front itself).
QUICK_MEASURE = {
    "rounds": 5,
    "round_seconds": 0.05,
    "warmup_seconds": 2,
    "latency_seconds": 0.2,
    "baseline_rounds": 5,
    "peak_seconds": 0.2,
}


def preset(epochs: int | None, asha: bool, quick: bool = False, supernet: bool = False) -> dict[str, Any]:
    space = yaml.safe_load((HERE.parent / "spaces" / "mobilenet.yaml").read_text())
    space["name"] = "race"
    space["search"]["trials"] = 100_000  # the budget is time
    if quick:
        space["measure"] |= QUICK_MEASURE | {"confirm": False}
    if epochs:
        space["training"]["epochs"] = epochs
    if asha:
        space["search"]["early_stopping"] = {"method": "asha", "min_epochs": 1, "eta": 3}
    if supernet:  # the strategy's own defaults (12 supernet epochs, 3 of fine-tuning) but in --quick
        space["search"]["strategy"] = "supernet"
        if quick:
            space["search"]["supernet"] = {"epochs": 1, "finetune": {"epochs": 1}}
    return space


def suggest(ask: Any) -> dict[str, Any]:
    """The preset's parameters through `ask(kind, name, *domain)`: KerasTuner's hp or Optuna's trial."""
    values = {"width_multiplier": ask("choice", "width_multiplier", [0.5, 0.75, 1.0])}
    values["dropout"] = ask("float", "dropout", 0.0, 0.3, False)
    for stage, depth in ((1, 2), (2, 3), (3, 2)):
        values[f"stage{stage}.depth"] = ask("int", f"stage{stage}.depth", 1, depth)
        values[f"stage{stage}.kernel"] = ask("choice", f"stage{stage}.kernel", [3, 5])
        values[f"stage{stage}.expansion"] = ask("choice", f"stage{stage}.expansion", [3, 6])
        values[f"stage{stage}.se"] = ask("choice", f"stage{stage}.se", [False, True])
    values["batch_size"] = ask("choice", "batch_size", [32, 64])
    values["learning_rate"] = ask("float", "learning_rate", 0.001, 0.02, True)
    return values


def keras_mobilenet(values: dict[str, Any], shape: tuple[int, ...], classes: int) -> Any:
    """MobileNetV2 blocks in plain Keras, as a user writes them for KerasTuner or Optuna."""
    import keras
    from keras import layers

    from nas.search.nets.build import BN_MOMENTUM

    def bn(x: Any) -> Any:
        # The momentum nas' builder uses: Keras' default 0.99 leaves the moving statistics
        # unsettled after a trial's few hundred steps, and inference-mode accuracy stays at
        # chance (0.10) for a model that scores 0.96 with batch statistics (seen on digits).
        return layers.BatchNormalization(momentum=BN_MOMENTUM)(x)

    def channels(filters: int) -> int:
        return max(8, int(filters * values["width_multiplier"] + 4) // 8 * 8)

    def block(x: Any, filters: int, stride: int, kernel: int, expansion: int, se: bool) -> Any:
        inputs, width = x, x.shape[-1] * expansion
        if expansion != 1:
            x = layers.ReLU(6.0)(bn(layers.Conv2D(width, 1, use_bias=False)(x)))
        x = layers.DepthwiseConv2D(kernel, stride, padding="same", use_bias=False)(x)
        x = layers.ReLU(6.0)(bn(x))
        if se:
            s = layers.GlobalAveragePooling2D(keepdims=True)(x)
            s = layers.Conv2D(max(1, width // 4), 1, activation="relu")(s)
            x = layers.Multiply()([x, layers.Conv2D(width, 1, activation="sigmoid")(s)])
        x = bn(layers.Conv2D(filters, 1, use_bias=False)(x))
        return layers.Add()([inputs, x]) if stride == 1 and inputs.shape[-1] == filters else x

    inputs = keras.Input(shape)
    x = layers.Rescaling(1.0 / 255)(inputs)  # the images come as uint8, as nas' pipeline gets them
    x = layers.ReLU(6.0)(bn(layers.Conv2D(channels(16), 3, padding="same")(x)))
    x = block(x, channels(16), 1, 3, 1, False)
    for stage, (filters, stride) in enumerate(((24, 2), (32, 2), (64, 2)), start=1):
        for i in range(values[f"stage{stage}.depth"]):
            v = values
            x = block(
                x,
                channels(filters),
                stride if i == 0 else 1,
                v[f"stage{stage}.kernel"],
                v[f"stage{stage}.expansion"],
                v[f"stage{stage}.se"],
            )
    x = layers.ReLU(6.0)(bn(layers.Conv2D(128, 1, use_bias=False)(x)))
    x = layers.Dropout(values["dropout"])(layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, layers.Dense(classes, activation="softmax")(x))
    model.compile(
        optimizer=keras.optimizers.Adam(values["learning_rate"]),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


def timing_loop(model: Any, images: Any) -> float:
    """Images/s the way a user times it: a few warm-up calls, then 20 calls on one batch."""
    batch = images[:TIMING_BATCH]
    for _ in range(3):
        model(batch, training=False)
    started = time.perf_counter()
    for _ in range(20):
        model(batch, training=False).numpy()
    return 20 * len(batch) / (time.perf_counter() - started)


# --- one contender in its own process --------------------------------------------------------


def run_nas(name: str, seed: int, budget: float, epochs: int | None, folder: Path, quick: bool) -> list[dict[str, Any]]:
    import optuna

    supernet = name == "nas (supernet)"
    space = folder / "race.yaml"
    space.write_text(yaml.safe_dump(preset(epochs, asha=name == "nas (asha)", quick=quick, supernet=supernet)))
    storage = f"sqlite:///{folder / 'nas.db'}"
    started = time.time()
    command = [sys.executable, "-m", "nas", "search", str(space), "--seed", str(seed), "--storage", storage]
    if supernet:
        # nas' --timeout counts from its search loop, which a supernet study enters after the
        # supernet's training: train first (start no trial), then search the rest of the budget.
        subprocess.run([*command, "--timeout", "0"], cwd=folder, check=True, capture_output=True, text=True)
        budget = max(0.0, budget * (1 - FINETUNE_RESERVE) - (time.time() - started))
    subprocess.run([*command, "--timeout", str(budget)], cwd=folder, check=True, capture_output=True, text=True)
    study = optuna.load_study(study_name="race", storage=storage)
    trials, where = [], {}
    for t in study.trials:
        if t.state.name not in ("COMPLETE", "PRUNED") or t.datetime_complete is None:
            continue
        durations = t.user_attrs.get("durations", {})
        where[t.number] = len(trials)
        trials.append(
            {
                "end_s": t.datetime_complete.timestamp() - started,
                "accuracy": t.values[0] if t.values else None,
                "throughput": t.values[1] if t.values else None,
                "inside_s": durations.get("measure", 0.0) + durations.get("train", 0.0),
                "stopped": bool(t.user_attrs.get("early_stopped") or t.user_attrs.get("screened")),
                "params": t.params,
            }
        )
    if supernet:
        trials += finetuned_entries(study, trials, where, started)
    return trials


def finetuned_entries(
    study: Any, trials: list[dict[str, Any]], where: dict[int, int], started: float
) -> list[dict[str, Any]]:
    """A supernet study's fine-tuned front subnets, each as an entry that `replaces` its trial's
    inherited one from the time the fine-tuning ended (the study records when its last subnet
    finished; every one counts from then, which is late for the first ones, never early)."""
    from nas.search.records import StudyAttr

    record = study.user_attrs.get(StudyAttr.FINETUNED)
    if not record:
        return []
    # The record's time is to the second, cut down: one second more is never early.
    ended = dt.datetime.fromisoformat(record["finetuned_at"]).timestamp() + 1.0 - started
    entries = []
    for number, figures in record["trials"].items():
        inherited = trials[where[int(number)]]
        entries.append(
            inherited
            | {
                "end_s": ended,
                "accuracy": figures["accuracy"],
                "inside_s": figures["seconds"],
                "replaces": where[int(number)],
            }
        )
    return entries


def run_keras_tool(name: str, seed: int, budget: float, epochs: int | None, folder: Path) -> list[dict[str, Any]]:
    """KerasTuner or Optuna driving model.fit on the preset's data (nas' loader: the same split)."""
    import keras

    from nas.search.data import load_dataset
    from nas.search.space import load_space

    space = load_space("mobilenet")
    data = load_dataset(space.spec.dataset)
    epochs = epochs or space.spec.training.epochs
    shape, classes = data.x_train.shape[1:], data.num_classes
    started, deadline = time.time(), time.monotonic() + budget
    trials: list[dict[str, Any]] = []

    def train_and_time(values: dict[str, Any], model: Any, **fit: Any) -> tuple[float, float]:
        t0 = time.perf_counter()
        fit.setdefault("epochs", epochs)
        history = model.fit(
            data.x_train,
            data.y_train,
            batch_size=values["batch_size"],
            validation_data=(data.x_val, data.y_val),
            verbose=0,
            **fit,
        )
        accuracy = float(history.history["val_accuracy"][-1])
        throughput = timing_loop(model, data.x_val)
        trials.append(
            {
                "end_s": time.time() - started,
                "accuracy": accuracy,
                "throughput": throughput,
                "inside_s": time.perf_counter() - t0,
                "stopped": fit["epochs"] < epochs,  # a Hyperband trial trained on a short budget
                "params": values,
            }
        )
        return accuracy, throughput

    if name == "Optuna TPE":
        import optuna

        def objective(trial: optuna.Trial) -> tuple[float, float]:
            def ask(kind: str, key: str, *domain: Any) -> Any:
                if kind == "choice":
                    return trial.suggest_categorical(key, domain[0])
                if kind == "int":
                    return trial.suggest_int(key, domain[0], domain[1])
                return trial.suggest_float(key, domain[0], domain[1], log=domain[2])

            values = suggest(ask)
            keras.utils.set_random_seed(seed + trial.number)
            return train_and_time(values, keras_mobilenet(values, shape, classes))

        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True)
        study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
        study.optimize(objective, timeout=budget)
        return trials

    import keras_tuner as kt

    class BudgetReached(kt.errors.FatalError):  # type: ignore[misc]
        """KerasTuner ends a search early only on a fatal error."""

    class MobileNetHyperModel(kt.HyperModel):  # type: ignore[misc]
        def build(self, hp: Any) -> Any:
            def ask(kind: str, key: str, *domain: Any) -> Any:
                if kind == "choice":
                    return hp.Choice(key, domain[0])
                if kind == "int":
                    return hp.Int(key, domain[0], domain[1])
                return hp.Float(key, domain[0], domain[1], sampling="log" if domain[2] else "linear")

            self.values = suggest(ask)
            return keras_mobilenet(self.values, shape, classes)

        def fit(self, hp: Any, model: Any, *args: Any, **kwargs: Any) -> dict[str, float]:
            # The first trial always runs, as nas' and Optuna's do (their clocks start with their
            # search loops, which ask for a trial at once): here the tuner's set-up and first build
            # come first and can outlast a short budget on loaded cores, leaving no front.
            if trials and time.monotonic() >= deadline:
                raise BudgetReached("time budget reached")
            # KerasTuner's callbacks (it saves the model every epoch when, as here, the
            # objective is computed after fit) and, under Hyperband, the epochs of the bracket.
            fit = {k: v for k, v in kwargs.items() if k in ("callbacks", "epochs", "initial_epoch")}
            accuracy, throughput = train_and_time(self.values, model, **fit)
            return {"score": accuracy + SCORE_WEIGHT * math.log10(throughput), "val_accuracy": accuracy}

    common = {
        "objective": kt.Objective("score", "max"),
        "seed": seed + 1,  # KerasTuner takes a seed of 0 for none (`seed or random.randint(...)`)
        "overwrite": True,
        "directory": str(folder),
        "project_name": "kt",
    }
    if name == "KerasTuner Hyperband":
        # KerasTuner's advice: hyperband_iterations "as high a value as is within your resource
        # budget"; its default (1) ends the search after one pass of the brackets (10 trials,
        # under 3 minutes here), so it would leave most of the budget unused.
        tuner = kt.Hyperband(MobileNetHyperModel(), max_epochs=epochs, factor=3, hyperband_iterations=1000, **common)
    else:
        tuner = kt.BayesianOptimization(MobileNetHyperModel(), max_trials=100_000, **common)
    try:
        tuner.search(verbose=0)
    except BudgetReached:
        pass
    except RuntimeError as exc:  # KerasTuner re-raises a fatal error from fit wrapped on some paths
        if "time budget reached" not in str(exc):
            raise
    return trials


def run_one(name: str, seed: int, budget: float, epochs: int | None, out: Path, quick: bool) -> None:
    from nas.search import runtime

    runtime.set_debug(False)
    folder = out.parent / f"{CONTENDERS.index(name)}-{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    if name.startswith("nas"):
        trials = run_nas(name, seed, budget, epochs, folder, quick)
    else:
        runtime.import_tensorflow()
        trials = run_keras_tool(name, seed, budget, epochs, folder)
    out.write_text(json.dumps(trials))


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
    from nas.search.results import hypervolume_2d

    return hypervolume_2d([[a, math.log10(max(t, 1e-9))] for a, t in points], list(REFERENCE))


def _idle_gaps(trials: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(seconds outside training and measuring, seconds) of each gap between two trial ends
    (fine-tuning, after the last trial, is not a trial's overhead)."""
    ordered = sorted((t for t in trials if "replaces" not in t), key=lambda t: t["end_s"])
    return [
        (max(0.0, (b["end_s"] - a["end_s"]) - b["inside_s"]), b["end_s"] - a["end_s"])
        for a, b in itertools.pairwise(ordered)
        if b["end_s"] > a["end_s"]
    ]


def overhead(trials: list[dict[str, Any]]) -> float:
    """Median share of a trial's wall time spent outside training and measuring."""
    shares = [idle / gap for idle, gap in _idle_gaps(trials)]
    return statistics.median(shares) if shares else float("nan")


def overhead_s(trials: list[dict[str, Any]]) -> float:
    """Median seconds per trial outside training and measuring: unlike the share, not lowered
    by a tool whose training itself is slower."""
    idle = [idle for idle, _ in _idle_gaps(trials)]
    return statistics.median(idle) if idle else float("nan")


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


def machine() -> str:
    """Architecture, usable cores and processor: kept runs made on another machine show it (a
    2-core AVX2-only EPYC spent 2.3-4x as long per trial as the machine of seeds 0 and 1)."""
    model, vector = "unknown processor", "no AVX-512"
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            model = value.strip()
        elif key.strip() == "flags":
            vector = "AVX-512" if "avx512f" in value.split() else "AVX2" if "avx2" in value.split() else vector
    return f"{platform.machine()}, {len(os.sched_getaffinity(0))} usable cores, {model}, {vector}"


def commit() -> str:
    result = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


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
                    command = [sys.executable, __file__, "--run-one", name, "--seed", str(seed)]
                    command += ["--budget", str(args.budget), "--result", str(result)]
                    command += ["--epochs", str(args.epochs)] if args.epochs else []
                    command += ["--quick"] if args.quick else []
                    subprocess.run(command, check=True, cwd=work)
                    kept = {"contender": name, "seed": seed, "budget_s": args.budget, "epochs": args.epochs}
                    kept |= {"commit": commit(), "date": dt.date.today().isoformat(), "machine": machine()}
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
        command = [sys.executable, __file__, "--remeasure", str(work / "fronts.json"), "--result", str(figures_file)]
        command += ["--quick"] if args.quick else []
        subprocess.run(command, check=True, cwd=work)
        figures = json.loads(figures_file.read_text())
    for entry, figure in zip(fronts, figures, strict=True):
        entry["remeasured"] = figure
    report = {
        "command": "python benchmarks/race.py"
        + (" --quick" if args.quick else f" --seeds {args.seeds}")
        + (f" --budget {args.budget:g}" if not args.quick or args.budget != 20.0 else "")
        + (f" --epochs {args.epochs}" if args.epochs and not (args.quick and args.epochs == 2) else "")
        + (f" --runs {args.runs}" if args.runs else "")
        + (f" --contenders '{args.contenders}'" if args.contenders else ""),
        "commit": commit(),
        # to the minute, UTC: the replay charges each tool the newest race's overhead, and two
        # races of one day must still be ordered (a date alone sorts before its own day's times)
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="minutes"),
        "machine": machine(),
        "budget_s": args.budget,
        "seeds": args.seeds,
        "epochs": args.epochs,
        "reference_point": list(REFERENCE),
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
    report["summarised_again"] = {"commit": commit(), "date": dt.date.today().isoformat()}
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

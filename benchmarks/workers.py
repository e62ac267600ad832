"""Trials per hour: one worker using every core vs N workers splitting the cores.

    python -m benchmarks.workers [--trials 12] [--epochs 3] [--workers 2]

The same K candidates (drawn once from the `mobilenet` preset with a seeded random sampler)
are queued in each study, so every configuration trains and measures exactly the same
networks; each configuration gets its own new SQLite file, so no measurement is reused.
Wall time runs from starting `nas search` until it exits (worker start-up included).
Configurations, all in this invocation:
  1. `nas search` in one process (TensorFlow uses all cores): the baseline;
  2. `nas search --workers N` (each worker pinned to its share of the cores).
On a GPU machine add `--gpus 0 --workers-per-gpu 2` to compare 1 vs 2 workers on one GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
import yaml

HERE = Path(__file__).resolve().parent


def _space(folder: Path, epochs: int, trials: int) -> Path:
    space = yaml.safe_load((HERE.parent / "spaces" / "mobilenet.yaml").read_text())
    space["name"] = "bench"
    space["training"]["epochs"] = epochs
    space["search"]["trials"] = trials
    path = folder / "bench.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


def _candidates(space_path: Path, count: int) -> list[dict[str, object]]:
    from nas.search.space import load_space

    space = load_space(str(space_path))
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    out = []
    for _ in range(count):
        trial = study.ask()
        out.append({name: p.suggest(trial, name) for name, p in space.searchable().items()})
    return out


def _nas(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NAS_STORAGE"}
    return subprocess.run([sys.executable, "-m", "nas", *args], cwd=cwd, env=env, capture_output=True, text=True)


def run_config(label: str, extra: list[str], space: Path, candidates: list[dict[str, object]], folder: Path) -> dict:
    db = folder / f"{label}.db"
    storage = f"sqlite:///{db}"
    prepared = _nas("search", str(space), "--storage", storage, "--timeout", "0", cwd=folder)
    assert prepared.returncode == 0, prepared.stderr
    study = optuna.load_study(study_name="bench", storage=storage)
    for params in candidates:
        study.enqueue_trial(params)
    started = time.perf_counter()
    result = _nas("search", str(space), "--storage", storage, *extra, cwd=folder)
    wall = time.perf_counter() - started
    assert result.returncode == 0, result.stderr[-2000:]
    trials = optuna.load_study(study_name="bench", storage=storage).trials
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == len(candidates), f"{label}: {len(done)} of {len(candidates)}"
    train = sum(t.user_attrs["durations"].get("train", 0.0) for t in done)
    accuracy = sorted(round(t.values[0], 4) for t in done)
    return {
        "config": label,
        "args": extra,
        "trials": len(done),
        "wall_s": round(wall, 1),
        "trials_per_hour": round(len(done) * 3600 / wall, 1),
        "train_s_total": round(train, 1),
        "accuracies": accuracy,
    }


def main() -> None:
    # Every search here starts cold, as a new user's does: a device profile would skip measuring the device.
    os.environ.pop("NAS_DEVICE_PROFILE", None)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--gpus", default=None, help="e.g. 0: compare 1 vs --workers workers on that GPU")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        space = _space(folder, args.epochs, args.trials)
        candidates = _candidates(space, args.trials)
        if args.gpus is None:
            configs = [("1-worker", []), (f"{args.workers}-workers", ["--workers", str(args.workers)])]
        else:
            one = ["--gpus", args.gpus, "--workers", "1"]
            many = ["--gpus", args.gpus, "--workers", str(args.workers), "--workers-per-gpu", str(args.workers)]
            configs = [("1-worker-per-gpu", one), (f"{args.workers}-workers-per-gpu", many)]
        rows = [run_config(label, extra, space, candidates, folder) for label, extra in configs]
    base = rows[0]["trials_per_hour"]
    for row in rows:
        row["speedup"] = round(row["trials_per_hour"] / base, 2)
    report = {"cpus": os.cpu_count(), "epochs": args.epochs, "rows": rows}
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text)
    print(text)
    print()
    print("| configuration | trials | wall time | trials/hour | speed-up |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['config']} | {row['trials']} | {row['wall_s']:.0f} s | {row['trials_per_hour']:.0f} "
            f"| {row['speedup']:.2f}x |"
        )


if __name__ == "__main__":
    main()

"""Stand-alone accuracy at full training of the tabulated benchmark's architectures, several
seeds each: the reference the supernet's inherited ranking is judged against.

The table (benchmarks/table.py) trains every configuration for 4 epochs with one seed, where
seed-to-seed differences are as large as the differences between architectures. Here each of
the 64 architectures of the table's space, at the knobs benchmarks/supernet.py fixes the
supernet at (batch 32, no dropout, the table's best learning rate), is trained from scratch
by nas' own training code (the network a trial builds, `train_and_evaluate`) for `--epochs`
epochs (default 30, as long as the supernet trains) with each of `--seeds` seeds. Measuring is
left out: the table has every network's throughput.

Each finished training is written to `--out` at once, so a killed run resumes where it was;
benchmarks/supernet.py reads the file (`--standalone`) and ranks its inherited accuracies
against the mean over seeds.

    python -m benchmarks.standalone --out benchmarks/standalone.json     # about 25 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import keras
import yaml

from benchmarks import stamps
from benchmarks import table as tables
from benchmarks.supernet import best_learning_rate, mean_by_architecture, standalone
from nas.search.data import load_dataset
from nas.search.nets import build_plan, plan_network
from nas.search.runtime import import_tensorflow, set_debug
from nas.search.space import space_from_dict
from nas.search.training import train_and_evaluate

BATCH_SIZE = 32  # benchmarks/supernet.py's fixed knobs


def fixed_knobs(table: tables.Table) -> dict[str, Any]:
    return {"dropout": 0.0, "learning_rate": best_learning_rate(table, BATCH_SIZE), "batch_size": BATCH_SIZE}


def seed_agreement(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Rank agreement between the seeds themselves: how well any ranking can agree with one
    seed's stand-alone accuracies (the mean over seeds is steadier than one seed)."""
    by_seed: dict[int, dict[str, float]] = {}
    for run in runs:
        by_seed.setdefault(run["seed"], {})[tables.config_key(run["arch"])] = run["accuracy"]
    pairs = []
    for a, b in itertools.combinations(sorted(by_seed), 2):
        keys = sorted(set(by_seed[a]) & set(by_seed[b]))
        if len(keys) >= 3:
            pairs.append(tables.rank_correlations([by_seed[a][k] for k in keys], [by_seed[b][k] for k in keys]))
    if not pairs:
        return {}
    return {
        "seed_pairs": len(pairs),
        "kendall_tau_mean": round(statistics.fmean(p["kendall"] for p in pairs), 3),
        "spearman_mean": round(statistics.fmean(p["spearman"] for p in pairs), 3),
    }


def load(path: Path) -> dict[str, Any]:
    if path.exists():
        document: dict[str, Any] = json.loads(path.read_text())
        return document
    return {"runs": []}


def save(path: Path, document: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=1) + "\n")
    os.replace(tmp, path)  # a kill mid-write keeps the previous file whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30, help="epochs per training (default 30)")
    parser.add_argument("--seeds", type=int, default=3, help="trainings per architecture (default 3)")
    parser.add_argument("--table", type=Path, default=tables.TABLE)
    parser.add_argument("--out", type=Path, required=True, help="JSON file, written after each training")
    args = parser.parse_args()
    set_debug(False)
    import_tensorflow()
    table = tables.Table.load(args.table)
    fixed = fixed_knobs(table)
    document = load(args.out)
    if document["runs"] and (document.get("epochs"), document.get("fixed")) != (args.epochs, fixed):
        raise SystemExit(f"error: {args.out} holds trainings of other settings; choose another --out")
    space = space_from_dict(yaml.safe_load(tables.SPACE.read_text()), str(tables.SPACE))
    data = load_dataset(space.spec.dataset)
    architectures = [json.loads(key) for key in standalone(table, fixed)]
    done = {(tables.config_key(r["arch"]), r["seed"]) for r in document["runs"]}
    document |= {
        "command": f"python -m benchmarks.standalone --epochs {args.epochs} --seeds {args.seeds}",
        "commit": stamps.commit(),
        "date": stamps.today(),
        "machine": stamps.machine(),
        "epochs": args.epochs,
        "fixed": fixed,
    }
    todo = [(a, s) for s in range(args.seeds) for a in architectures if (tables.config_key(a), s) not in done]
    print(f"{len(todo)} trainings to run ({len(done)} kept in {args.out})", flush=True)
    for n, (arch, seed) in enumerate(todo, 1):
        started = time.perf_counter()
        candidate = space.candidate({**arch, **fixed}, num_classes=data.num_classes, channels=data.channels)
        candidate = dataclasses.replace(candidate, epochs=args.epochs)
        keras.utils.set_random_seed(seed)
        result = train_and_evaluate(build_plan(plan_network(candidate)), candidate, data, seed=seed)
        keras.backend.clear_session(free_memory=True)
        document["runs"].append(
            {
                "arch": arch,
                "seed": seed,
                "accuracy": round(result.accuracy, 4),
                "accuracy_at_4_epochs": round(result.history["val_accuracy"][min(3, args.epochs - 1)], 4),
                "seconds": round(time.perf_counter() - started, 2),
            }
        )
        save(args.out, document)
        print(f"{n}/{len(todo)} seed {seed}: {result.accuracy:.4f} {arch}", flush=True)
    means = sorted(mean_by_architecture(document["runs"]).values())
    document["summary"] = {
        "architectures": len(means),
        "trainings": len(document["runs"]),
        "mean_accuracy_min_median_max": [round(means[0], 4), round(statistics.median(means), 4), round(means[-1], 4)],
        "seed_agreement": seed_agreement(document["runs"]),
        "seconds_total": round(sum(r["seconds"] for r in document["runs"]), 1),
    }
    save(args.out, document)
    print(json.dumps(document["summary"], indent=2))


if __name__ == "__main__":
    main()

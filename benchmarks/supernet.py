"""Ranking fidelity of the supernet strategy against stand-alone training, on the tabulated
benchmark's space (benchmarks/table/space.yaml), whose table holds every architecture trained
from scratch.

One supernet is trained on the table's task (sandwich rule, in-place distillation) with the
training knobs fixed at one of the table's settings; then every architecture of the space is
taken out of it, its BatchNorm re-calibrated, and scored on the validation set. The report
gives Kendall's tau and Spearman's rho between these inherited accuracies and the table's
stand-alone accuracies at the same knobs, the cost of each part, and the subnets scored per
hour (without and with measuring, the latter from nas' own trial timings in the table).

Then the front of (inherited accuracy, the table's throughput) is fine-tuned as `nas search`
fine-tunes a supernet study's front (strategies/supernet/finetune.py: out of the supernet, re-calibrated,
`--finetune-epochs` epochs from a tenth of the supernet's rate) and each member's inherited, fine-tuned
and stand-alone (the table's) accuracy are reported side by side.

With `--standalone` (benchmarks/standalone.py's file: the same architectures trained from
scratch to the end, several seeds) the inherited accuracies are also ranked against the mean
of those trainings, and each fine-tuned front member is set beside it.

    python -m benchmarks.supernet                       # about 2 minutes on 2 cores
    python -m benchmarks.supernet --epochs 40 --out benchmarks/supernet.json
    python -m benchmarks.supernet --sort-channels       # channels sorted by importance once
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import keras
import numpy as np
import yaml

from benchmarks import stamps
from benchmarks import table as tables
from nas.search.data import load_dataset
from nas.search.runtime import import_tensorflow, set_debug
from nas.search.space import space_from_dict
from nas.search.strategies.supernet.elastic import elastic_space
from nas.search.strategies.supernet.evaluation import calibration_batches, evaluate
from nas.search.strategies.supernet.extract import extract, recalibrate
from nas.search.strategies.supernet.finetune import finetune_rate, finetune_subnet
from nas.search.strategies.supernet.network import Supernet
from nas.search.strategies.supernet.train import SupernetTraining, sort_epoch, train_supernet


def standalone(table: tables.Table, fixed: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Architecture (elastic params as JSON) -> the table's row trained with `fixed` knobs."""
    out = {}
    for row in table.rows:
        params = row["params"]
        if all(params.get(k) == v for k, v in fixed.items()):
            arch = {k: v for k, v in params.items() if k not in fixed}
            out[tables.config_key(arch)] = row
    return out


def best_learning_rate(table: tables.Table, batch_size: int) -> float:
    """The table's learning rate with the highest median stand-alone accuracy at this batch
    size and no dropout: the knob a user would fix the supernet's training at."""
    by_rate: dict[float, list[float]] = {}
    for row in table.rows:
        p = row["params"]
        if p["batch_size"] == batch_size and p["dropout"] == 0.0:
            by_rate.setdefault(p["learning_rate"], []).append(row["accuracy"])
    return max(by_rate, key=lambda rate: statistics.median(by_rate[rate]))


def mean_by_architecture(runs: list[dict[str, Any]]) -> dict[str, float]:
    """Architecture key -> mean accuracy over its seeds (benchmarks/standalone.py's runs)."""
    by: dict[str, list[float]] = {}
    for run in runs:
        by.setdefault(tables.config_key(run["arch"]), []).append(run["accuracy"])
    return {key: statistics.fmean(values) for key, values in by.items()}


def against_full_training(
    path: Path, architectures: list[dict[str, Any]], inherited: list[float]
) -> tuple[dict[str, Any], dict[str, float]]:
    """The inherited ranking against the mean of full stand-alone trainings, and those means."""
    document = json.loads(path.read_text())
    means = mean_by_architecture(document["runs"])
    pairs = [(i, means[k]) for i, k in zip(inherited, map(tables.config_key, architectures), strict=True) if k in means]
    figures = [m for _, m in pairs]
    report = {
        "file": str(path),
        "epochs": document["epochs"],
        "seeds": len({r["seed"] for r in document["runs"]}),
        "architectures": len(pairs),
        "standalone_range": [round(min(figures), 4), round(max(figures), 4)],
        **tables.rank_correlations([i for i, _ in pairs], figures),
        "seed_agreement": document.get("summary", {}).get("seed_agreement"),
    }
    return report, means


def front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points (accuracy, throughput) no other point dominates."""
    return [i for i, (a, t) in enumerate(points) if not any(b >= a and u >= t and (b, u) != (a, t) for b, u in points)]


def finetune_front(
    supernet: Supernet,
    space: Any,
    data: Any,
    architectures: list[dict[str, Any]],
    inherited: list[float],
    reference: dict[str, dict[str, Any]],
    fixed: dict[str, Any],
    calibration: list[Any],
    args: argparse.Namespace,
    full: dict[str, float],
) -> dict[str, Any]:
    """The inherited front fine-tuned by nas' own code, beside the table's stand-alone figures."""
    rows = [reference[tables.config_key(arch)] for arch in architectures]
    members = front([(a, r["throughput"]["images_per_s"]) for a, r in zip(inherited, rows, strict=True)])
    out = []
    for i in members:
        started = time.perf_counter()
        candidate = space.candidate({**architectures[i], **fixed}, num_classes=data.num_classes, channels=data.channels)
        rate = finetune_rate(candidate.learning_rate, args.finetune_learning_rate)
        candidate = dataclasses.replace(candidate, epochs=args.finetune_epochs, learning_rate=rate)
        _, result = finetune_subnet(supernet, candidate, calibration, data, seed=args.seed + i)
        keras.backend.clear_session(free_memory=True)
        out.append(
            {
                "arch": architectures[i],
                "throughput": round(rows[i]["throughput"]["images_per_s"]),
                "inherited": round(inherited[i], 4),
                "finetuned": round(result.accuracy, 4),
                "standalone": round(rows[i]["accuracy"], 4),
                **(
                    {"standalone_full": round(full[key], 4)}
                    if (key := tables.config_key(architectures[i])) in full
                    else {}
                ),
                "finetune_s": round(time.perf_counter() - started, 1),
            }
        )
        print(f"front {len(out)}/{len(members)}: {out[-1]}", flush=True)
    gaps = [m["standalone"] - m["finetuned"] for m in out]
    full_gaps = [m["standalone_full"] - m["finetuned"] for m in out if "standalone_full" in m]
    return {
        "epochs": args.finetune_epochs,
        "learning_rate": finetune_rate(fixed["learning_rate"], args.finetune_learning_rate),
        "members": out,
        "median_gap_standalone_minus_finetuned": round(statistics.median(gaps), 4),
        "max_gap_standalone_minus_finetuned": round(max(gaps), 4),
        "within_1_point": sum(g <= 0.01 for g in gaps),
        **(
            {
                "median_gap_full_standalone_minus_finetuned": round(statistics.median(full_gaps), 4),
                "within_1_point_of_full_standalone": sum(g <= 0.01 for g in full_gaps),
            }
            if full_gaps
            else {}
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=30, help="supernet epochs (default 30)")
    parser.add_argument("--calibration-batches", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0, help="seeds the supernet and the fine-tuning (default 0)")
    parser.add_argument("--table", type=Path, default=tables.TABLE)
    parser.add_argument("--finetune-epochs", type=int, default=3, help="epochs per front subnet (default 3)")
    parser.add_argument(
        "--finetune-learning-rate", type=float, default=None, help="(default: as nas, a tenth of the supernet's)"
    )
    parser.add_argument(
        "--sort-channels",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="sort channels by importance a quarter into the training (nas' sort_channels; default off)",
    )
    parser.add_argument("--standalone", type=Path, help="benchmarks/standalone.py's output: full-training figures")
    parser.add_argument("--out", type=Path, help="write the report as JSON")
    args = parser.parse_args()
    set_debug(False)
    import_tensorflow()
    table = tables.Table.load(args.table)
    document = yaml.safe_load(tables.SPACE.read_text())
    batch_size = 32
    rate = best_learning_rate(table, batch_size)
    fixed = {"dropout": 0.0, "learning_rate": rate, "batch_size": batch_size}
    document["search"] |= {
        "strategy": "supernet",
        "supernet": {"epochs": args.epochs, "calibration_batches": args.calibration_batches, "fixed": fixed},
    }
    space = space_from_dict(document, str(tables.SPACE))
    elastic = elastic_space(space)
    data = load_dataset(space.spec.dataset)
    reference = standalone(table, fixed)
    architectures = [json.loads(key) for key in reference]

    started = time.perf_counter()
    largest = elastic.space.candidate(elastic.largest, num_classes=data.num_classes, channels=data.channels)
    supernet = Supernet(largest, seed=args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        training = train_supernet(
            supernet,
            elastic,
            data,
            SupernetTraining(args.epochs),
            Path(tmp) / "supernet.npz",
            seed=args.seed,
            on_epoch=lambda e, n, f: print(f"epoch {e}/{n}: {f}", flush=True),
            sort_channels=args.sort_channels,
        )
    train_s = time.perf_counter() - started

    calibration = calibration_batches(data, batch_size, args.calibration_batches)
    inherited, own, seconds = [], [], []
    for arch in architectures:
        t0 = time.perf_counter()
        candidate = space.candidate({**arch, **fixed}, num_classes=data.num_classes, channels=data.channels)
        model = extract(supernet, candidate)
        recalibrate(model, calibration)
        _, accuracy = evaluate(model, data)
        seconds.append(time.perf_counter() - t0)
        inherited.append(accuracy)
        own.append(reference[tables.config_key(arch)]["accuracy"])
    # Measuring as a trial of the table paid it, where the network was not in the cache yet.
    measure_s = statistics.median(r["durations"]["measure"] for r in table.rows if not r["cached"])
    # The same inherited ranking against the table's other learning rates (the stand-alone
    # accuracies after 4 epochs depend on the rate as much as on the architecture).
    by_rate = {}
    for other in sorted({r["params"]["learning_rate"] for r in table.rows}):
        column = standalone(table, {**fixed, "learning_rate": other})
        figures = [column[tables.config_key(arch)]["accuracy"] for arch in architectures]
        by_rate[str(other)] = {
            "standalone_range": [round(min(figures), 4), round(max(figures), 4)],
            **tables.rank_correlations(inherited, figures),
        }
    full_report: dict[str, Any] = {}
    full: dict[str, float] = {}
    if args.standalone:
        full_report, full = against_full_training(args.standalone, architectures, inherited)
    finetuned = finetune_front(
        supernet, space, data, architectures, inherited, reference, fixed, calibration, args, full
    )
    per_subnet = statistics.median(seconds)
    top = np.argsort(inherited)[::-1][:5]
    report = {
        "command": "python -m benchmarks.supernet"
        + (f" --epochs {args.epochs}" if args.epochs != 30 else "")
        + (f" --finetune-epochs {args.finetune_epochs}" if args.finetune_epochs != 3 else "")
        + (f" --finetune-learning-rate {args.finetune_learning_rate:g}" if args.finetune_learning_rate else "")
        + (" --sort-channels" if args.sort_channels else "")
        + (f" --seed {args.seed}" if args.seed else "")
        + (f" --standalone {args.standalone}" if args.standalone else ""),
        "sorted_channels_after_epoch": sort_epoch(args.epochs, args.sort_channels),
        "commit": stamps.commit(),
        "date": stamps.today(),
        "machine": stamps.machine(),
        "table": {"commit": table.header.get("commit"), "rows": len(table.rows)},
        "fixed": fixed,
        "seed": args.seed,
        "supernet_epochs": args.epochs,
        "supernet_train_s": round(train_s, 1),
        "history": training.history,
        "subnets": len(architectures),
        "inherited_accuracy": {
            "min": round(min(inherited), 4),
            "median": round(statistics.median(inherited), 4),
            "max": round(max(inherited), 4),
        },
        "standalone_accuracy": {
            "min": round(min(own), 4),
            "median": round(statistics.median(own), 4),
            "max": round(max(own), 4),
        },
        "rank": tables.rank_correlations(inherited, own),
        "rank_against_each_learning_rate": by_rate,
        "rank_against_full_training": full_report,
        "seconds_per_subnet": round(per_subnet, 3),
        "subnets_per_hour_without_measuring": round(3600 / per_subnet),
        "measure_seconds_median_uncached_in_table": round(measure_s, 3),
        "subnets_per_hour_with_measuring": round(3600 / (per_subnet + measure_s)),
        "finetune": finetuned,
        "top5_by_inherited": [
            {"arch": architectures[i], "inherited": round(inherited[i], 4), "standalone": round(own[i], 4)} for i in top
        ],
        "pairs": [
            {"arch": a, "inherited": round(i, 4), "standalone": round(o, 4)}
            for a, i, o in zip(architectures, inherited, own, strict=True)
        ],
    }
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    shown = {k: v for k, v in report.items() if k not in ("pairs", "history")}
    print(json.dumps(shown, indent=2))


if __name__ == "__main__":
    main()

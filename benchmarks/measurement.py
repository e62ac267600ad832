"""How far the throughput figures can be trusted, why they are measured, what caching saves.

    python -m benchmarks.measurement [--networks 20] [--trials 8] [--skip-search]

1. Repeatability: N random architectures of the `mobilenet` preset, each measured (throughput
   at batch 64, no cache) in two separate processes, by two protocols in the same run: the one
   before intervals (5 rounds of 0.2 s, no reference) and the current default (interleaved
   with the reference network, bootstrap interval). Per protocol: Spearman rank correlation
   between the runs, coverage (run 2's figure inside run 1's 95% interval), order flips
   between run 1 and run 2 among pairs whose run-1 intervals do not overlap, spread, interval
   width, and measuring seconds per network (warm-up included).
2. Why measure: Spearman rank correlation of FLOPs with measured throughput, same networks.
3. What the cache and screening save: the same constrained search (max_latency_ms set to the
   median latency of part 1, so about half the candidates are infeasible) run as two studies
   with the same seed on one database, once with `--no-cache --no-screening` and once with
   both on; total wall time of each.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
BEFORE = {"rounds": 5, "round_seconds": 0.2, "reference": False}  # the protocol before intervals


def measure_networks(count: int, out: Path, protocol: dict[str, Any], baseline_db: Path) -> None:
    """Worker mode: measure `count` sampled networks in this process, write JSON. The device
    baseline (the reference's stored figure) is shared with the other run through
    `baseline_db`, as two searches on one database share it; candidates are never cached."""
    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    import optuna

    from nas.search.hardware import HardwareProfiler, architecture_signature, measure_latency
    from nas.search.nets import build_model, count_flops
    from nas.search.space import MeasureSpec, load_space
    from nas.storage import MeasurementCache, open_storage, resolve_storage_url

    space = load_space("mobilenet")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(0))
    spec = MeasureSpec(batch_sizes=[64], latency=True, **protocol)
    storage = open_storage(resolve_storage_url(f"sqlite:///{baseline_db}"))
    profiler = HardwareProfiler(spec, cache=MeasurementCache(storage.engine))
    if spec.reference:
        profiler.baseline(64)  # run 1 measures and stores it, run 2 reads it
    rows = []
    for _ in range(count):
        candidate = space.sample(study.ask(), num_classes=10, channels=1)
        model = build_model(candidate, seed=0)
        figure = profiler.throughput(model, 64, xla=False)
        rows.append(
            {
                "signature": architecture_signature(model),
                "flops": count_flops(model),
                "throughput": figure.images_per_s,
                "low": figure.low,
                "high": figure.high,
                "spread": figure.spread,
                "seconds": figure.seconds,
                "latency_p95_ms": measure_latency(model).p95_ms,
            }
        )
    out.write_text(json.dumps(rows))


def repeatability(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, float]:
    """Run 1 against run 2: rank correlation, how often run 2's figure lies in run 1's
    interval, order flips between pairs whose intervals (run 1) do not overlap, interval width."""
    from scipy.stats import spearmanr

    assert [r["signature"] for r in a] == [r["signature"] for r in b]
    inside = [x["low"] <= y["throughput"] <= x["high"] for x, y in zip(a, b, strict=True)]
    separated = flips = 0
    for i, j in itertools.combinations(range(len(a)), 2):
        if a[i]["high"] < a[j]["low"] or a[j]["high"] < a[i]["low"]:
            separated += 1
            flips += (a[i]["throughput"] < a[j]["throughput"]) != (b[i]["throughput"] < b[j]["throughput"])
    return {
        "spearman": float(spearmanr([r["throughput"] for r in a], [r["throughput"] for r in b]).statistic),
        "coverage": sum(inside) / len(inside),
        "separated_pairs": separated,
        "flips": flips,
        "median_spread": statistics.median(r["spread"] for r in a + b),
        "median_interval": statistics.median((r["high"] - r["low"]) / r["throughput"] for r in a + b),
        "seconds_per_network": statistics.mean(r["seconds"] for r in a + b),
        "median_difference": statistics.median(
            abs(x["throughput"] - y["throughput"]) / x["throughput"] for x, y in zip(a, b, strict=True)
        ),
    }


def run(cmd: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True)
    return time.perf_counter() - started


def main() -> None:
    # Every search here starts cold, as a new user's does: a device profile would skip measuring the device.
    os.environ.pop("NAS_DEVICE_PROFILE", None)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=int, default=20)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--rounds", type=int, help="measure.rounds of the current protocol (default: the default)")
    parser.add_argument("--round-seconds", type=float, help="measure.round_seconds of the current protocol")
    parser.add_argument("--no-reference", action="store_true", help="current protocol without the reference")
    parser.add_argument("--skip-search", action="store_true", help="parts 1 and 2 only")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--protocol", type=json.loads, help=argparse.SUPPRESS)
    parser.add_argument("--baseline-db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        measure_networks(args.networks, args.worker, args.protocol, args.baseline_db)
        return

    from scipy.stats import spearmanr

    from nas.search.space import MeasureSpec

    defaults = MeasureSpec()
    current = {
        "rounds": args.rounds or defaults.rounds,
        "round_seconds": args.round_seconds or defaults.round_seconds,
        "reference": defaults.reference and not args.no_reference,
    }
    protocols = {"before (5 x 0.2 s, no reference)": BEFORE, f"now {json.dumps(current)}": current}
    work = Path(tempfile.mkdtemp(prefix="nas-bench-"))
    runs: dict[str, list[list[dict[str, Any]]]] = {label: [] for label in protocols}
    for i in (1, 2):  # run 1 of both protocols, then run 2: drift over time hits both alike
        for n, (label, protocol) in enumerate(protocols.items()):
            out = work / f"run{i}-{n}.json"
            command = [sys.executable, __file__, "--networks", str(args.networks), "--worker", str(out)]
            command += ["--protocol", json.dumps(protocol), "--baseline-db", str(work / f"baseline-{n}.db")]
            run(command, work)
            runs[label].append(json.loads(out.read_text()))
    figures = {label: repeatability(*pair) for label, pair in runs.items()}
    a = runs[next(iter(protocols))][0]
    print(f"networks: {args.networks} ({len({r['signature'] for r in a})} distinct architectures), batch 64")
    header = "| protocol | Spearman (goal >= 0.95) | run 2 inside run 1's 95% interval (goal >= 90%) |"
    header += " flips among separated pairs (goal 0) | median spread | median interval width |"
    header += " median difference run 1 vs 2 | measuring s per network |"
    print(header)
    print("|" + "---|" * 8)
    for label, f in figures.items():
        print(
            f"| {label} | {f['spearman']:.3f} | {f['coverage']:.0%} | {f['flips']} of {f['separated_pairs']} |"
            f" {f['median_spread']:.1%} | {f['median_interval']:.1%} | {f['median_difference']:.1%} |"
            f" {f['seconds_per_network']:.2f} |"
        )
    before, now = figures.values()
    print(
        f"measuring time per network, now / before: {now['seconds_per_network'] / before['seconds_per_network']:.2f}x"
        " (goal <= 1.5x)"
    )
    flops_rho = spearmanr([r["flops"] for r in a], [r["throughput"] for r in a]).statistic
    print(f"FLOPs vs measured throughput: Spearman rho = {flops_rho:.3f} (perfect inverse ranking: -1)")
    if args.skip_search:
        return

    limit = statistics.median(r["latency_p95_ms"] for r in a)  # run 1, before
    space = yaml.safe_load((HERE.parent / "spaces" / "mobilenet.yaml").read_text())
    space["training"]["epochs"] = 2
    space["constraints"] = {"max_latency_ms": round(limit, 3)}
    space_file = work / "constrained.yaml"
    space_file.write_text(yaml.safe_dump(space))
    timings = {}
    for label, flags in (("without cache and screening", ["--no-cache", "--no-screening"]), ("with both", [])):
        folder = work / label.replace(" ", "-")
        folder.mkdir()
        total = 0.0
        for study in ("first", "second"):  # same seed: the second study samples the same networks
            cmd = [
                sys.executable,
                "-m",
                "nas",
                "search",
                str(space_file),
                "--study",
                study,
                "--trials",
                str(args.trials),
                *flags,
            ]
            total += run(cmd, folder)
        timings[label] = total
        print(f"constrained search, 2 studies x {args.trials} trials, {label}: {total:.1f} s")
    ratio = timings["without cache and screening"] / timings["with both"]
    print(f"max_latency_ms = {limit:.3f} (median p95 of part 1); speed-up from cache + screening: {ratio:.2f}x")


if __name__ == "__main__":
    main()

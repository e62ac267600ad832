"""How far the throughput figures can be trusted, why they are measured, what caching saves.

    python benchmarks/measurement.py [--networks 20] [--trials 8]

1. Repeatability: N random architectures of the `mobilenet` preset, each measured (throughput
   at batch 64, no cache) in two separate processes; Spearman rank correlation between the
   runs and the median spread of a measurement.
2. Why measure: Spearman rank correlation of FLOPs with measured throughput, same networks.
3. What the cache and screening save: the same constrained search (max_latency_ms set to the
   median latency of part 1, so about half the candidates are infeasible) run as two studies
   with the same seed on one database, once with `--no-cache --no-screening` and once with
   both on; total wall time of each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def measure_networks(count: int, out: Path, rounds: int, round_seconds: float) -> None:
    """Worker mode: measure `count` sampled networks in this process, write JSON."""
    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    import optuna

    from nas.search.hardware import HardwareProfiler, architecture_signature
    from nas.search.nets import build_model, count_flops
    from nas.search.space import MeasureSpec, load_space

    space = load_space("mobilenet")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(0))
    spec = MeasureSpec(batch_sizes=[64], latency=True, rounds=rounds, round_seconds=round_seconds)
    profiler = HardwareProfiler(spec, cache=None)
    rows = []
    for _ in range(count):
        candidate = space.sample(study.ask(), num_classes=10, channels=1)
        model = build_model(candidate, seed=0)
        cost = profiler.measure(model, precision="float32", xla=False)
        assert cost.latency is not None
        rows.append(
            {
                "signature": architecture_signature(model),
                "flops": count_flops(model),
                "throughput": cost.primary.images_per_s,
                "spread": cost.primary.spread,
                "latency_p95_ms": cost.latency.p95_ms,
            }
        )
    out.write_text(json.dumps(rows))


def run(cmd: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--networks", type=int, default=20)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5, help="measure.rounds for part 1")
    parser.add_argument("--round-seconds", type=float, default=0.2, help="measure.round_seconds for part 1")
    parser.add_argument("--skip-search", action="store_true", help="parts 1 and 2 only")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        measure_networks(args.networks, args.worker, args.rounds, args.round_seconds)
        return

    from scipy.stats import spearmanr

    work = Path(tempfile.mkdtemp(prefix="nas-bench-"))
    runs = []
    for i in (1, 2):
        out = work / f"run{i}.json"
        options = ["--rounds", str(args.rounds), "--round-seconds", str(args.round_seconds)]
        run([sys.executable, __file__, "--networks", str(args.networks), *options, "--worker", str(out)], work)
        runs.append(json.loads(out.read_text()))
    a, b = runs
    assert [r["signature"] for r in a] == [r["signature"] for r in b]
    repeat = spearmanr([r["throughput"] for r in a], [r["throughput"] for r in b]).statistic
    spreads = [r["spread"] for r in a + b]
    flops_rho = spearmanr([r["flops"] for r in a], [r["throughput"] for r in a]).statistic
    distinct = len({r["signature"] for r in a})
    print(
        f"networks: {args.networks} ({distinct} distinct architectures), {args.rounds} rounds of {args.round_seconds} s"
    )
    print(f"repeatability: Spearman rho between two processes = {repeat:.3f} (goal >= 0.95)")
    print(f"median spread of one measurement = {statistics.median(spreads):.1%} (goal <= 5%)")
    print(f"FLOPs vs measured throughput: Spearman rho = {flops_rho:.3f} (perfect inverse ranking: -1)")
    if args.skip_search:
        return

    limit = statistics.median(r["latency_p95_ms"] for r in a)
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

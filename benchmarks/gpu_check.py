"""GPU check, run as one prepared script on a machine with an NVIDIA GPU.

    python benchmarks/gpu_check.py [--out gpu_check.json]

For two networks (a small digits network from the `mobilenet` preset and a MobileNetV2-sized
one at 224x224x3), measures throughput at batch 128 under float32, mixed_float16 and
mixed_bfloat16, each with XLA off and on, three times each (spread of repeated
measurements), plus latency at batch 1. Prints a Markdown table for benchmarks/RESULTS.md
and writes every figure as JSON. Exits 2 with a message when TensorFlow sees no GPU.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from nas.search import runtime

runtime.set_debug(False)
tf = runtime.import_tensorflow()

import keras

from nas.search.hardware import describe_device, measure_latency, measure_throughput, unsupported_precisions
from nas.search.nets import build_model, count_flops
from nas.search.space import Candidate, StagePlan
from nas.search.training import precision_policy


def networks() -> dict[str, Candidate]:
    small = Candidate(
        num_classes=10,
        image_size=16,
        channels=1,
        width_multiplier=1.0,
        stem_filters=16,
        stem_stride=1,
        head_filters=128,
        dropout=0.0,
        stages=(StagePlan(16, 1, 1, 3, 1, False), StagePlan(24, 2, 2, 3, 6, True), StagePlan(32, 2, 2, 5, 6, True)),
        epochs=1,
        batch_size=32,
        optimizer="adam",
        learning_rate=1e-3,
    )
    # The MobileNetV2 1.0 stage plan (Sandler et al., table 2) at 224x224x3, 1000 classes.
    v2 = tuple(
        StagePlan(f, s, n, 3, t, False)
        for t, f, n, s in (
            (1, 16, 1, 1),
            (6, 24, 2, 2),
            (6, 32, 3, 2),
            (6, 64, 4, 2),
            (6, 96, 3, 1),
            (6, 160, 3, 2),
            (6, 320, 1, 1),
        )
    )
    large = Candidate(
        num_classes=1000,
        image_size=224,
        channels=3,
        width_multiplier=1.0,
        stem_filters=32,
        stem_stride=2,
        head_filters=1280,
        dropout=0.0,
        stages=v2,
        epochs=1,
        batch_size=32,
        optimizer="adam",
        learning_rate=1e-3,
    )
    return {"digits-small": small, "mobilenetv2-224": large}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    device = describe_device()
    if device["kind"] != "gpu":
        print("Error: TensorFlow sees no GPU here; run this on a GPU machine", file=sys.stderr)
        sys.exit(2)
    skip = unsupported_precisions(device)
    rows: list[dict[str, Any]] = []
    for name, candidate in networks().items():
        for precision in ("float32", "mixed_float16", "mixed_bfloat16"):
            if precision in skip:
                print(f"skip {name} {precision}: {skip[precision]}")
                continue
            for xla in (False, True):
                with precision_policy(precision):
                    model = build_model(candidate, seed=0)
                    runs = [measure_throughput(model, args.batch, jit_compile=xla) for _ in range(3)]
                    latency = measure_latency(model, jit_compile=xla)
                figures = [r.images_per_s for r in runs]
                row = {
                    "network": name,
                    "precision": precision,
                    "xla": xla,
                    "flops": count_flops(model),
                    "throughput": statistics.median(figures),
                    "repeat_spread": (max(figures) - min(figures)) / statistics.median(figures),
                    "within_spread": statistics.median(r.spread for r in runs),
                    "latency_p50_ms": latency.p50_ms,
                    "latency_p95_ms": latency.p95_ms,
                }
                rows.append(row)
                print(json.dumps(row))
                keras.backend.clear_session(free_memory=True)
    args.out.write_text(json.dumps({"device": device, "rows": rows}, indent=2))
    print(
        f"\nDevice: {device.get('name')} (compute capability {device.get('compute_capability')}), "
        f"TF {device['tensorflow']}, CUDA {device['cuda']}, cuDNN {device['cudnn']}\n"
    )
    print("| network | precision | XLA | images/s | vs float32 | repeat spread | latency p50/p95 ms |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        base = next(
            r for r in rows if r["network"] == row["network"] and r["precision"] == "float32" and r["xla"] == row["xla"]
        )
        print(
            f"| {row['network']} | {row['precision']} | {'on' if row['xla'] else 'off'} | {row['throughput']:,.0f} | "
            f"{row['throughput'] / base['throughput']:.2f}x | {row['repeat_spread']:.1%} | "
            f"{row['latency_p50_ms']:.2f}/{row['latency_p95_ms']:.2f} |"
        )


if __name__ == "__main__":
    main()

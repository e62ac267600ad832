"""Pruning and quantization settings on one architecture, on digits, in one run.

    python -m benchmarks.compression [--epochs 8] [--out benchmarks/compression.json]

The architecture is a MobileNetV2-style network at 16x16 (110k parameters, 6.6M FLOPs).
Every setting trains from the same initial weights with the same seed, then reports the
accuracy of the deployed form (LiteRT for TFLite), the TFLite file size and its zlib-compressed
size, the Keras model's CPU throughput (batch 64, the search's protocol) and the TFLite
latency at batch 1 (XNNPACK, 1 thread). Ratios are against the uncompressed model measured
in the same run. Prints a Markdown table.

Last, the int8/float32 TFLite file-size ratio of MobileNetV2 1.0 at 224x224x3
(`spaces/reference/mobilenet_v2_1.0_224.yaml`, untrained weights: file sizes do not depend on
their values; 8 random calibration images), where per-channel scales and int32 biases no
longer dominate as they do on the small network.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks import stamps

HERE = Path(__file__).resolve().parent

SPACE = """
name: compression-benchmark
dataset: {source: digits, image_size: 16, validation_fraction: 0.25, seed: 0}
model:
  family: mobilenet_v2
  stem_filters: 16
  stem_stride: 1
  head_filters: 128
  dropout: 0.0
  stages:
    - {filters: 16, stride: 1, depth: 1, kernel: 3, expansion: 1}
    - {filters: 32, stride: 2, depth: 2, kernel: 3, expansion: 6}
    - {filters: 64, stride: 2, depth: 2, kernel: 3, expansion: 6}
training: {epochs: 8, batch_size: 32, learning_rate: 0.005}
"""

# (label, pruning method, sparsity, quantization)
SETTINGS = [
    ("none (float32)", "none", 0.0, "none"),
    ("magnitude 50%", "magnitude", 0.5, "none"),
    ("magnitude 75%", "magnitude", 0.75, "none"),
    ("2:4 (N:M)", "n_m", 0.5, "none"),
    ("channel 50%", "channel", 0.5, "none"),
    ("dynamic range", "none", 0.0, "dynamic"),
    ("float16", "none", 0.0, "float16"),
    ("int8", "none", 0.0, "int8"),
    ("magnitude 75% + int8", "magnitude", 0.75, "int8"),
    ("2:4 + int8", "n_m", 0.5, "int8"),
    ("channel 50% + int8", "channel", 0.5, "int8"),
]


def run_setting(space: Any, data: Any, profiler: Any, label: str, method: str, sparsity: float, quant: str) -> dict:
    import keras

    from nas.search.deploy import deploy
    from nas.search.nets import build_plan, plan_network, pruned_plan, transfer
    from nas.search.training import train_and_evaluate

    base = space.candidate({}, num_classes=10, channels=1)
    candidate = dataclasses.replace(base, pruning=method, sparsity=sparsity, quantization=quant)
    pruning = space.spec.compression.pruning
    started = time.perf_counter()
    full_net = plan_network(candidate)
    keras.utils.set_random_seed(0)
    model = build_plan(full_net)
    if method == "channel":
        # As a trial does it: the first `begin` of the epochs on the full network, the rest cut.
        first = max(1, round(pruning.begin * candidate.epochs))
        train_and_evaluate(model, dataclasses.replace(candidate, epochs=first), data, seed=0)
        small_net = pruned_plan(full_net, sparsity)
        small = build_plan(small_net)
        transfer(model, small, full_net, small_net)
        late = dataclasses.replace(candidate, epochs=candidate.epochs - first)
        result = train_and_evaluate(small, late, data, seed=1)
        model, params = small, small_net.params()
    else:
        result = train_and_evaluate(model, candidate, data, seed=0, pruning=pruning)
        params = full_net.params()
    deployed = deploy(model, quant, data, convert=True, latency=True, threads=1)
    cost = profiler.measure(model, precision="float32", xla=False)
    zeros = sum(int((w == 0).sum()) for w in model.get_weights()) / sum(w.size for w in model.get_weights())
    return {
        "setting": label,
        "params": params,
        "weight_zeros": round(zeros, 4),
        "keras_accuracy": round(result.accuracy, 4),
        "deployed_accuracy": round(deployed.accuracy or 0.0, 4),
        "tflite_bytes": deployed.model_bytes,
        "compressed_bytes": deployed.compressed_bytes,
        "keras_images_per_s": round(cost.primary.images_per_s, 1),
        "tflite_latency_ms": round(deployed.latency_ms or 0.0, 4),
        "seconds": round(time.perf_counter() - started, 1),
    }


def table(rows: list[dict]) -> str:
    base = rows[0]
    lines = [
        "| setting | params | zeros | accuracy (deployed) | TFLite bytes | zlib bytes | Keras CPU img/s "
        "| TFLite ms (b=1) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['setting']} | {r['params']:,} | {r['weight_zeros']:.0%} | {r['deployed_accuracy']:.4f} | "
            f"{r['tflite_bytes']:,} ({r['tflite_bytes'] / base['tflite_bytes']:.2f}x) | "
            f"{r['compressed_bytes']:,} ({r['compressed_bytes'] / base['compressed_bytes']:.2f}x) | "
            f"{r['keras_images_per_s']:,.0f} ({r['keras_images_per_s'] / base['keras_images_per_s']:.2f}x) | "
            f"{r['tflite_latency_ms']:.4f} ({r['tflite_latency_ms'] / base['tflite_latency_ms']:.2f}x) |"
        )
    return "\n".join(lines)


def main() -> None:
    # Every search here starts cold, as a new user's does: a device profile would skip measuring the device.
    os.environ.pop("NAS_DEVICE_PROFILE", None)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--out", type=Path, default=HERE / "compression.json")
    args = parser.parse_args()

    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    from nas.search.data import load_dataset
    from nas.search.hardware import HardwareProfiler
    from nas.search.space import MeasureSpec, space_from_dict

    document = yaml.safe_load(SPACE)
    document["training"]["epochs"] = args.epochs
    space = space_from_dict(document)
    data = load_dataset(space.spec.dataset)
    profiler = HardwareProfiler(MeasureSpec(batch_sizes=[64], latency=False, rounds=7, round_seconds=0.2), None)
    rows = []
    for setting in SETTINGS:
        rows.append(run_setting(space, data, profiler, *setting))
        print(json.dumps(rows[-1]), flush=True)
    large = mobilenet_v2_int8_ratio()
    args.out.write_text(json.dumps(record(args.epochs, rows, large), indent=2))
    print(table(rows))
    print(
        f"\nMobileNetV2 1.0 224 ({large['params']:,} params): float32 {large['none']:,} bytes, "
        f"int8 {large['int8']:,} bytes, ratio {large['ratio']:.3f}"
    )


def record(epochs: int, rows: list[dict], large: dict[str, Any]) -> dict[str, Any]:
    """compression.json: the command, the commit, date and machine of the run, then its figures."""
    return {
        "command": "python -m benchmarks.compression" + (f" --epochs {epochs}" if epochs != 8 else ""),
        "commit": stamps.commit(),
        "date": stamps.today(),
        "machine": stamps.machine(),
        "epochs": epochs,
        "rows": rows,
        "mobilenet_v2_224": large,
    }


def mobilenet_v2_int8_ratio() -> dict[str, Any]:
    import tempfile

    import numpy as np

    from nas.search.deploy import write_tflite
    from nas.search.nets import build_model
    from nas.search.space import load_space

    space = load_space(str(HERE.parent / "spaces" / "reference" / "mobilenet_v2_1.0_224.yaml"))
    model = build_model(space.candidate({}, num_classes=1000, channels=3), seed=0)
    calibration = np.random.default_rng(0).random((8, 224, 224, 3), dtype=np.float32)
    sizes: dict[str, Any] = {"params": model.count_params()}
    with tempfile.TemporaryDirectory() as folder:
        for mode in ("none", "int8"):
            (Path(folder) / mode).mkdir()
            sizes[mode] = write_tflite(model, Path(folder) / mode, mode, calibration).files[0].stat().st_size
    sizes["ratio"] = sizes["int8"] / sizes["none"]
    return sizes


if __name__ == "__main__":
    main()

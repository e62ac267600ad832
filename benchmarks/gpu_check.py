"""GPU check: one prepared command for a machine with an NVIDIA GPU (about 8 minutes).

    python -m benchmarks.gpu_check [--out gpu_check.json] [--cpu]

1. The device and TensorFlow's CUDA/cuDNN build; the matmul peak measured in float32 (TF32
   where TensorFlow uses it), float16 and bfloat16, next to the data-sheet figure.
2. Two networks (a small digits network and MobileNetV2 1.0 at 224x224x3) under float32,
   mixed_float16 and mixed_bfloat16, XLA off and on: inference throughput at batch 128 by the
   product's protocol (interleaved with the reference network; median of three measurements,
   their spread, and the 95% interval's width), latency p50/p95 at batch 1, and the time
   of one training step of nas' loop (loss scaling under float16 included).
3. `nas search tiny --gpus 0 --trials 3`: exit status, wall time, what the trials recorded.
4. Two workers sharing GPU 0, each with a memory cap (`--workers-per-gpu 2`).
5. `nas export --format tensorrt` of that study's front where TensorRT's runtime is
   installed, with the verdict (else the reason it is not).

Prints Markdown tables for benchmarks/RESULTS.md and writes every figure as JSON. Exits 2
when TensorFlow sees no GPU. `--cpu` runs parts 1 and 2 on the CPU (float32 and
mixed_bfloat16, smaller batches) and reports parts 3-5 as not run: how the tests check this
script on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nas.search import runtime

runtime.set_debug(False)
tf = runtime.import_tensorflow()

import keras
import optuna

from nas.search.deploy import tensorrt_engine_status
from nas.search.hardware import (
    describe_device,
    measure_latency,
    measure_matmul_peak,
    measure_throughput,
    unsupported_precisions,
)
from nas.search.hardware.peaks import data_sheet_peak
from nas.search.hardware.reference import reference_forward
from nas.search.nets import build_model, count_flops
from nas.search.space import Candidate, StagePlan
from nas.search.training import make_optimizer, precision_policy
from nas.search.training.train import _Steps

PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")


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


def peaks(device: dict[str, Any], cpu: bool) -> list[dict[str, Any]]:
    rows = []
    for precision, dtype in (("float32", "float32"), ("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")):
        if cpu and dtype == "float16":
            continue
        n = 1024 if cpu else 8192
        measured = measure_matmul_peak(seconds=0.2 if cpu else 1.0, n=n, dtype=dtype)
        sheet = data_sheet_peak(device, precision)
        rows.append(
            {
                "dtype": dtype,
                "measured_flops_per_s": measured,
                "data_sheet_flops_per_s": sheet[0] if sheet else None,
                "data_sheet": sheet[1] if sheet else None,
            }
        )
        print(json.dumps(rows[-1]))
    return rows


def train_step_ms(model: keras.Model, precision: str, xla: bool, batch: int, classes: int, steps: int) -> float:
    """Milliseconds per training step of nas' loop on random data, after a warm-up."""
    loop = _Steps(model, make_optimizer("adam", 1e-3, 10_000, precision=precision), jit_compile=xla)
    x = tf.random.uniform((batch, *model.input_shape[1:]), seed=1)
    y = tf.random.uniform((batch,), maxval=classes, dtype=tf.int32, seed=2)
    for _ in range(3):
        loop.train_step(x, y)
    loop.loss_sum.numpy()  # waits for the device
    started = time.perf_counter()
    for _ in range(steps):
        loop.train_step(x, y)
    loop.loss_sum.numpy()
    return (time.perf_counter() - started) / steps * 1000


def network_rows(
    device: dict[str, Any], batch: int, cpu: bool, names: list[str], precisions: list[str]
) -> list[dict[str, Any]]:
    skip = dict(unsupported_precisions(device))
    rows: list[dict[str, Any]] = []
    for name, candidate in networks().items():
        if name not in names:
            continue
        for precision in precisions:
            if precision in skip:
                print(f"skip {name} {precision}: {skip[precision]}")
                continue
            for xla in (False, True):
                with precision_policy(precision):
                    model = build_model(candidate, seed=0)
                    round_s = 0.05 if cpu else 0.2
                    # The product's protocol: interleaved with the reference network, with an interval.
                    # --cpu checks the script: warm-ups capped short (XLA on a CPU rarely settles).
                    warmup = 2.0 if cpu else None
                    reference = reference_forward(batch, warmup)
                    runs = [
                        measure_throughput(
                            model,
                            batch,
                            rounds=5 if cpu else 15,
                            round_seconds=round_s,
                            jit_compile=xla,
                            reference=reference,
                            warmup_seconds=warmup,
                        )
                        for _ in range(3)
                    ]
                    latency = measure_latency(
                        model, seconds=0.2 if cpu else 1.0, jit_compile=xla, warmup_seconds=warmup
                    )
                    step_batch = batch if name == "digits-small" else max(2, batch // 2)
                    step_ms = train_step_ms(
                        model, precision, xla, step_batch, candidate.num_classes, steps=3 if cpu else 20
                    )
                figures = [r.images_per_s for r in runs]
                row = {
                    "network": name,
                    "precision": precision,
                    "xla": xla,
                    "flops": count_flops(model),
                    "throughput": statistics.median(figures),
                    "repeat_spread": (max(figures) - min(figures)) / statistics.median(figures),
                    "within_spread": statistics.median(r.spread for r in runs),
                    "interval_width": statistics.median(
                        (r.high - r.low) / r.images_per_s for r in runs if r.high is not None and r.low is not None
                    ),
                    "latency_p50_ms": latency.p50_ms,
                    "latency_p95_ms": latency.p95_ms,
                    "train_step_batch": step_batch,
                    "train_step_ms": step_ms,
                }
                rows.append(row)
                print(json.dumps(row))
                keras.backend.clear_session(free_memory=True)
    return rows


def nas_run(folder: Path, *args: str) -> dict[str, Any]:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "nas", *args], cwd=folder, capture_output=True, text=True, timeout=300, check=False
    )
    tail = [line for line in result.stderr.splitlines() if line.strip()][-3:]
    return {
        "args": list(args),
        "exit": result.returncode,
        "wall_s": round(time.perf_counter() - started, 1),
        "tail": tail,
    }


def searches(folder: Path) -> dict[str, Any]:
    """Parts 3-5: nas itself on GPU 0, as a user runs it."""
    out: dict[str, Any] = {}
    storage = f"sqlite:///{folder / 'nas.db'}"
    for key, args in (
        ("search_gpu0", ["search", "tiny", "--gpus", "0", "--trials", "3", "--storage", storage]),
        (
            "two_workers_one_gpu",
            [
                "search",
                "tiny",
                "--study",
                "shared",
                "--gpus",
                "0",
                "--workers-per-gpu",
                "2",
                "--trials",
                "4",
                *["--storage", storage],
            ],
        ),
    ):
        run = nas_run(folder, *args)
        study = "tiny" if key == "search_gpu0" else "shared"
        if run["exit"] == 0:
            trials = optuna.load_study(study_name=study, storage=storage).trials
            run["trials"] = [
                {
                    "state": t.state.name,
                    "device": (t.user_attrs.get("device") or {}).get("name"),
                    "gpus_seen": (t.user_attrs.get("worker") or {}).get("gpus_seen"),
                    "gpu_memory_limit_mb": (t.user_attrs.get("worker") or {}).get("gpu_memory_limit_mb"),
                    "peak_source": t.user_attrs.get("peak_source"),
                }
                for t in trials
            ]
        out[key] = run
        print(json.dumps({key: run}))
    reason = tensorrt_engine_status()
    if reason:
        out["tensorrt_export"] = {"verdict": f"not run: {reason}"}
    elif out["search_gpu0"]["exit"] != 0:
        out["tensorrt_export"] = {"verdict": "not run: the 3-trial search failed"}
    else:
        run = nas_run(folder, "export", "tiny", "--format", "tensorrt", "--out", "trt", "--storage", storage)
        manifest = folder / "trt" / "manifest.json"
        run["verdict"] = json.loads(manifest.read_text())["verdict"] if manifest.is_file() else "no manifest"
        out["tensorrt_export"] = run
    print(json.dumps({"tensorrt_export": out["tensorrt_export"]}))
    return out


def main() -> None:
    # Every search here starts cold, as a new user's does: a device profile would skip measuring the device.
    os.environ.pop("NAS_DEVICE_PROFILE", None)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_check.json"))
    parser.add_argument("--batch", type=int, default=None, help="inference batch (default 128, 16 with --cpu)")
    parser.add_argument("--cpu", action="store_true", help="parts 1-2 on the CPU, to check the script itself")
    parser.add_argument("--networks", default="digits-small,mobilenetv2-224", help="comma-separated, of part 2")
    parser.add_argument(
        "--precisions", default=",".join(PRECISIONS), help="comma-separated policies of part 2 (default: all three)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    device = describe_device()
    if device["kind"] != "gpu" and not args.cpu:
        print(
            "Error: TensorFlow sees no GPU here; run this on a GPU machine (or --cpu to check the script)",
            file=sys.stderr,
        )
        sys.exit(2)
    batch = args.batch or (16 if args.cpu else 128)
    report: dict[str, Any] = {"device": device, "peaks": peaks(device, args.cpu)}
    names = args.networks.split(",")
    if unknown := set(names) - set(networks()):
        parser.error(f"unknown network(s) {sorted(unknown)}; choose from {sorted(networks())}")
    precisions = args.precisions.split(",")
    if unknown := set(precisions) - set(PRECISIONS):
        parser.error(f"unknown precision(s) {sorted(unknown)}; choose from {list(PRECISIONS)}")
    report["rows"] = network_rows(device, batch, args.cpu, names, precisions)
    if args.cpu:
        report["searches"] = {"not_run": "--cpu: parts 3-5 need GPU 0"}
    else:
        with tempfile.TemporaryDirectory() as folder:
            report["searches"] = searches(Path(folder))
    report["seconds"] = round(time.perf_counter() - started, 1)
    args.out.write_text(json.dumps(report, indent=2, default=str))
    print_tables(report)


def print_tables(report: dict[str, Any]) -> None:
    device = report["device"]
    print(
        f"\nDevice: {device.get('name')} (compute capability {device.get('compute_capability')}, "
        f"TF32 {device.get('tf32')}), TF {device['tensorflow']}, CUDA {device['cuda']}, cuDNN {device['cudnn']}; "
        f"{report['seconds']:.0f} s\n"
    )
    print("| compute type | measured matmul peak | data sheet | measured / data sheet |")
    print("|---|---|---|---|")
    for p in report["peaks"]:
        sheet = p["data_sheet_flops_per_s"]
        ratio = f"{p['measured_flops_per_s'] / sheet:.2f}" if sheet else "-"
        where = f"{sheet / 1e12:,.1f} TFLOP/s ({p['data_sheet']})" if sheet else "-"
        print(f"| {p['dtype']} | {p['measured_flops_per_s'] / 1e12:,.2f} TFLOP/s | {where} | {ratio} |")
    print()
    print(
        "| network | precision | XLA | images/s | vs float32 | repeat spread | 95% interval width "
        "| latency p50/p95 ms | train step ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    rows = report["rows"]
    for row in rows:
        base = next(
            r for r in rows if r["network"] == row["network"] and r["precision"] == "float32" and r["xla"] == row["xla"]
        )
        print(
            f"| {row['network']} | {row['precision']} | {'on' if row['xla'] else 'off'} | {row['throughput']:,.0f} | "
            f"{row['throughput'] / base['throughput']:.2f}x | {row['repeat_spread']:.1%} | "
            f"{row['interval_width']:.1%} | "
            f"{row['latency_p50_ms']:.2f}/{row['latency_p95_ms']:.2f} | "
            f"{row['train_step_ms']:.1f} (batch {row['train_step_batch']}) |"
        )
    print()
    for key, run in report["searches"].items():
        print(f"{key}: {json.dumps(run)}")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()

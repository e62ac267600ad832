"""What the block type, the stem's width and a dense head layer cost and buy on Fashion-MNIST
at 28x28: the evidence for what spaces/fashion_mnist.yaml searches (issue 62, item 3).

One base network (stem stride 1, width 0.75, four stages of depth 2, kernel 3, expansion 3,
no SE; the preset's corner that its accurate networks sat in) in variants that change one
thing each: MBConv everywhere, fused blocks in the first two stages, fused everywhere, and
the early-fused one with a 32-filter stem or a 1,024-unit head layer (the 2-conv network's).
Each is trained `--epochs` epochs with the search's recipe (Adam, 0.004, batch 128, seed 0)
on the 50,000 search images and scored on the 10,000 validation images; then all of them,
the 2-conv network and ResNet-20 are measured together by nas' protocol. A variant's figures
are written as it ends (benchmarks/fashion-blocks/), so a killed run resumes:

    python -m benchmarks.fashion_blocks [--epochs 3]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks import stamps

OUT = Path(__file__).resolve().parent / "fashion-blocks"
COMMAND = "python -m benchmarks.fashion_blocks"
VARIANTS: dict[str, dict[str, Any]] = {
    "mbconv": {"blocks": ("mbconv",) * 4},
    "fused_early": {"blocks": ("fused", "fused", "mbconv", "mbconv")},
    "fused_all": {"blocks": ("fused",) * 4},
    "fused_early_stem32": {"blocks": ("fused", "fused", "mbconv", "mbconv"), "stem_filters": 32},
    "fused_early_head1024": {"blocks": ("fused", "fused", "mbconv", "mbconv"), "head_hidden": 1024},
}


def candidate(variant: dict[str, Any], epochs: int) -> Any:
    from nas.search.space import Candidate, StagePlan

    stages = tuple(
        StagePlan(filters, stride, 2 if i else 1, 3, 1.0 if i == 0 else 3.0, False, block=block)
        for i, (filters, stride, block) in enumerate(
            zip((16, 24, 48, 96), (1, 2, 2, 2), variant["blocks"], strict=True)
        )
    )
    return Candidate(
        num_classes=10,
        image_size=28,
        channels=1,
        width_multiplier=0.75,
        stem_filters=variant.get("stem_filters", 16),
        stem_stride=1,
        head_filters=256,
        dropout=0.1,
        stages=stages,
        epochs=epochs,
        batch_size=128,
        optimizer="adam",
        learning_rate=0.004,
        head_hidden=variant.get("head_hidden", 0),
    )


def train(name: str, epochs: int) -> None:
    out = OUT / f"{name}.json"
    if out.is_file():
        print(f"{name}: done ({out})")
        return
    from nas.search.data import load_dataset
    from nas.search.nets import build_model, plan_network
    from nas.search.space import load_space
    from nas.search.training import train_and_evaluate

    data = load_dataset(load_space("fashion_mnist").spec.dataset)
    c = candidate(VARIANTS[name], epochs)
    net = plan_network(c)
    model = build_model(c, seed=0)
    result = train_and_evaluate(
        model, c, data, seed=0, on_epoch=lambda e, n, logs: print(f"{name}: epoch {e}/{n} {logs}", flush=True)
    )
    OUT.mkdir(parents=True, exist_ok=True)
    figures = {
        "command": COMMAND + f" --epochs {epochs}",
        "commit": stamps.commit(),
        "machine": stamps.machine(),
        "date": stamps.now(),
        "variant": name,
        "params": net.params(),
        "flops": net.flops(),
        "epochs": epochs,
        "val_accuracy": round(result.accuracy, 5),
        "train_seconds": round(result.seconds, 1),
        "history": {k: [round(v, 5) for v in vs] for k, vs in result.history.items()},
    }
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"{name}: validation accuracy {result.accuracy:.4f}, {net.params():,} params, {net.flops():,} FLOPs")


def measure() -> None:
    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    import keras

    from benchmarks.fashion_references import REFERENCES
    from benchmarks.fashion_report import measure_together_now
    from nas.search.nets import build_model
    from nas.search.space import load_space

    models = [(name, build_model(candidate(v, 1), seed=0)) for name, v in VARIANTS.items()]
    for name in ("two_conv_bn", "resnet20"):
        keras.utils.set_random_seed(0)
        models.append((name, REFERENCES[name][0]()))
    result = {"command": COMMAND} | measure_together_now(models, load_space("fashion_mnist"))
    (OUT / "throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    for name, f in result["networks"].items():
        print(f"{name}: {f['images_per_s']:,.0f} img/s [{f['low']:,.0f}, {f['high']:,.0f}], {f['params']:,} params")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    from nas.search import runtime

    runtime.set_debug(False)
    for name in VARIANTS:
        train(name, args.epochs)
    measure()


if __name__ == "__main__":
    main()

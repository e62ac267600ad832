"""How fast the input pipeline delivers images, against how fast a model trains on them.

    python -m benchmarks.pipeline [--batch-size 64]

For the built-in digits at 32x32 and 96x96, and for the same digits written as an image
folder (JPEG/PNG, decoded once and cached), in memory and memory-mapped from disk: the
decode rate (images/s, first read) and the delivery rate of the training pipeline
(images/s, batches of [0, 1] floats, no model), next to the training throughput of a
mid-sized `mobilenet` candidate on the same data.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args()

    from nas.search import runtime

    runtime.import_tensorflow()
    import optuna

    from nas.search.data import delivery_rate, load_dataset
    from nas.search.nets import build_model
    from nas.search.space import DatasetSpec, load_space
    from nas.search.training import train_and_evaluate

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["NAS_CACHE_DIR"] = str(Path(tmp) / "cache")
        folder = Path(tmp) / "images"
        subprocess.run(
            [sys.executable, str(HERE.parent / "examples" / "image_folder" / "make_folder.py"), "--out", str(folder)],
            check=True,
            capture_output=True,
        )
        cases = [
            ("digits", 32, {}),
            ("digits", 96, {}),
            ("folder", 32, {"source": "folder", "path": str(folder), "channels": 3, "cache": "memory"}),
            ("folder", 96, {"source": "folder", "path": str(folder), "channels": 3, "cache": "memory"}),
            ("folder, disk", 96, {"source": "folder", "path": str(folder), "channels": 3, "cache": "disk"}),
        ]
        space = load_space("mobilenet")
        for label, size, extra in cases:
            spec = DatasetSpec.model_validate({"image_size": size, **extra})
            data = load_dataset(spec)
            delivery = delivery_rate(data, args.batch_size, seconds=3.0)
            trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(0)).ask()
            candidate = space.sample(trial, num_classes=data.num_classes, channels=data.channels)
            # The network runs at the data's size (the preset's `resolution` would resize to 16 inside).
            candidate = dataclasses.replace(
                candidate, image_size=size, resolution=size, epochs=2, batch_size=args.batch_size
            )
            model = build_model(candidate, seed=0)
            trained = train_and_evaluate(model, candidate, data, seed=0)
            rows.append(
                {
                    "data": label,
                    "size": size,
                    "cache": data.info.get("cache", "memory"),
                    "decode_images_per_s": data.info.get("decode_images_per_s"),
                    "delivery_images_per_s": round(delivery),
                    "train_images_per_s": round(trained.images_per_s),
                    "headroom": round(delivery / trained.images_per_s, 1),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    print()
    print("| data | size | cache | decode (img/s) | pipeline delivers (img/s) | training consumes (img/s) | headroom |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        decode = f"{r['decode_images_per_s']:,.0f}" if r["decode_images_per_s"] else "-"
        print(
            f"| {r['data']} | {r['size']}x{r['size']} | {r['cache']} | {decode} | {r['delivery_images_per_s']:,} "
            f"| {r['train_images_per_s']:,} | {r['headroom']}x |"
        )


if __name__ == "__main__":
    main()

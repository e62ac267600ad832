"""Write an image folder to search: scikit-learn's digits as 32x32 RGB JPEG and PNG files,
one sub-folder per class, the layout `dataset.source: folder` reads.

    python examples/image_folder/make_folder.py [--out examples/image_folder/images]
    nas search examples/image_folder/space.yaml
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

from nas.search import runtime

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def main() -> None:
    parser = argparse.ArgumentParser(description="Write digits as an image folder.")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "images")
    args = parser.parse_args()
    tf = runtime.import_tensorflow()
    digits = load_digits()
    rng = np.random.default_rng(0)
    for i, (image, label) in enumerate(zip(digits.images, digits.target, strict=True)):
        folder = args.out / NAMES[label]
        folder.mkdir(parents=True, exist_ok=True)
        gray = np.round(image * (255 / 16)).astype(np.uint8)[..., np.newaxis]
        # Tint each digit with a random colour so the three channels carry something.
        rgb = (gray * rng.uniform(0.5, 1.0, size=3)).astype(np.uint8)
        big = tf.cast(tf.image.resize(rgb, (32, 32), method="bilinear"), tf.uint8)
        if i % 2:
            (folder / f"{i:04d}.png").write_bytes(tf.io.encode_png(big).numpy())
        else:
            (folder / f"{i:04d}.jpg").write_bytes(tf.io.encode_jpeg(big, quality=90).numpy())
    print(f"wrote {len(digits.target)} images in {len(NAMES)} class folders under {args.out}")


if __name__ == "__main__":
    main()

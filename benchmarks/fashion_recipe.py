"""The final recipe on Fashion-MNIST, measured on one fixed network (issue 62, item 5): random
erasing and the epoch count, each against the preset's recipe as it was (15 epochs, flips, a
10% crop, label smoothing 0.1, a 1-epoch warm-up, Adam at 0.004 with cosine decay, batch 128,
on the 60,000 training images), and both together; each variant trained from scratch in nas'
own training loop and scored once on the 10,000 test images. Seeds 0 and 1 of every variant
(`--seeds`), so a difference is read against the spread of two trainings of the same recipe.

The network is benchmarks/fashion_blocks.py's `fused_early` (fused blocks in the first two
stages, 119,242 parameters). A checkpoint per epoch: a run stopped by --minutes resumes at its
last epoch; each finished training writes its JSON (benchmarks/fashion-recipe/):

    python -m benchmarks.fashion_recipe [--minutes 55] [--seeds 2]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks import stamps
from benchmarks.fashion_blocks import VARIANTS, candidate

OUT = Path(__file__).resolve().parent / "fashion-recipe"
COMMAND = "python -m benchmarks.fashion_recipe"
TODAY = {"epochs": 15, "erasing": 0.0}
RECIPES: dict[str, dict[str, Any]] = {
    "today": TODAY,
    "erasing": {"epochs": 15, "erasing": 0.5},
    "epochs30": {"epochs": 30, "erasing": 0.0},
    "erasing_epochs30": {"epochs": 30, "erasing": 0.5},
}


class _Stop(Exception):
    pass


def train(name: str, seed: int, deadline: float) -> bool:
    """One recipe's training of seed `seed`; False when the deadline stopped it (resumable)."""
    out = OUT / f"{name}-seed{seed}.json"
    if out.is_file():
        print(f"{name} seed {seed}: done ({out})")
        return True
    from nas.search.data import load_dataset
    from nas.search.engine.final import final_data, final_recipe
    from nas.search.nets import build_model
    from nas.search.space import AugmentationSpec, load_space
    from nas.search.training import train_and_evaluate
    from nas.search.training.checkpoint import EpochCheckpoint
    from nas.search.training.scoring import evaluate

    space = load_space("fashion_mnist")
    spec = space.spec.final.model_copy(update={"seed": seed})
    recipe_knobs = RECIPES[name]
    augmentation = AugmentationSpec(flip="horizontal", crop=0.1, erasing=recipe_knobs["erasing"])
    c = replace(candidate(VARIANTS["fused_early"], recipe_knobs["epochs"]), learning_rate=0.004, batch_size=128)
    train_data, test = final_data(load_dataset(space.spec.dataset), "train+validation")
    recipe = final_recipe(spec, c, augmentation, network="fused_early", variant=name)
    recipe.update(warmup_epochs=1, label_smoothing=0.1)
    OUT.mkdir(parents=True, exist_ok=True)
    checkpoint = EpochCheckpoint(OUT / "checkpoints" / f"{name}-seed{seed}.ckpt.npz", recipe)
    model = build_model(c, seed=seed)

    def on_epoch(epoch: int, epochs: int, logs: dict[str, float]) -> None:
        print(f"{name} seed {seed}: epoch {epoch}/{epochs}, loss {logs['loss']:.4f}", flush=True)
        if time.monotonic() > deadline and epoch < epochs:
            raise _Stop

    started = time.monotonic()
    try:
        result = train_and_evaluate(
            model,
            c,
            train_data,
            seed=seed,
            on_epoch=on_epoch,
            augmentation=augmentation,
            label_smoothing=0.1,
            warmup_epochs=1,
            checkpoint=checkpoint,
        )
    except _Stop:
        print(f"{name} seed {seed}: stopped at the deadline; run the same command to resume", flush=True)
        return False
    _, accuracy = evaluate(model, test)
    figures = {
        "command": COMMAND,
        "commit": stamps.commit(),
        "machine": stamps.machine(),
        "date": stamps.now(),
        "variant": name,
        "seed": seed,
        "test_accuracy": round(accuracy, 5),
        "recipe": recipe,
        "history": {k: [round(v, 5) for v in vs] for k, vs in result.history.items()},
        "train_seconds_last_piece": round(time.monotonic() - started, 1),
    }
    out.write_text(json.dumps(figures, indent=2) + "\n")
    checkpoint.remove()
    print(f"{name} seed {seed}: test accuracy {accuracy:.4f}", flush=True)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=55)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    from nas.search import runtime

    runtime.set_debug(False)
    deadline = time.monotonic() + args.minutes * 60
    for seed in range(args.seeds):
        for name in RECIPES:
            if not train(name, seed, deadline):
                return


if __name__ == "__main__":
    main()

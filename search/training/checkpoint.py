"""A training's state after each epoch, so a killed training (`nas train`, kill -9 included)
resumes after its last finished epoch instead of starting again.

One .npz per training: the model's weights, the optimizer's variables (its step count, so the
learning-rate schedule goes on where it was, and Adam's moments), the epochs done and their
history, and the recipe it was made with. Written to a temporary file and renamed over the old
one, so a kill during the write leaves the previous epoch's checkpoint whole. Keras' own
`.keras` files hold a model and the optimizer it was compiled with; this loop's optimizer is
not the model's, hence this small file of arrays.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import keras
import numpy as np


class EpochCheckpoint:
    def __init__(self, path: Path, recipe: dict[str, Any]) -> None:
        self.path = path
        self.recipe = json.loads(json.dumps(recipe, sort_keys=True, default=str))

    def progress(self) -> int:
        """Epochs done in a checkpoint of this recipe; 0 without one."""
        if not self.path.is_file():
            return 0
        with np.load(self.path, allow_pickle=False) as held:
            meta = json.loads(str(held["meta"]))
        return int(meta["epoch"]) if meta["recipe"] == self.recipe else 0

    def load(self, model: keras.Model, optimizer: keras.optimizers.Optimizer) -> tuple[int, dict[str, list[float]]]:
        """(epochs done, their history) after restoring the model and the optimizer; (0, {})
        when there is no checkpoint, or one made by another recipe."""
        if not self.path.is_file():
            return 0, {}
        with np.load(self.path, allow_pickle=False) as held:
            meta = json.loads(str(held["meta"]))
            if meta["recipe"] != self.recipe:
                return 0, {}
            weights = [held[f"w{i}"] for i in range(meta["weights"])]
            variables = [held[f"o{i}"] for i in range(meta["optimizer"])]
        if len(variables) != len(optimizer.variables) or len(weights) != len(model.weights):
            return 0, {}  # another network's (the recipe matched, the trial did not): start afresh
        model.set_weights(weights)
        for variable, value in zip(optimizer.variables, variables, strict=True):
            variable.assign(value)
        return int(meta["epoch"]), meta["history"]

    def save(
        self, epoch: int, model: keras.Model, optimizer: keras.optimizers.Optimizer, history: dict[str, list[float]]
    ) -> None:
        weights = model.get_weights()
        variables = [np.asarray(v) for v in optimizer.variables]
        meta = {
            "epoch": epoch,
            "history": history,
            "recipe": self.recipe,
            "weights": len(weights),
            "optimizer": len(variables),
        }
        arrays = {f"w{i}": w for i, w in enumerate(weights)} | {f"o{i}": v for i, v in enumerate(variables)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".partial")
        with partial.open("wb") as handle:
            np.savez(handle, meta=np.array(json.dumps(meta)), **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

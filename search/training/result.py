"""What a training gave, as plain data (train.py trains). No TensorFlow, so the engine's loop
and a tabulated benchmark read it without loading any."""

from __future__ import annotations

from dataclasses import dataclass

# Images per batch when a trained model is scored on held-out images (scoring.py); halving
# rounds its subsets to whole batches of it.
SCORE_BATCH = 256


@dataclass(frozen=True)
class TrainResult:
    accuracy: float  # validation accuracy of the trained model
    loss: float
    history: dict[str, list[float]]  # per epoch: loss, accuracy, val_loss, val_accuracy, seconds
    seconds: float
    images_per_s: float  # training images per second after the first epoch (which traces)

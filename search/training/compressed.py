"""Training with the trial's pruning method: magnitude and N:M inside the training loop,
channel pruning as two phases around a cut of the network."""

from __future__ import annotations

import math
from dataclasses import replace

import keras

from nas.search.data import Dataset
from nas.search.nets import NetworkPlan, build_plan, transfer
from nas.search.space import AugmentationSpec, Candidate, PruningSpec
from nas.search.training.result import TrainResult
from nas.search.training.train import EpochCallback, train_and_evaluate


def train_compressed(
    model: keras.Model,
    net_full: NetworkPlan,
    net: NetworkPlan,
    candidate: Candidate,
    data: Dataset,
    *,
    seed: int,
    pruning: PruningSpec,
    augmentation: AugmentationSpec | None,
    on_epoch: EpochCallback = lambda *_: None,
    label_smoothing: float = 0.0,
    warmup_epochs: int = 0,
) -> tuple[keras.Model, TrainResult]:
    """Train `model` (built from `net`); returns the trained model and its result.

    Channel pruning trains the full network (`net_full`) for the first `begin` of the epochs,
    cuts it to `net` (the network that is measured and deployed), hands the kept weights to
    `model` and trains that for the rest."""
    if candidate.pruning != "channel" or candidate.epochs < 2:
        result = train_and_evaluate(
            model,
            candidate,
            data,
            seed=seed,
            on_epoch=on_epoch,
            augmentation=augmentation,
            pruning=pruning,
            label_smoothing=label_smoothing,
            warmup_epochs=warmup_epochs,
        )
        return model, result
    first = min(candidate.epochs - 1, max(1, round(pruning.begin * candidate.epochs)))
    full = build_plan(net_full)
    early = train_and_evaluate(
        full,
        replace(candidate, epochs=first),
        data,
        seed=seed,
        on_epoch=on_epoch,
        augmentation=augmentation,
        label_smoothing=label_smoothing,
        warmup_epochs=warmup_epochs,
    )
    transfer(full, model, net_full, net)
    # Continue the cosine schedule where the first phase left it.
    rate = candidate.learning_rate * 0.5 * (1 + math.cos(math.pi * first / candidate.epochs))
    late = train_and_evaluate(
        model,
        replace(candidate, epochs=candidate.epochs - first, learning_rate=rate),
        data,
        seed=seed + 1,
        on_epoch=lambda e, n, logs: on_epoch(first + e, candidate.epochs, logs),
        augmentation=augmentation,
        label_smoothing=label_smoothing,
    )
    history = {k: early.history[k] + late.history[k] for k in early.history}
    return model, replace(late, history=history, seconds=early.seconds + late.seconds)

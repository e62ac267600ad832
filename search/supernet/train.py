"""Training the supernet: the sandwich rule with in-place distillation, a checkpoint per epoch.

Each step trains the largest subnet on the labels, and the smallest and two random subnets on
the largest's predictions (BigNAS' sandwich rule and in-place distillation): the gradients of
all four are summed into one update of the shared weights. After every epoch the weights and
the optimizer's state are written to one checkpoint file (atomically), so a killed training
resumes from its last finished epoch with the same state it would have had.

With `sort_after` the hidden, squeeze-and-excitation and head channels are sorted by
importance once, after that epoch (network.py: Supernet.sort_channels, before the checkpoint,
so a resumed training holds the sorted weights); the subnets trained after it start from the
channels that matter most to the largest network, as in Once-for-All, whose elastic-width
phase starts from sorted channels.

With `schedule="progressive"` (Once-for-All's progressive shrinking) the epochs are phases
(space/elastic.py: progressive_phases, a function of the epoch alone, so a resumed training
is in the phase it was killed in): the sandwich's smallest and random subnets vary only the
dimensions opened so far, the rest at their largest. In the first phase every subnet is the
largest, so the step trains the largest network alone (its students distil from themselves:
no gradient, where there is no dropout). Each epoch's history names its phase.

With `score`, three reference subnets are scored after each epoch (engine/supernet.py) and
their accuracies kept in that epoch's history, before the checkpoint, so they survive a resume.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nas.search.data import Dataset, pipeline
from nas.search.nets import NetworkPlan, plan_network
from nas.search.space.elastic import ElasticSpace, progressive_phases
from nas.search.supernet.network import Supernet
from nas.search.supernet.steps import SANDWICH, SandwichStep, draw_sandwich
from nas.search.training.train import make_optimizer

EpochCallback = Callable[[int, int, dict[str, Any]], None]
# The reference subnets' accuracies of the supernet as it is (engine/supernet.py).
ReferenceScore = Callable[[Supernet], dict[str, float]]


def sort_epoch(epochs: int, sort_channels: bool) -> int:
    """The epoch after which channels are sorted: a quarter into the training, when the
    largest network's weights say which channels matter, with three quarters left for the
    subnets to train on the new order; 0 (never) where no epoch is left after it."""
    after = max(1, epochs // 4)
    return after if sort_channels and after < epochs else 0


@dataclass
class SupernetTraining:
    epochs: int
    done: int = 0  # epochs finished (and checkpointed)
    history: list[dict[str, Any]] = field(default_factory=list)
    # The space's fingerprint the weights were trained for: a checkpoint of another space left in
    # a study's folder (a new database, the same study name) must not pass for this one's.
    space: str = ""


def _optimizer_for(supernet: Supernet, steps: int) -> Any:
    c = supernet.candidate
    optimizer = make_optimizer(c.optimizer, c.learning_rate, steps)
    optimizer.build(supernet.trainable_variables)
    return optimizer


def save_checkpoint(path: Path, supernet: Supernet, optimizer: Any, training: SupernetTraining) -> None:
    arrays = {f"w:{key}": value for key, value in supernet.get_state().items()}
    arrays |= {f"o:{i}": np.asarray(v.numpy()) for i, v in enumerate(optimizer.variables)}
    arrays["done"] = np.array(training.done, np.int64)
    arrays["epochs"] = np.array(training.epochs, np.int64)  # the plan: `epochs: auto` decides it once
    arrays["history"] = np.array(json.dumps(training.history))
    arrays["space"] = np.array(training.space)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, allow_pickle=False, **arrays)
    os.replace(tmp, path)  # a kill mid-write leaves the previous epoch's checkpoint whole


def checkpoint_progress(path: Path) -> SupernetTraining:
    """The epochs a checkpoint holds, without reading its weights (an npz reads keys lazily)."""
    with np.load(path) as data:
        space = str(data["space"]) if "space" in data.files else ""  # older checkpoints hold none
        epochs = int(data["epochs"]) if "epochs" in data.files else 0
        return SupernetTraining(epochs, int(data["done"]), json.loads(str(data["history"])), space)


def load_checkpoint(path: Path, supernet: Supernet, optimizer: Any | None = None) -> SupernetTraining:
    """Restore the weights (and the optimizer's state); the training as far as the file holds it."""
    with np.load(path) as data:
        supernet.set_state({key[2:]: data[key] for key in data.files if key.startswith("w:")})
        if optimizer is not None:
            for i, v in enumerate(optimizer.variables):
                v.assign(data[f"o:{i}"])
        history = json.loads(str(data["history"]))
        return SupernetTraining(epochs=0, done=int(data["done"]), history=history)


def train_supernet(
    supernet: Supernet,
    elastic: ElasticSpace,
    data: Dataset,
    training: SupernetTraining,
    checkpoint: Path,
    *,
    seed: int,
    on_epoch: EpochCallback = lambda *_: None,
    sort_after: int = 0,
    schedule: str = "sandwich",
    score: ReferenceScore | None = None,
    random_subnets: int = SANDWICH - 2,
    distillation: str = "kl",
) -> SupernetTraining:
    """Train to `training.epochs`, from the epochs `checkpoint` holds where it exists, and
    checkpoint after each epoch."""
    c = supernet.candidate
    steps_per_epoch = math.ceil(len(data.y_train) / c.batch_size)
    optimizer = _optimizer_for(supernet, steps_per_epoch * training.epochs)
    if checkpoint.exists():
        # The file is written before the study records the epoch: it is the one to trust.
        held = load_checkpoint(checkpoint, supernet, optimizer)
        training.done, training.history = held.done, held.history
    size = random_subnets + 2
    step = SandwichStep(supernet, data.x_train.shape[1:], optimizer, size=size, distill=distillation == "kl")

    def plan(params: dict[str, Any]) -> NetworkPlan:
        return plan_network(elastic.space.candidate(params, num_classes=c.num_classes, channels=c.channels))

    largest, smallest = plan(elastic.largest), plan(elastic.smallest)
    phases = progressive_phases(training.epochs, elastic.dimensions()) if schedule == "progressive" else None
    for epoch in range(training.done + 1, training.epochs + 1):
        t0 = time.perf_counter()
        # Seeded by epoch: a resumed training draws the subnets an unbroken one would have.
        rng = np.random.default_rng([seed, epoch])
        keep: dict[str, Any] = {}
        if phases is not None:
            opened = elastic.opened(phases[epoch - 1])
            keep = elastic.closed(opened)
            smallest = plan(elastic.smallest_within(opened))
        total, seen, hits = 0.0, 0, np.zeros(size)
        for x, y in pipeline(data.x_train, data.y_train, c.batch_size, shuffle_seed=seed + epoch):
            sandwich = draw_sandwich(elastic, rng, keep, (largest, smallest), plan, random_subnets)
            loss, correct = step(x, y, sandwich)
            total += float(loss) * int(y.shape[0])
            seen += int(y.shape[0])
            hits += correct.numpy()
        loss = total / max(seen, 1)
        if not math.isfinite(loss):
            raise ValueError(f"the supernet's training loss became {loss} in epoch {epoch}")
        figures: dict[str, Any] = {
            "loss": round(loss, 5),
            "largest_accuracy": round(float(hits[0]) / max(seen, 1), 5),
            "smallest_accuracy": round(float(hits[1]) / max(seen, 1), 5),
            "seconds": round(time.perf_counter() - t0, 3),
        }
        if phases is not None:
            figures["phase"] = phases[epoch - 1]
        if epoch == sort_after:
            supernet.sort_channels(optimizer)
            figures["sorted_channels"] = 1.0
        if score is not None:  # the weights as checkpointed (sorted, where they were)
            t1 = time.perf_counter()
            figures["reference_accuracy"] = score(supernet)
            figures["reference_seconds"] = round(time.perf_counter() - t1, 3)
        training.done = epoch
        training.history.append(figures)
        save_checkpoint(checkpoint, supernet, optimizer, training)
        on_epoch(epoch, training.epochs, figures)
    return training

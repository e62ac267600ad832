"""Training the supernet: the sandwich rule with in-place distillation, a checkpoint per epoch.

Each step trains the largest subnet on the labels, and the smallest and two random subnets on
the largest's predictions (BigNAS' sandwich rule and in-place distillation): the gradients of
all four are summed into one update of the shared weights. After every epoch the weights and
the optimizer's state are written to one checkpoint file (atomically), so a killed training
resumes from its last finished epoch with the same state it would have had.

With `sort_channels` the hidden, squeeze-and-excitation and head channels are sorted by
importance once, a quarter into the training (sort_epoch) (network.py: Supernet.sort_channels, before the checkpoint,
so a resumed training holds the sorted weights); the subnets trained after it start from the
channels that matter most to the largest network, as in Once-for-All, whose elastic-width
phase starts from sorted channels.

With `schedule="progressive"` (Once-for-All's progressive shrinking) the epochs are phases
(elastic.py: progressive_phases, a function of the epoch alone, so a resumed training
is in the phase it was killed in): the sandwich's smallest and random subnets vary only the
dimensions opened so far, the rest at their largest. In the first phase every subnet is the
largest, so the step trains the largest network alone (its students distil from themselves:
no gradient, where there is no dropout). Each epoch's history names its phase.

With `score`, three reference subnets are scored after each epoch (evaluation.py) and
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

import keras
import numpy as np

from nas.search.data import Dataset, pipeline
from nas.search.nets import NetworkPlan, plan_network
from nas.search.strategies.supernet.elastic import LARGEST_PHASE, ElasticSpace, progressive_phases
from nas.search.strategies.supernet.network import Supernet
from nas.search.strategies.supernet.steps import ENDS, SANDWICH, SandwichStep, draw_sandwich
from nas.search.training import make_optimizer

EpochCallback = Callable[[int, int, dict[str, Any]], None]
# The reference subnets' accuracies of the supernet as it is (evaluation.py).
ReferenceScore = Callable[[Supernet], dict[str, float]]
# `epochs: auto`: (the first epoch's seconds, its tracing seconds, the fewest epochs) -> the count.
DecideEpochs = Callable[[float, float, int], int]


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


def _optimizer_for(supernet: Supernet, steps: int) -> tuple[Any, Any]:
    """The optimizer, and the variable that holds its cosine schedule's length in steps: read
    by the traced step at run time, so `epochs: auto` can set it after the first epoch without
    tracing again (make_optimizer). Not one of the
    optimizer's variables: checkpoints hold the same arrays as before."""
    c = supernet.candidate
    total = keras.Variable(float(max(1, steps)), trainable=False, dtype="float32", name="supernet_schedule_steps")
    optimizer = make_optimizer(c.optimizer, c.learning_rate, total)
    optimizer.build(supernet.trainable_variables)
    return optimizer, total


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
    sort_channels: bool = False,
    schedule: str = "sandwich",
    score: ReferenceScore | None = None,
    random_subnets: int = SANDWICH - 2,
    distillation: str = "kl",
    decide: DecideEpochs | None = None,
) -> SupernetTraining:
    """Train to `training.epochs`, from the epochs `checkpoint` holds where it exists, and
    checkpoint after each epoch. `training.epochs` 0 (`epochs: auto`, not decided yet): the
    first epoch is trained, then `decide(its seconds, its tracing seconds, minimum)` gives the
    count (budget.py) and the learning rate's schedule is stretched to it."""
    c = supernet.candidate
    steps_per_epoch = math.ceil(len(data.y_train) / c.batch_size)
    if checkpoint.exists():
        training.epochs = training.epochs or checkpoint_progress(checkpoint).epochs
    if not training.epochs and decide is None:
        raise ValueError("a supernet training of undecided length needs `decide`")
    # Until the count is decided, a cosine of 12 epochs: the first epoch sits at its flat top.
    optimizer, schedule_steps = _optimizer_for(supernet, steps_per_epoch * (training.epochs or 12))
    if checkpoint.exists():
        # The file is written before the study records the epoch: it is the one to trust.
        held = load_checkpoint(checkpoint, supernet, optimizer)
        training.done, training.history = held.done, held.history
    size = random_subnets + 2
    progressive = schedule == "progressive"
    # Progressive shrinking moves the smallest each phase: fixed in the graph, it would cost a
    # trace per phase; the largest never moves.
    distill, fixed = distillation == "kl", 1 if progressive else ENDS
    step = SandwichStep(supernet, data.x_train.shape[1:], optimizer, size=size, distill=distill, fixed=fixed)

    def plan(params: dict[str, Any]) -> NetworkPlan:
        return plan_network(elastic.space.candidate(params, num_classes=c.num_classes, channels=c.channels))

    smallest_params = elastic.smallest
    dimensions = elastic.dimensions()

    def ends_of(small: dict[str, Any]) -> list[tuple[NetworkPlan, NetworkPlan]]:
        """The sandwich's (largest, smallest); where block types are searched, also the pair in
        the swapped types: steps take them in turn, so each type is the largest on the labels."""
        pairs = [(plan(elastic.largest), plan(small))]
        if elastic.block_types():
            pairs.append((plan(elastic.swapped(elastic.largest)), plan(elastic.swapped(small))))
        return pairs

    def phase_of(epoch: int) -> str | None:
        if not progressive:
            return None
        # Undecided: the first epoch of a progressive training is the largest network's (decide
        # gives it enough epochs for a phase each, so that progressive_phases agrees).
        return progressive_phases(training.epochs, dimensions)[epoch - 1] if training.epochs else LARGEST_PHASE

    epoch = training.done + 1
    while epoch <= (training.epochs or 1):
        t0 = time.perf_counter()
        # Seeded by epoch: a resumed training draws the subnets an unbroken one would have.
        rng = np.random.default_rng([seed, epoch])
        keep: dict[str, Any] = {}
        phase = phase_of(epoch)
        if phase is not None:
            opened = elastic.opened(phase)
            keep = elastic.closed(opened)
            smallest_params = elastic.smallest_within(opened)
        ends = ends_of(smallest_params)
        total, seen, hits, tracing = 0.0, 0, np.zeros(size), 0.0
        batches = pipeline(data.x_train, data.y_train, c.batch_size, shuffle_seed=seed + epoch)
        for i, (x, y) in enumerate(batches):
            sandwich = draw_sandwich(elastic, rng, keep, ends[i % len(ends)], plan, random_subnets)
            traced = step.is_traced(sandwich)
            t1 = time.perf_counter()
            loss, correct = step(x, y, sandwich)
            total += float(loss) * int(y.shape[0])
            if not traced:  # this step built a graph first: later epochs reuse it
                tracing += time.perf_counter() - t1
            seen += int(y.shape[0])
            hits += correct.numpy()
        loss = total / max(seen, 1)
        if not math.isfinite(loss):
            raise ValueError(f"the supernet's training loss became {loss} in epoch {epoch}")
        figures: dict[str, Any] = {
            "loss": round(loss, 5),
            "largest_accuracy": round(float(hits[0]) / max(seen, 1), 5),
            "smallest_accuracy": round(float(hits[1]) / max(seen, 1), 5),
            "learning_rate": round(float(optimizer.learning_rate), 8),  # at the epoch's end
            "seconds": round(time.perf_counter() - t0, 3),
        }
        if phase is not None:
            figures["phase"] = phase
        if epoch == sort_epoch(training.epochs, sort_channels):
            supernet.sort_channels(optimizer)
            figures["sorted_channels"] = 1.0
        if score is not None:  # the weights as checkpointed (sorted, where they were)
            t1 = time.perf_counter()
            figures["reference_accuracy"] = score(supernet)
            figures["reference_seconds"] = round(time.perf_counter() - t1, 3)
        if not training.epochs:
            assert decide is not None
            minimum = len(dimensions) + 1 if progressive else 1
            training.epochs = decide(time.perf_counter() - t0, tracing, minimum)
            schedule_steps.assign(float(steps_per_epoch * training.epochs))
            figures["decided_epochs"] = training.epochs
        training.done = epoch
        training.history.append(figures)
        save_checkpoint(checkpoint, supernet, optimizer, training)
        on_epoch(epoch, training.epochs, figures)
        epoch += 1
    return training

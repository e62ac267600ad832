"""Training and evaluation of one candidate.

We run our own training loop instead of `model.fit`: on this 2-core CPU, `fit` spends about
12 s building its graphs for each new model (train and test functions, metrics, a retrace
for the last partial batch) against about 5 s for the two `tf.function`s below, with their
batch dimension left open so they are traced once. In a search that builds a new model for
every trial, that difference is a third of a short trial. The optimizer, losses and layers
are Keras' own.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import keras

from nas.errors import TrainingDiverged
from nas.search.data import Dataset, pipeline
from nas.search.runtime import import_tensorflow
from nas.search.space import AugmentationSpec, Candidate, PruningSpec
from nas.search.training.checkpoint import EpochCheckpoint
from nas.search.training.erasing import RandomErasing
from nas.search.training.pruning import Pruner
from nas.search.training.result import TrainResult
from nas.storage import critical

EpochCallback = Callable[[int, int, dict[str, float]], None]


def make_augmenter(spec: AugmentationSpec, seed: int) -> keras.Sequential | None:
    """Keras preprocessing layers for training batches; they run inside the compiled train
    step, on the device, and are not part of the model that is measured or exported."""
    layers: list[keras.layers.Layer] = []
    if spec.flip != "none":
        mode = "horizontal_and_vertical" if spec.flip == "both" else spec.flip
        layers.append(keras.layers.RandomFlip(mode, seed=seed))
    if spec.rotation:
        layers.append(keras.layers.RandomRotation(spec.rotation, fill_mode="reflect", seed=seed + 1))
    if spec.crop:
        layers.append(keras.layers.RandomZoom((-spec.crop, 0.0), fill_mode="reflect", seed=seed + 2))
    if spec.contrast:
        layers.append(keras.layers.RandomContrast(spec.contrast, value_range=(0, 1), seed=seed + 3))
    if spec.erasing:
        # Last, as the paper erases after its flips and crops: a rectangle covers what they left.
        layers.append(RandomErasing(spec.erasing, seed=seed + 4))
    return keras.Sequential(layers, name="augmentation") if layers else None


def make_optimizer(
    name: str,
    learning_rate: float,
    total_steps: int | keras.Variable,
    *,
    precision: str = "float32",
    warmup_steps: int = 0,
) -> keras.optimizers.Optimizer:
    optimizer = _base_optimizer(name, learning_rate, total_steps, warmup_steps)
    if precision == "mixed_float16":
        # float16 gradients underflow without loss scaling; bfloat16 has float32's range.
        return keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer


def _base_optimizer(
    name: str, learning_rate: float, total_steps: int | keras.Variable, warmup_steps: int = 0
) -> keras.optimizers.Optimizer:
    # Cosine decay over the whole run: with only a few epochs per trial it gives clearly
    # better final accuracy than a constant rate, for every optimizer. A final training's
    # warm-up rises linearly from 0 to the rate first (Keras' CosineDecay warm-up).
    if warmup_steps:
        schedule = keras.optimizers.schedules.CosineDecay(
            0.0, decay_steps=max(1, total_steps - warmup_steps), warmup_target=learning_rate, warmup_steps=warmup_steps
        )
    else:
        # A variable length (the supernet's `epochs: auto`) is read by the traced step at run time:
        # CosineDecay casts its decay_steps on every call.
        steps = total_steps if isinstance(total_steps, keras.Variable) else max(1, total_steps)
        schedule = keras.optimizers.schedules.CosineDecay(learning_rate, decay_steps=steps)
    if name == "adam":
        return keras.optimizers.Adam(schedule)
    if name == "adamw":
        return keras.optimizers.AdamW(schedule)
    if name == "sgd":
        return keras.optimizers.SGD(schedule, momentum=0.9, nesterov=True)
    if name == "rmsprop":
        return keras.optimizers.RMSprop(schedule)
    raise ValueError(f"unknown optimizer {name!r}")


class _Steps:
    """The compiled train and evaluation steps of one model, with in-graph accumulators so
    the device is synchronised once per epoch, not once per batch."""

    def __init__(
        self,
        model: keras.Model,
        optimizer: keras.optimizers.Optimizer,
        *,
        jit_compile: bool,
        augment: keras.Sequential | None = None,
        masks: list[tuple[Any, Any]] | None = None,
        label_smoothing: float = 0.0,
    ) -> None:
        tf = import_tensorflow()
        self.tf = tf
        sparse = keras.losses.SparseCategoricalCrossentropy(reduction="sum")
        classes = int(model.output_shape[-1])
        if label_smoothing:
            smoothed = keras.losses.CategoricalCrossentropy(label_smoothing=label_smoothing, reduction="sum")

            def train_loss(y: Any, probs: Any) -> Any:
                return smoothed(tf.one_hot(y, classes, dtype=probs.dtype), probs)
        else:
            train_loss = sparse
        loss_fn = sparse
        variables = model.trainable_variables
        optimizer.build(variables)
        self.loss_sum = tf.Variable(0.0, dtype=tf.float32, trainable=False)
        self.correct = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.count = tf.Variable(0, dtype=tf.int64, trainable=False)
        shape = [None, *model.input_shape[1:]]
        signature = [tf.TensorSpec(shape, tf.float32), tf.TensorSpec([None], tf.int32)]

        def tally(y: Any, probs: Any, loss_sum: Any) -> None:
            predicted = tf.argmax(probs, axis=-1, output_type=tf.int32)
            self.loss_sum.assign_add(tf.cast(loss_sum, tf.float32))
            self.correct.assign_add(tf.reduce_sum(tf.cast(tf.equal(predicted, y), tf.int64)))
            self.count.assign_add(tf.cast(tf.shape(y)[0], tf.int64))

        @tf.function(input_signature=signature, jit_compile=jit_compile)  # type: ignore[untyped-decorator]
        def train_step(x: Any, y: Any) -> None:
            if augment is not None:
                x = tf.cast(augment(x, training=True), x.dtype)
            with tf.GradientTape() as tape:
                probs = model(x, training=True)
                loss_sum = train_loss(y, probs)
                loss = loss_sum / tf.cast(tf.shape(y)[0], loss_sum.dtype)
                if model.losses:
                    loss += tf.add_n(model.losses)
                # Under mixed_float16 the optimizer is a LossScaleOptimizer, which scales here
                # and unscales (skipping overflowing steps) in apply(); otherwise a no-op.
                scaled = optimizer.scale_loss(loss)
            optimizer.apply(tape.gradient(scaled, variables), variables)
            # Pruned weights stay zero: the optimizer's update is masked after every step.
            for kernel, mask in masks or ():
                kernel.assign(kernel * mask)
            tally(y, probs, loss_sum)

        @tf.function(input_signature=signature, jit_compile=jit_compile)  # type: ignore[untyped-decorator]
        def eval_step(x: Any, y: Any) -> None:
            probs = model(x, training=False)
            tally(y, probs, loss_fn(y, probs))

        self.train_step = train_step
        self.eval_step = eval_step

    def run(
        self, step: Callable[[Any, Any], None], batches: Any, after: Callable[[], None] | None = None
    ) -> tuple[float, float]:
        """Mean loss and accuracy of one pass over `batches`."""
        for var in (self.loss_sum, self.correct, self.count):
            var.assign(self.tf.zeros_like(var))
        iterator = iter(batches)
        while True:
            # A stop-now (second Ctrl-C, SIGTERM) lands between batches, in Python's own code,
            # never inside TensorFlow's iterator or step: one run stopped mid-training aborted
            # with heap corruption ("free(): invalid next size").
            critical.checkpoint()
            with critical.section():
                batch = next(iterator, None)
                if batch is None:
                    break
                step(*batch)
                if after is not None:
                    after()
        count = max(1, int(self.count.numpy()))
        return float(self.loss_sum.numpy()) / count, int(self.correct.numpy()) / count


def train_and_evaluate(
    model: keras.Model,
    c: Candidate,
    data: Dataset,
    *,
    seed: int,
    on_epoch: EpochCallback = lambda *_: None,
    augmentation: AugmentationSpec | None = None,
    pruning: PruningSpec | None = None,
    label_smoothing: float = 0.0,
    warmup_epochs: int = 0,
    checkpoint: EpochCheckpoint | None = None,
) -> TrainResult:
    """Train `c.epochs` epochs; with `pruning` (and c.pruning magnitude or n_m), prune on its
    schedule and score the pruned model. A final training (`nas train`) adds label smoothing,
    a warm-up and a checkpoint per epoch (then each epoch shuffles with a seed of its own, so a
    resumed training sees the order an uninterrupted one would). Without validation images
    (the final recipe that trains on them) nothing is scored: accuracy and loss are NaN."""
    started = time.perf_counter()
    steps_per_epoch = math.ceil(len(data.y_train) / c.batch_size)
    optimizer = make_optimizer(
        c.optimizer,
        c.learning_rate,
        steps_per_epoch * c.epochs,
        precision=c.precision,
        warmup_steps=steps_per_epoch * min(warmup_epochs, c.epochs - 1),
    )
    augment = make_augmenter(augmentation, seed) if augmentation is not None else None
    pruner = None
    if pruning is not None and c.pruning in ("magnitude", "n_m"):
        if checkpoint is not None:
            raise ValueError("a pruning schedule's masks are not checkpointed")
        pruner = Pruner.for_model(model, c.pruning, c.sparsity, pruning, steps_per_epoch * c.epochs)
    masks = pruner.masks() if pruner else None
    steps = _Steps(model, optimizer, jit_compile=c.xla, augment=augment, masks=masks, label_smoothing=label_smoothing)
    train = pipeline(data.x_train, data.y_train, c.batch_size, shuffle_seed=seed)
    validate = len(data.y_val) > 0
    val = pipeline(data.x_val, data.y_val, max(c.batch_size, 256), shuffle_seed=None) if validate else None
    history: dict[str, list[float]] = {"loss": [], "accuracy": [], "val_loss": [], "val_accuracy": [], "seconds": []}
    done = 0
    if checkpoint is not None:
        done, held = checkpoint.load(model, optimizer)
        history = {key: list(held.get(key, [])) for key in history} if done else history
    epoch_seconds = []
    for epoch in range(done + 1, c.epochs + 1):
        t0 = time.perf_counter()
        if checkpoint is not None:
            train = pipeline(data.x_train, data.y_train, c.batch_size, shuffle_seed=seed * 10_007 + epoch)
        loss, accuracy = steps.run(steps.train_step, train, pruner.after_step if pruner else None)
        epoch_seconds.append(time.perf_counter() - t0)
        if not math.isfinite(loss):
            raise TrainingDiverged(f"training loss became {loss} in epoch {epoch} of {c.epochs}")
        val_loss, val_accuracy = steps.run(steps.eval_step, val) if val is not None else (math.nan, math.nan)
        figures = {"loss": loss, "accuracy": accuracy, "val_loss": val_loss, "val_accuracy": val_accuracy}
        for key, value in figures.items():
            history[key].append(value)
        # The whole epoch, validation included: what a learning curve's point cost (the
        # tabulated benchmark's clock reads it).
        history["seconds"].append(round(time.perf_counter() - t0, 4))
        if checkpoint is not None:
            checkpoint.save(epoch, model, optimizer, history)
        on_epoch(epoch, c.epochs, {"loss": loss, "accuracy": accuracy, "val_accuracy": val_accuracy})
    if pruner is not None:
        pruner.finish()  # exact final masks, then score what will be deployed
        if val is not None:
            history["val_loss"][-1], history["val_accuracy"][-1] = steps.run(steps.eval_step, val)
    # The final model is what a user would deploy, so its accuracy is the objective (not the
    # best epoch's).
    steady = epoch_seconds[1:] or epoch_seconds
    rate = len(data.y_train) * len(steady) / max(sum(steady), 1e-9)
    return TrainResult(
        history["val_accuracy"][-1], history["val_loss"][-1], history, time.perf_counter() - started, rate
    )

"""The networks benchmarks/fashion.py sets beside nas' front: keras.applications with fresh
weights (Fashion-MNIST resized to 32x32, the smallest input they accept) and the data set's
published "2 Conv + pooling + BatchNorm" network (at 28x28), each trained with exactly the
preset's final recipe in nas' own training loop, then scored once on the test set; with
`--seeds N` N times, each seed from its own initialisation and data order, their mean and
spread compared (benchmarks/fashion_verdicts.py).

keras.applications' BatchNormalization keeps moving statistics with momentum 0.999; a
reference's test accuracy is scored after they are estimated again on 2,048 training images
(as a subnet's are), and the figure with the moving statistics is kept beside it. nas'
networks (momentum 0.9) are scored with their moving statistics: if anything, the rule favours
the references.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from benchmarks import stamps
from benchmarks.fashion_state import WORK, logged, recipe_space
from benchmarks.fashion_verdicts import sample_sd

REFERENCE_SIZE = 32
CALIBRATION_IMAGES = 2048

# The data set's README (github.com/zalandoresearch/fashion-mnist, "Benchmark"): test accuracy.
PUBLISHED = {
    "2 Conv + pooling": 0.916,
    "2 Conv + pooling + BatchNorm": 0.934,
    "MobileNet (horizontal flips)": 0.950,
    "ResNet18": 0.949,
    "WRN40-4 (8.9M parameters)": 0.967,
    "Google AutoML Vision (24 compute hours)": 0.939,
    "human": 0.835,
}
PUBLISHED_SOURCE = "https://github.com/zalandoresearch/fashion-mnist#benchmark"


def _applications(name: str) -> Callable[[], Any]:
    """A keras.applications network with fresh weights for 32x32 grayscale input, 10 classes."""

    def build() -> Any:
        import keras
        from keras import applications as apps

        shape = (REFERENCE_SIZE, REFERENCE_SIZE, 1)
        common = {"input_shape": shape, "weights": None, "classes": 10}
        if name.startswith("mobilenet_v2_"):
            return apps.MobileNetV2(alpha=float(name.rsplit("_", 1)[1]), **common)
        if name == "mobilenet_v3_small":
            return apps.MobileNetV3Small(include_preprocessing=False, **common)
        if name == "mobilenet_v3_small_minimalistic":
            return apps.MobileNetV3Small(minimalistic=True, include_preprocessing=False, **common)
        if name == "mobilenet_v3_large_0.75":
            return apps.MobileNetV3Large(alpha=0.75, include_preprocessing=False, **common)
        if name == "efficientnet_b0":
            # EfficientNet rescales its input from 0..255 inside; nas' pipeline gives 0..1.
            inputs = keras.Input(shape)
            net = apps.EfficientNetB0(**common)
            return keras.Model(inputs, net(keras.layers.Rescaling(255.0)(inputs)), name="efficientnet_b0")
        raise KeyError(name)

    return build


def _two_conv() -> Any:
    """The data set's benchmark entry "2 Conv + pooling + BatchNorm" (0.934), written from its
    description: two 5x5 convolutions of 32 and 64 filters, each with BatchNorm, ReLU and 2x2
    max pooling, then a dense layer of 1,024 with dropout and the 10-way softmax."""
    import keras
    from keras import layers

    inputs = keras.Input((28, 28, 1))
    x = inputs
    for filters in (32, 64):
        x = layers.Conv2D(filters, 5, padding="same", use_bias=False)(x)
        x = layers.BatchNormalization()(x)
        x = layers.ReLU()(x)
        x = layers.MaxPooling2D(2)(x)
    x = layers.Flatten()(x)
    x = layers.Dense(1024, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    return keras.Model(inputs, layers.Dense(10, activation="softmax")(x), name="two_conv_bn")


def _resnet20() -> Any:
    """ResNet-20 for 32x32-class images (He et al. 2016, section 4.2), written from the paper's
    description: a 3x3 convolution of 16 filters, then 3 stages of 3 basic blocks (two 3x3
    convolutions with BatchNorm, ReLU after the first and after the addition) at 16, 32 and 64
    filters, the first block of stages 2 and 3 halving the map; identity shortcuts, zero-padded
    where the channels double (the paper's option A, which adds no parameters); global average
    pooling and the 10-way softmax. Run at 28x28 (maps of 28, 14 and 7)."""
    import keras
    from keras import layers

    @keras.saving.register_keras_serializable(package="benchmarks")
    class ZeroPadChannels(layers.Layer):  # type: ignore[misc]
        """Option A's shortcut: the map subsampled by 2 and the channels zero-padded to `width`."""

        def __init__(self, width: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.width = width

        def call(self, x: Any) -> Any:
            x = x[:, ::2, ::2, :]
            extra = self.width - x.shape[-1]
            return keras.ops.pad(x, [[0, 0], [0, 0], [0, 0], [extra // 2, extra - extra // 2]])

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "width": self.width}

    def conv_bn(x: Any, filters: int, stride: int) -> Any:
        x = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
        return layers.BatchNormalization()(x)

    inputs = keras.Input((28, 28, 1))
    x = layers.ReLU()(conv_bn(inputs, 16, 1))
    for stage, filters in enumerate((16, 32, 64)):
        for block in range(3):
            stride = 2 if stage > 0 and block == 0 else 1
            shortcut = ZeroPadChannels(filters)(x) if stride == 2 else x
            y = layers.ReLU()(conv_bn(x, filters, stride))
            y = conv_bn(y, filters, 1)
            x = layers.ReLU()(layers.Add()([shortcut, y]))
    x = layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(10, activation="softmax")(x), name="resnet20")


REFERENCES: dict[str, tuple[Callable[[], Any], int]] = {
    "mobilenet_v2_0.35": (_applications("mobilenet_v2_0.35"), REFERENCE_SIZE),
    "mobilenet_v2_0.5": (_applications("mobilenet_v2_0.5"), REFERENCE_SIZE),
    "mobilenet_v2_1.0": (_applications("mobilenet_v2_1.0"), REFERENCE_SIZE),
    "mobilenet_v3_small": (_applications("mobilenet_v3_small"), REFERENCE_SIZE),
    "mobilenet_v3_small_minimalistic": (_applications("mobilenet_v3_small_minimalistic"), REFERENCE_SIZE),
    "mobilenet_v3_large_0.75": (_applications("mobilenet_v3_large_0.75"), REFERENCE_SIZE),
    "efficientnet_b0": (_applications("efficientnet_b0"), REFERENCE_SIZE),
    "two_conv_bn": (_two_conv, 28),
    "resnet20": (_resnet20, 28),
}


SCORINGS = ("test_accuracy", "test_accuracy_moving_statistics")  # BatchNorm re-estimated; training's


def seeds_to_train(record: dict[str, Any] | None, recipe: dict[str, Any], seeds: int) -> list[int]:
    """The seeds of 0..seeds-1 a reference's JSON lacks; all of them where its seeds were trained
    with another recipe (the preset's may change between pieces)."""
    held = record["seeds"] if record and record.get("recipe") == recipe else []
    done = {run["seed"] for run in held}
    return [k for k in range(seeds) if k not in done]


def with_seed(
    record: dict[str, Any] | None, recipe: dict[str, Any], run: dict[str, Any], command: str, commit: str
) -> dict[str, Any]:
    """A reference's JSON with one more seed's figures (`run`: its `seed`, both scorings, its
    history and stamps): every seed's kept, each scoring's mean and sample standard deviation
    over them, the pieces' commands listed once each. Seeds of another recipe are dropped."""
    kept = record if record and record.get("recipe") == recipe else None
    runs = [r for r in (kept or {}).get("seeds", []) if r["seed"] != run["seed"]]
    own = {key: value for key, value in run.items() if key not in ("name", "params")}
    runs = sorted([*runs, own], key=lambda r: r["seed"])
    figures: dict[str, Any] = {"name": run["name"], "params": run["params"], "recipe": recipe, "seeds": runs}
    for scoring in SCORINGS:
        values = [r[scoring] for r in runs]
        figures[scoring] = round(statistics.fmean(values), 6)
        figures[f"{scoring}_sd"] = sample_sd(values)
    return logged((kept or {}) | figures, command, commit)


def reference_score(record: dict[str, Any]) -> dict[str, Any]:
    """A reference's test accuracy for the comparison: the mean, spread and seed count of the
    better of its two scorings. `nas train` scores with training's moving BatchNorm statistics;
    the references were scored so and again with statistics re-estimated on training images
    (which helps most of them): the better figure makes a reference as hard to dominate as either
    scoring can. A JSON of round 1 (one seed, no `seeds`) reads as one seed."""
    runs = record.get("seeds") or [record]
    scored = [[r.get(scoring, 0.0) for r in runs] for scoring in SCORINGS]
    best = max(scored, key=statistics.fmean)
    return {"test_accuracy": round(statistics.fmean(best), 6), "test_accuracy_sd": sample_sd(best), "seeds": len(runs)}


def reference(name: str, seeds: int, minutes: float, command: str) -> Literal["done", "trained", "stopped"]:
    """Train one reference with the preset's final recipe (nas' own training loop: the same
    warm-up, cosine decay, label smoothing, augmentation and data), seeds 0..seeds-1, each
    scored once on the test set and stored in its JSON as it ends; seed k starts from its own
    initialisation and reads the data in its own order (engine/final.py's final_seed, as `nas
    train --seeds` gives a trial). A checkpoint per epoch: a piece stopped by --minutes resumes
    there. Says whether the seeds were done already, are now, or the deadline stopped it; the
    JSON lists `command`, the pieces'."""
    from nas.search import runtime

    runtime.set_debug(False)
    runtime.import_tensorflow()
    from nas.search.data import load_dataset
    from nas.search.engine.final import final_data, final_recipe

    out = WORK / "references" / f"{name}.json"
    record = json.loads(out.read_text()) if out.is_file() else None
    build, size = REFERENCES[name]
    space = recipe_space()
    final = space.spec.final
    dataset = space.spec.dataset.model_copy(update={"image_size": size})
    candidate = replace(
        space.candidate(_middle(space), num_classes=10, channels=1),
        epochs=final.epochs,
        learning_rate=float(final.learning_rate or 0.004),
        batch_size=int(final.batch_size or 128),
    )
    augmentation = final.augmentation or space.spec.dataset.augmentation
    recipe = final_recipe(final, candidate, augmentation, reference=name, image_size=size)
    todo = seeds_to_train(record, recipe, seeds)
    if not todo:
        print(f"{name}: {seeds} seed{'s' * (seeds != 1)} done ({out})")
        return "done"
    if record and record.get("recipe") != recipe:
        print(f"{name}: the preset's final recipe changed; its {len(record['seeds'])} seeds are trained again")
    train_data, test = final_data(load_dataset(dataset), final.data)
    deadline = time.monotonic() + minutes * 60
    for k in todo:
        run = _train_seed(name, build, k, candidate, recipe, (final, augmentation), (train_data, test), deadline)
        if run is None:
            print(f"{name} seed {k}: stopped after {minutes:.0f} minutes; run the same command to resume")
            return "stopped"
        record = with_seed(record, recipe, run, command, stamps.commit())
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        tmp.replace(out)  # a kill mid-write keeps the seeds stored before
        print(
            f"{name} seed {k}: test accuracy {run['test_accuracy']:.4f} "
            f"(moving statistics {run['test_accuracy_moving_statistics']:.4f}), {run['params']:,} params"
        )
    return "trained"


def _train_seed(
    name: str,
    build: Callable[[], Any],
    k: int,
    candidate: Any,
    recipe: dict[str, Any],
    spec: tuple[Any, Any],
    data: tuple[Any, Any],
    deadline: float,
) -> dict[str, Any] | None:
    """Seed k of one reference trained and scored both ways (`spec`: the final recipe's spec
    and its augmentation; `data`: the training and test sets); None where the deadline stopped
    it (its checkpoint is written: the next piece resumes)."""
    import keras

    from nas.search.engine.final import final_seed
    from nas.search.strategies.supernet.evaluation import calibration_batches, evaluate
    from nas.search.strategies.supernet.extract import recalibrate
    from nas.search.training.checkpoint import EpochCheckpoint
    from nas.search.training.train import train_and_evaluate

    (final, augmentation), (train_data, test) = spec, data
    seed = final_seed(final.seed, 0, k)  # seed 0's is the recipe's seed, as in round 1
    keras.utils.set_random_seed(seed)
    model = build()
    # Kept with the results (committed): a piece that ends mid-training resumes next session.
    checkpoint = EpochCheckpoint(WORK / "checkpoints" / f"{name}{f'-seed-{k}' if k else ''}.ckpt.npz", recipe)

    def on_epoch(epoch: int, epochs: int, logs: dict[str, float]) -> None:
        print(f"{name} seed {k}: epoch {epoch}/{epochs}, loss {logs['loss']:.4f}, accuracy {logs['accuracy']:.4f}")
        if time.monotonic() > deadline and epoch < epochs:
            raise TimeoutError  # the checkpoint of this epoch is written

    started = time.monotonic()
    try:
        result = train_and_evaluate(
            model,
            candidate,
            train_data,
            seed=seed,
            on_epoch=on_epoch,
            augmentation=augmentation if augmentation.active else None,
            label_smoothing=final.label_smoothing,
            warmup_epochs=final.warmup_epochs,
            checkpoint=checkpoint,
        )
    except TimeoutError:
        return None
    _, moving = evaluate(model, test)
    recalibrate(model, calibration_batches(train_data, 256, CALIBRATION_IMAGES // 256))
    _, recalibrated = evaluate(model, test)
    checkpoint.remove()
    params = int(model.count_params())
    keras.backend.clear_session(free_memory=True)
    return {
        "seed": k,
        "name": name,
        "params": params,
        "test_accuracy": round(recalibrated, 6),
        "test_accuracy_moving_statistics": round(moving, 6),
        "history": {key: [round(v, 5) for v in values] for key, values in result.history.items()},
        "train_seconds_this_piece": round(time.monotonic() - started, 1),
        "commit": stamps.commit(),
        "machine": stamps.machine(),
        "date": stamps.now(),
    }


def _middle(space: Any) -> dict[str, Any]:
    """Any one candidate's values: a reference takes only its training knobs (optimizer,
    precision) from it; epochs, rate and batch come from the final recipe."""
    from nas.search.strategies.supernet.elastic import default_fixed

    return {name: default_fixed(param) for name, param in space.parameters().items() if param.active({})}

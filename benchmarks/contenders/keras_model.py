"""The preset's space as a KerasTuner or Optuna user writes it: its parameters asked through
the tool's own API, MobileNetV2 blocks in plain Keras layers, `model.fit` on nas' loader's
data (the same split) and throughput from a short timing loop."""

from __future__ import annotations

import time
from typing import Any

TIMING_BATCH = 64


def suggest(ask: Any) -> dict[str, Any]:
    """The preset's parameters through `ask(kind, name, *domain)`: KerasTuner's hp or Optuna's trial."""
    values = {"width_multiplier": ask("choice", "width_multiplier", [0.5, 0.75, 1.0])}
    values["dropout"] = ask("float", "dropout", 0.0, 0.3, False)
    for stage, depth in ((1, 2), (2, 3), (3, 2)):
        values[f"stage{stage}.depth"] = ask("int", f"stage{stage}.depth", 1, depth)
        values[f"stage{stage}.kernel"] = ask("choice", f"stage{stage}.kernel", [3, 5])
        values[f"stage{stage}.expansion"] = ask("choice", f"stage{stage}.expansion", [3, 6])
        values[f"stage{stage}.se"] = ask("choice", f"stage{stage}.se", [False, True])
    values["batch_size"] = ask("choice", "batch_size", [32, 64])
    values["learning_rate"] = ask("float", "learning_rate", 0.001, 0.02, True)
    return values


def keras_mobilenet(values: dict[str, Any], shape: tuple[int, ...], classes: int) -> Any:
    """MobileNetV2 blocks in plain Keras, as a user writes them for KerasTuner or Optuna."""
    import keras
    from keras import layers

    from nas.search.nets.build import BN_MOMENTUM

    def bn(x: Any) -> Any:
        # The momentum nas' builder uses: Keras' default 0.99 leaves the moving statistics
        # unsettled after a trial's few hundred steps, and inference-mode accuracy stays at
        # chance (0.10) for a model that scores 0.96 with batch statistics (seen on digits).
        return layers.BatchNormalization(momentum=BN_MOMENTUM)(x)

    def channels(filters: int) -> int:
        return max(8, int(filters * values["width_multiplier"] + 4) // 8 * 8)

    def block(x: Any, filters: int, stride: int, kernel: int, expansion: int, se: bool) -> Any:
        inputs, width = x, x.shape[-1] * expansion
        if expansion != 1:
            x = layers.ReLU(6.0)(bn(layers.Conv2D(width, 1, use_bias=False)(x)))
        x = layers.DepthwiseConv2D(kernel, stride, padding="same", use_bias=False)(x)
        x = layers.ReLU(6.0)(bn(x))
        if se:
            s = layers.GlobalAveragePooling2D(keepdims=True)(x)
            s = layers.Conv2D(max(1, width // 4), 1, activation="relu")(s)
            x = layers.Multiply()([x, layers.Conv2D(width, 1, activation="sigmoid")(s)])
        x = bn(layers.Conv2D(filters, 1, use_bias=False)(x))
        return layers.Add()([inputs, x]) if stride == 1 and inputs.shape[-1] == filters else x

    inputs = keras.Input(shape)
    x = layers.Rescaling(1.0 / 255)(inputs)  # the images come as uint8, as nas' pipeline gets them
    x = layers.ReLU(6.0)(bn(layers.Conv2D(channels(16), 3, padding="same")(x)))
    x = block(x, channels(16), 1, 3, 1, False)
    for stage, (filters, stride) in enumerate(((24, 2), (32, 2), (64, 2)), start=1):
        for i in range(values[f"stage{stage}.depth"]):
            v = values
            x = block(
                x,
                channels(filters),
                stride if i == 0 else 1,
                v[f"stage{stage}.kernel"],
                v[f"stage{stage}.expansion"],
                v[f"stage{stage}.se"],
            )
    x = layers.ReLU(6.0)(bn(layers.Conv2D(128, 1, use_bias=False)(x)))
    x = layers.Dropout(values["dropout"])(layers.GlobalAveragePooling2D()(x))
    model = keras.Model(inputs, layers.Dense(classes, activation="softmax")(x))
    model.compile(
        optimizer=keras.optimizers.Adam(values["learning_rate"]),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


def timing_loop(model: Any, images: Any) -> float:
    """Images/s the way a user times it: a few warm-up calls, then 20 calls on one batch."""
    batch = images[:TIMING_BATCH]
    for _ in range(3):
        model(batch, training=False)
    started = time.perf_counter()
    for _ in range(20):
        model(batch, training=False).numpy()
    return 20 * len(batch) / (time.perf_counter() - started)


class UserTrials:
    """One contender's run as a user of another tool writes it: the preset's data, each model
    trained with `fit` and timed, and every trained model kept as a race entry."""

    def __init__(self, budget: float, epochs: int | None) -> None:
        from nas.search import runtime

        runtime.import_tensorflow()
        from nas.search.data import load_dataset
        from nas.search.space import load_space

        space = load_space("mobilenet")
        self.data = load_dataset(space.spec.dataset)
        self.epochs = epochs or space.spec.training.epochs
        self.shape, self.classes = self.data.x_train.shape[1:], self.data.num_classes
        self.started, self.deadline = time.time(), time.monotonic() + budget
        self.trials: list[dict[str, Any]] = []

    def model(self, values: dict[str, Any]) -> Any:
        return keras_mobilenet(values, self.shape, self.classes)

    def train_and_time(self, values: dict[str, Any], model: Any, **fit: Any) -> tuple[float, float]:
        t0 = time.perf_counter()
        fit.setdefault("epochs", self.epochs)
        data = self.data
        history = model.fit(
            data.x_train,
            data.y_train,
            batch_size=values["batch_size"],
            validation_data=(data.x_val, data.y_val),
            verbose=0,
            **fit,
        )
        accuracy = float(history.history["val_accuracy"][-1])
        throughput = timing_loop(model, data.x_val)
        self.trials.append(
            {
                "end_s": time.time() - self.started,
                "accuracy": accuracy,
                "throughput": throughput,
                "inside_s": time.perf_counter() - t0,
                "stopped": fit["epochs"] < self.epochs,  # a Hyperband trial trained on a short budget
                "params": values,
            }
        )
        return accuracy, throughput

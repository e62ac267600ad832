"""Mixed precision and XLA, run on the CPU (small model, digits): training under
mixed_bfloat16 with XLA-compiled steps, the float16 loss-scaling step, and the float32
rebuild an export makes of a mixed-precision model."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import yaml

from nas.search import runtime

tf = runtime.import_tensorflow()
import keras

import nas.search.training.train as train_module
from nas.search.data import Dataset, load_dataset
from nas.search.nets import build_model
from nas.search.results import export
from nas.search.space import SearchSpace, space_from_dict
from nas.search.training import precision_policy, train_and_evaluate

SPACE = """
name: precision
dataset: {source: digits, image_size: 8, validation_fraction: 0.25, seed: 0}
model:
  family: mobilenet_v2
  stem_filters: 16
  stem_stride: 1
  head_filters: 64
  dropout: 0.0
  stages:
    - {filters: 16, stride: 1, depth: 1, kernel: 3, expansion: 1}
    - {filters: 24, stride: 2, depth: 1, kernel: 3, expansion: 4}
training: {epochs: 3, batch_size: 32, learning_rate: 0.01}
search: {trials: 1}
"""


@pytest.fixture(scope="module")
def space() -> SearchSpace:
    return space_from_dict(yaml.safe_load(SPACE))


@pytest.fixture(scope="module")
def digits(space: SearchSpace) -> Dataset:
    return load_dataset(space.spec.dataset)


def _train(
    space: SearchSpace, data: Dataset, monkeypatch: pytest.MonkeyPatch, precision: str, xla: bool
) -> tuple[keras.Model, Any, Any]:
    """Train under `precision` as a trial does; returns the model, the result and the steps
    object the training loop used (its optimizer and compiled functions)."""
    used: list[Any] = []

    class Spy(train_module._Steps):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.optimizer, self.jit_compile = args[1], kwargs["jit_compile"]
            used.append(self)

    monkeypatch.setattr(train_module, "_Steps", Spy)
    candidate = dataclasses.replace(space.candidate({}, num_classes=10, channels=1), precision=precision, xla=xla)
    with precision_policy(precision):
        model = build_model(candidate, seed=0)
        result = train_and_evaluate(model, candidate, data, seed=0)
    assert keras.mixed_precision.global_policy().name == "float32"  # restored after the block
    return model, result, used[0]


@pytest.mark.slow  # trains
def test_mixed_bfloat16_training_with_xla(space: SearchSpace, digits: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    model, result, steps = _train(space, digits, monkeypatch, "mixed_bfloat16", xla=True)
    assert all(np.isfinite(result.history["loss"])) and result.history["loss"][-1] < result.history["loss"][0]
    assert result.accuracy > 0.6, result.history  # chance is 0.1
    conv = model.get_layer("stem_conv")
    assert conv.compute_dtype == "bfloat16" and conv.kernel.dtype == "float32"  # float32 master weights
    assert model.output.dtype == "float32"  # the softmax stays float32
    # The step really went through XLA, computing in bfloat16.
    assert steps.jit_compile is True
    x = tf.constant(digits.x_val[:8], tf.float32)
    hlo = steps.eval_step.experimental_get_compiler_ir(x, tf.constant(digits.y_val[:8], tf.int32))(stage="hlo")
    assert "bf16" in hlo


@pytest.mark.slow  # trains
def test_mixed_float16_scales_the_loss(space: SearchSpace, digits: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    model, result, steps = _train(space, digits, monkeypatch, "mixed_float16", xla=False)
    assert isinstance(steps.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model.get_layer("stem_conv").compute_dtype == "float16"
    # Dynamic loss scaling ran: it starts at 2**15 and only ever halves on an overflowing step
    # or doubles after a run of good ones, so it stays a power of two; the model learnt.
    scale = float(steps.optimizer.dynamic_scale.numpy())
    assert scale > 0 and np.log2(scale) == int(np.log2(scale)), scale
    assert int(steps.optimizer.iterations.numpy()) > 0
    assert all(np.isfinite(result.history["loss"])) and result.accuracy > 0.6, result.history


@pytest.mark.slow  # trains
def test_export_rebuilds_a_mixed_precision_model_in_float32(
    space: SearchSpace, digits: Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, _, _ = _train(space, digits, monkeypatch, "mixed_bfloat16", xla=False)
    params = {}  # the space's fixed values: the candidate trained above
    float_model = export._float32_model(model, space, params, 10, 1)
    assert float_model is not model
    assert {layer.dtype_policy.name for layer in float_model.layers} == {"float32"}
    for ours, theirs in zip(float_model.get_weights(), model.get_weights(), strict=True):
        assert ours.dtype == np.float32 and np.array_equal(ours, theirs)
    x = digits.x_val[:200]
    mixed = model.predict(x, verbose=0).argmax(axis=1)
    full = float_model.predict(x, verbose=0).argmax(axis=1)
    assert (mixed == full).mean() >= 0.95  # the same network, bfloat16 rounding aside
    # A float32 model is exported as it is.
    assert export._float32_model(float_model, space, params, 10, 1) is float_model

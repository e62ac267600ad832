from __future__ import annotations

import numpy as np
import optuna
import pytest

from nas.search import runtime

runtime.import_tensorflow()

import keras

from nas.search.nets import build_model, count_flops, make_divisible
from nas.search.space import load_space


def _candidate(seed: int = 3):
    space = load_space("mobilenet")
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.RandomSampler(seed))
    trial = study.ask()
    return space.sample(trial, num_classes=10, channels=1), space, trial.params


def test_build_is_deterministic_from_parameters_and_seed() -> None:
    candidate, space, params = _candidate()
    again = space.candidate(params, num_classes=10, channels=1)
    a = build_model(candidate, seed=7)
    b = build_model(again, seed=7)
    assert a.get_config()["layers"] == b.get_config()["layers"]
    assert a.count_params() == b.count_params()
    for wa, wb in zip(a.get_weights(), b.get_weights(), strict=True):
        np.testing.assert_array_equal(wa, wb)
    x = np.random.default_rng(0).random((4, 16, 16, 1), dtype=np.float32)
    np.testing.assert_allclose(a(x, training=False), b(x, training=False), rtol=1e-6)


def test_structure_follows_the_candidate() -> None:
    candidate, _, _ = _candidate()
    model = build_model(candidate, seed=0)
    blocks = {layer.name.split("_")[0] for layer in model.layers if layer.name.startswith("s") and "b" in layer.name}
    expected = sum(stage.depth for stage in candidate.stages)
    assert len({b for b in blocks if b[0] == "s" and b[1:2].isdigit()}) == expected
    has_se = any(layer.name.endswith("_se_scale") for layer in model.layers)
    assert has_se == any(stage.se for stage in candidate.stages)
    assert model.output_shape == (None, 10)


def test_flops_of_known_layers() -> None:
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)  # 2*8*8*16*9*3
    x = keras.layers.DepthwiseConv2D(5, strides=2, padding="same")(x)  # 2*4*4*16*25
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(10)(x)  # 2*16*10
    model = keras.Model(inputs, outputs)
    assert count_flops(model) == 2 * 8 * 8 * 16 * 9 * 3 + 2 * 4 * 4 * 16 * 25 + 2 * 16 * 10


@pytest.mark.parametrize(
    ("value", "expected"), [(3, 8), (12, 16), (16 * 0.75, 16), (24 * 0.5, 16), (32 * 0.35, 16), (100, 104)]
)
def test_make_divisible(value: float, expected: int) -> None:
    assert make_divisible(value) == expected
    assert make_divisible(value) % 8 == 0

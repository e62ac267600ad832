"""Pruning and quantization on digits: target sparsity reached, 2:4 pattern held, channel
pruning makes a smaller and faster network, int8 close to float at a quarter of the size,
and a search scores the quantized model."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import optuna
import pytest
import yaml

from nas.search import runtime

runtime.import_tensorflow()
import keras

from nas.errors import ConversionError
from nas.search.data import Dataset, load_dataset
from nas.search.deploy import (
    deploy,
    write_tflite,
)
from nas.search.nets import (
    build_model,
    build_plan,
    plan_network,
    pruned_plan,
    transfer,
)
from nas.search.space import (
    PruningSpec,
    StagePlan,
    load_space,
    space_from_dict,
)
from nas.search.training import (
    n_m_mask,
    prunable_kernels,
    sparsity_report,
    train_and_evaluate,
)

from ..helpers import REPO, run_cli

SPACE = """
name: compress
dataset: {source: digits, image_size: 16, validation_fraction: 0.25, seed: 0}
model:
  family: mobilenet_v2
  stem_filters: 16
  stem_stride: 1
  head_filters: 128
  dropout: 0.0
  stages:
    - {filters: 16, stride: 1, depth: 1, kernel: 3, expansion: 1}
    - {filters: 32, stride: 2, depth: 2, kernel: 3, expansion: 6}
    - {filters: 64, stride: 2, depth: 2, kernel: 3, expansion: 6}
training: {epochs: 3, batch_size: 32, learning_rate: 0.005}
measure: {batch_sizes: [32], latency: false, rounds: 3, round_seconds: 0.05,
          warmup_seconds: 2, baseline_rounds: 5, peak_seconds: 0.2}
search: {trials: 2}
"""
EXCLUDE = ["stem", "depthwise", "se", "classifier"]


@pytest.fixture(scope="module")
def digits() -> Dataset:
    return load_dataset(space_from_dict(yaml.safe_load(SPACE)).spec.dataset)


def _candidate(**changes: object) -> object:
    space = space_from_dict(yaml.safe_load(SPACE))
    return dataclasses.replace(space.candidate({}, num_classes=10, channels=1), **changes)


def _fused_stages() -> tuple[StagePlan, ...]:
    stages = _candidate().stages  # type: ignore[attr-defined]
    return (stages[0], dataclasses.replace(stages[1], block="fused"), stages[2])


def _train(data: Dataset, **changes: object) -> tuple[keras.Model, float]:
    candidate = _candidate(**changes)
    model = build_model(candidate, seed=0)  # type: ignore[arg-type]
    result = train_and_evaluate(model, candidate, data, seed=0, pruning=PruningSpec())  # type: ignore[arg-type]
    return model, result.accuracy


@pytest.fixture(scope="module")
def dense(digits: Dataset) -> tuple[keras.Model, float]:
    return _train(digits)


@pytest.mark.slow
@pytest.mark.parametrize("target", [0.5, 0.75])
def test_magnitude_pruning_reaches_its_target(digits: Dataset, dense: tuple[keras.Model, float], target: float) -> None:
    model, accuracy = _train(digits, pruning="magnitude", sparsity=target)
    report = sparsity_report(model, EXCLUDE)
    assert report["prunable_sparsity"] == pytest.approx(target, abs=1e-3)
    for _, kernel in prunable_kernels(model, EXCLUDE):
        assert (kernel.numpy() == 0).mean() == pytest.approx(target, abs=1e-3)
    # Stem and depthwise kernels are never pruned by default.
    assert (model.get_layer("stem_conv").kernel.numpy() != 0).all()
    if target == 0.5:
        assert accuracy >= dense[1] - 0.03, (accuracy, dense[1])


@pytest.mark.slow
def test_two_four_pattern_holds_in_every_pruned_kernel(digits: Dataset) -> None:
    model, accuracy = _train(digits, pruning="n_m")
    kernels = prunable_kernels(model, EXCLUDE)
    checked = 0
    for name, kernel in kernels:
        weights = kernel.numpy()
        groups = np.moveaxis(weights, -2, -1)
        if groups.shape[-1] % 4:
            continue
        nonzero = (groups.reshape(-1, 4) != 0).sum(axis=1)
        assert (nonzero <= 2).all(), name
        checked += 1
    assert checked >= 8 and accuracy > 0.8
    mask = n_m_mask(np.arange(16, dtype=np.float32).reshape(1, 1, 8, 2) - 8, 2, 4)
    assert mask is not None and (mask.reshape(-1).sum() == 8)


@pytest.mark.slow
def test_channel_pruning_makes_a_smaller_network_of_the_strongest_channels(
    digits: Dataset, dense: tuple[keras.Model, float]
) -> None:
    """How much faster the smaller network runs is measured in benchmarks/compression.py."""
    candidate = _candidate()
    full_net = plan_network(candidate)  # type: ignore[arg-type]
    small_net = pruned_plan(full_net, 0.5)
    assert small_net.params() < 0.75 * full_net.params()
    model, _ = dense
    small = build_plan(small_net)
    transfer(model, small, full_net, small_net)
    assert small.count_params() == small_net.params()
    # The kept channels are those whose expansion filters have the largest L1 norm.
    block = next(b for b in full_net.blocks if b.expand)
    full_kernel = model.get_layer(f"{block.name}_expand_conv").get_weights()[0]
    kept = np.sort(np.argsort(np.abs(full_kernel).sum(axis=(0, 1, 2)))[-small_net.blocks[1].hidden :])
    np.testing.assert_array_equal(small.get_layer(f"{block.name}_expand_conv").get_weights()[0], full_kernel[..., kept])


@pytest.mark.slow
def test_int8_is_close_to_float_at_about_a_quarter_of_the_size(digits: Dataset) -> None:
    model, _ = _train(digits, width_multiplier=2.0)  # ~400k params: file overhead no longer dominates
    floating = deploy(model, "none", digits, convert=True, latency=True, threads=1)
    int8 = deploy(model, "int8", digits, convert=True, latency=True, threads=1)
    assert floating.accuracy is not None and int8.accuracy is not None
    assert int8.accuracy >= floating.accuracy - 0.02, (int8.accuracy, floating.accuracy)
    # Per-channel scales and zero points, int32 biases and the file's own structure weigh on
    # a 400k-parameter network (0.32 of float here); at MobileNetV2's 3.5M it is 0.28.
    assert int8.model_bytes < 0.35 * floating.model_bytes, (int8.model_bytes, floating.model_bytes)
    assert floating.latency_ms is not None and floating.latency_ms > 0
    assert floating.model_bytes > 4 * model.count_params() * 0.95


@pytest.mark.slow
def test_int8_mobilenet_v2_is_about_a_quarter_of_float32(tmp_path: Path) -> None:
    reference = REPO / "spaces" / "reference" / "mobilenet_v2_1.0_224.yaml"
    space = load_space(str(reference))
    model = build_model(space.candidate({}, num_classes=1000, channels=3), seed=0)
    calibration = np.random.default_rng(0).random((8, 224, 224, 3), dtype=np.float32)
    sizes = {}
    for mode in ("none", "int8"):
        (tmp_path / mode).mkdir()
        sizes[mode] = write_tflite(model, tmp_path / mode, mode, calibration).files[0].stat().st_size
    assert 0.24 < sizes["int8"] / sizes["none"] < 0.30, sizes


@pytest.mark.slow
def test_a_refused_conversion_names_the_converters_reason(tmp_path: Path, dense: tuple[keras.Model, float]) -> None:
    model, _ = dense
    with pytest.raises(ConversionError, match="TFLite converter"):
        write_tflite(model, tmp_path, "int8", np.zeros((4, 3, 3, 1), np.float32))  # wrong calibration shape


@pytest.mark.slow
def test_search_scores_the_quantized_and_pruned_model(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load(SPACE)
    data["training"]["epochs"] = 2
    data["model"]["stages"][1]["block"] = "fused"  # channel pruning cuts a fused block's hidden channels too
    data["compression"] = {
        "pruning": {"method": {"choice": ["magnitude", "channel"]}, "sparsity": 0.5},
        "quantization": "int8",
    }
    data["objectives"] = {"accuracy": "maximize", "model_size": "minimize", "tflite_latency": "minimize"}
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(data))
    result = run_cli("search", "space.yaml", "--trials", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    # The TFLite converter's noise (written to file descriptor 2 by C++) stays hidden.
    assert "fully_quantize" not in result.stderr + capfd.readouterr().err
    study = optuna.load_study(study_name="compress", storage=f"sqlite:///{tmp_path / 'nas.db'}")
    assert study.metric_names == ["accuracy", "model_size", "tflite_latency"]
    for t in study.trials:
        deployed = t.user_attrs["deploy"]
        # Quantization is fixed, so it is no trial param: the file size shows it. A float32
        # TFLite file holds 4 bytes per parameter and more; int8 here 1.6-1.8 (small networks:
        # scales, zero points and int32 biases weigh).
        assert deployed["converted"]
        assert deployed["model_bytes"] < 0.6 * 4 * t.user_attrs["params"], (deployed, t.user_attrs["params"])
        assert t.values[0] == deployed["tflite_accuracy"]  # the objective is the deployed model's
        assert t.values[1] == deployed["model_bytes"] and t.values[2] == deployed["tflite_latency_ms"]
        assert "keras_accuracy" in t.user_attrs and "deploy" in t.user_attrs["durations"]
        if t.params["pruning.method"] == "magnitude":
            assert t.user_attrs["sparsity"]["prunable_sparsity"] == pytest.approx(0.5, abs=1e-3)
        else:
            # The cut network (fused and MBConv blocks at half their hidden width) was measured
            # and deployed, and its TFLite file agrees with the Keras model it was made from.
            cut = pruned_plan(plan_network(_candidate(stages=_fused_stages(), pruning="channel")), 0.5)  # type: ignore[arg-type]
            assert (
                t.user_attrs["params"]
                == cut.params()
                < 0.75 * plan_network(_candidate(stages=_fused_stages())).params()
            )  # type: ignore[arg-type]
            assert abs(deployed["tflite_accuracy"] - t.user_attrs["keras_accuracy"]) <= 0.02
    # The seeded sampler tries both methods, so both branches above were checked.
    assert {t.params["pruning.method"] for t in study.trials} == {"magnitude", "channel"}

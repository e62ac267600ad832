"""The supernet strategy: subnets taken out of the supernet compute what the supernet computes
in that configuration, with the plan's params and FLOPs; BatchNorm re-calibration changes only
the statistics; a space it cannot share is refused; its training survives kill -9 and its
search resumes and exports like any study."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import sqlalchemy as sa
import yaml

from nas.storage.weights import WeightStore

from ...helpers import QUICK_MEASURE, kill_nas_at, run_cli


def _space(**search: Any) -> dict[str, Any]:
    return {
        "name": "elastic",
        "dataset": {"source": "digits", "image_size": 8, "subset": 300, "validation_fraction": 0.3, "seed": 0},
        "model": {
            "family": "mobilenet_v2",
            "width_multiplier": {"choice": [0.5, 1.0]},
            "stem_filters": 8,
            "stem_stride": 1,
            "head_filters": 32,
            "dropout": {"choice": [0.0, 0.2]},
            "stages": [
                {"filters": 8, "stride": 1, "depth": 1, "kernel": 3, "expansion": 1},
                {
                    "filters": 16,
                    "stride": 2,
                    "depth": {"int": [1, 2]},
                    "kernel": {"choice": [3, 5]},
                    "expansion": {"choice": [3, 6]},
                    "se": {"choice": [False, True]},
                },
                {"filters": 24, "stride": 2, "depth": {"int": [1, 3]}, "kernel": {"choice": [3, 5]}, "se": True},
            ],
        },
        "training": {"epochs": 2, "batch_size": {"choice": [32, 64]}, "learning_rate": {"float": [0.001, 0.01]}},
        "measure": QUICK_MEASURE,
        "search": {"trials": 3, "strategy": "supernet", "supernet": {"epochs": 3, "calibration_batches": 2}, **search},
    }


def _elastic(**search: Any) -> Any:
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space

    return elastic_space(space_from_dict(_space(**search)))


def test_the_space_splits_into_elastic_choices_and_fixed_training_knobs() -> None:
    elastic = _elastic(supernet={"fixed": {"learning_rate": 0.002}})
    assert set(elastic.elastic) == {
        "width_multiplier",
        "stage1.depth",
        "stage1.kernel",
        "stage1.expansion",
        "stage1.se",
        "stage2.depth",
        "stage2.kernel",
    }
    # The first of a choice, the value the space file gives.
    assert elastic.fixed == {"dropout": 0.0, "batch_size": 32, "learning_rate": 0.002}
    assert elastic.largest["stage2.depth"] == 3 and elastic.smallest["stage2.depth"] == 1
    assert elastic.largest["width_multiplier"] == 1.0 and elastic.largest["stage1.se"] is True
    drawn = elastic.random_params(np.random.default_rng(0))
    assert set(drawn) == set(elastic.elastic)


def test_subnets_compute_what_the_supernet_computes_with_the_plans_params_and_flops() -> None:
    from nas.search.nets import count_flops, plan_network
    from nas.search.strategies.supernet.extract import extract
    from nas.search.strategies.supernet.network import Supernet

    elastic = _elastic()
    space = elastic.space
    supernet = Supernet(space.candidate(elastic.largest, num_classes=10, channels=1), seed=0)
    rng = np.random.default_rng(1)
    for bn in supernet.bn.values():  # statistics that are not the identity, so slicing them shows
        size = bn.mean.shape
        bn.mean.assign(rng.normal(0, 0.2, size).astype("float32"))
        bn.variance.assign(rng.uniform(0.5, 2.0, size).astype("float32"))
        bn.beta.assign(rng.normal(0, 0.2, size).astype("float32"))
    x = rng.random((6, 8, 8, 1)).astype("float32")
    configurations = [elastic.largest, elastic.smallest] + [elastic.random_params(rng) for _ in range(4)]
    seen = set()
    for params in configurations:
        candidate = space.candidate(params, num_classes=10, channels=1)
        plan = plan_network(candidate)
        subnet = extract(supernet, candidate)
        assert subnet.count_params() == plan.params() and count_flops(subnet) == plan.flops()
        expected = np.asarray(supernet(x, supernet.masks(plan)))
        np.testing.assert_allclose(np.asarray(subnet(x, training=False)), expected, atol=1e-5)
        seen.add(plan.params())
    assert len(seen) >= 4  # the configurations really differ


def _randomised_supernet(seed: int = 0) -> tuple[Any, Any]:
    from nas.search.strategies.supernet.network import Supernet

    elastic = _elastic()
    supernet = Supernet(elastic.space.candidate(elastic.largest, num_classes=10, channels=1), seed=seed)
    rng = np.random.default_rng(seed + 1)
    for bn in supernet.bn.values():
        size = bn.mean.shape
        bn.mean.assign(rng.normal(0, 0.2, size).astype("float32"))
        bn.variance.assign(rng.uniform(0.5, 2.0, size).astype("float32"))
        bn.beta.assign(rng.normal(0, 0.2, size).astype("float32"))
    return elastic, supernet


def test_sorting_channels_keeps_the_largest_network_and_puts_the_most_important_first() -> None:
    from nas.search.nets import plan_network

    elastic, supernet = _randomised_supernet()
    space = elastic.space
    largest = supernet.masks(supernet.plan)
    smallest = supernet.masks(plan_network(space.candidate(elastic.smallest, num_classes=10, channels=1)))
    x = np.random.default_rng(2).random((6, 8, 8, 1)).astype("float32")
    before_largest, before_smallest = np.asarray(supernet(x, largest)), np.asarray(supernet(x, smallest))
    orders = supernet.sort_channels()
    assert {"s1b0/hidden", "s1b0/se", "s2b2/hidden", "head"} <= set(orders)
    assert any((order != np.arange(len(order))).any() for order in orders.values())
    np.testing.assert_allclose(np.asarray(supernet(x, largest)), before_largest, atol=1e-5)
    # The subnets' first channels are other channels now.
    assert not np.allclose(np.asarray(supernet(x, smallest)), before_smallest, atol=1e-3)
    weights = dict(supernet.variables())
    for spans in supernet.channel_orders().values():
        key, axis = spans[0]
        value = np.abs(np.asarray(weights[key].numpy()))
        importance = value.sum(axis=tuple(i for i in range(value.ndim) if i != axis))
        assert (np.diff(importance) <= 1e-6).all(), key


def test_sorting_channels_moves_the_optimizers_state_with_the_weights() -> None:
    """Two Adam steps on the largest network, the channels sorted between them, end where
    the same steps without sorting end, reordered: the moments went with their weights."""
    import keras
    import tensorflow as tf

    from nas.search.strategies.supernet.train import _optimizer_for

    x = np.random.default_rng(3).random((8, 8, 8, 1)).astype("float32")
    y = np.arange(8) % 10
    ends, orders = [], None
    for sort in (True, False):
        _, supernet = _randomised_supernet()
        masks = supernet.masks(supernet.plan)
        optimizer, _ = _optimizer_for(supernet, steps=10)
        variables = supernet.trainable_variables
        for step in range(2):
            with tf.GradientTape() as tape:
                probabilities = supernet(x, masks, training=True)
                loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, probabilities))
            optimizer.apply(tape.gradient(loss, variables), variables)
            if sort and step == 0:
                orders = supernet.sort_channels(optimizer)
        ends.append({key: np.asarray(w.numpy()) for key, w in supernet.variables() if w.trainable})
    sorted_run, plain = ends
    assert orders is not None
    for group, spans in supernet.channel_orders().items():
        for key, axis in spans:
            if key in plain:
                plain[key] = np.take(plain[key], orders[group], axis=axis)
    for key, value in plain.items():
        # Float sums in another channel order differ in the last bits, which Adam scales up
        # where a gradient is near 0; state left behind moves weights by about the rate (1e-3).
        np.testing.assert_allclose(sorted_run[key], value, atol=2e-4, err_msg=key)


def test_channels_are_sorted_once_a_quarter_into_the_training() -> None:
    from nas.search.strategies.supernet.train import sort_epoch

    assert [sort_epoch(n, True) for n in (1, 2, 4, 12, 30)] == [0, 1, 1, 3, 7]
    assert sort_epoch(12, False) == 0


def test_recalibration_changes_only_the_statistics_to_their_average_over_the_batches() -> None:
    import keras

    from nas.search.strategies.supernet.extract import extract, recalibrate
    from nas.search.strategies.supernet.network import Supernet

    elastic = _elastic()
    candidate = elastic.space.candidate(elastic.smallest, num_classes=10, channels=1)
    subnet = extract(Supernet(elastic.space.candidate(elastic.largest, num_classes=10, channels=1)), candidate)
    rng = np.random.default_rng(2)
    batches = [(rng.random((16, 8, 8, 1)).astype("float32"), None) for _ in range(3)]
    trained = [np.array(w.numpy()) for w in subnet.trainable_weights]
    assert recalibrate(subnet, batches) == 3
    for w, before in zip(subnet.trainable_weights, trained, strict=True):
        np.testing.assert_array_equal(np.asarray(w.numpy()), before)
    # The stem's statistics: the average of each batch's mean and variance of its convolution.
    stem = subnet.get_layer("stem_bn")
    probe = keras.Model(subnet.input, subnet.get_layer("stem_conv").output)
    outputs = [np.asarray(probe(x)) for x, _ in batches]
    np.testing.assert_allclose(
        stem.moving_mean.numpy(), np.mean([o.mean(axis=(0, 1, 2)) for o in outputs], 0), atol=1e-5
    )
    np.testing.assert_allclose(
        stem.moving_variance.numpy(), np.mean([o.var(axis=(0, 1, 2)) for o in outputs], 0), rtol=1e-4, atol=1e-6
    )
    assert stem.momentum == 0.9  # put back


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"stage": {"filters": {"choice": [16, 24]}}}, "stage1.filters: a supernet cannot share"),
        ({"stage": {"expansion": {"choice": [1, 6]}}}, "stage1.expansion: expansion 1"),
        ({"search": {"early_stopping": {"method": "asha"}}}, "search.early_stopping"),
        ({"search": {"supernet": {"fixed": {"width_multiplier": 0.5}}}}, "search.supernet.fixed.width_multiplier"),
        ({"search": {"supernet": {"fixed": {"learning_rate": 5.0}}}}, "outside the space's range"),
    ],
)
def test_a_space_it_cannot_share_is_refused_with_exit_2(tmp_path: Path, change: dict[str, Any], named: str) -> None:
    space = _space()
    space["model"].update(change.get("model", {}))
    space["model"]["stages"][1].update(change.get("stage", {}))
    for key, value in change.get("search", {}).items():
        space["search"][key] = {**space["search"].get(key, {}), **value}
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    result = run_cli("space", "show", str(path), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], result.stderr


def test_space_show_lists_the_strategy_and_the_fixed_knobs(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(_space()))
    result = run_cli("space", "show", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Search strategy: supernet, 3 epochs of sandwich training" in text
    assert "front fine-tuned 3 epochs after the search;" in text
    assert "elastic: width_multiplier, stage1.depth," in text
    assert "fixed for the supernet: dropout=0.0, batch_size=32, learning_rate=0.0055" in text
    assert "channels sorted" not in text  # off unless asked for
    path.write_text(yaml.safe_dump(_space(supernet={"epochs": 3, "calibration_batches": 2, "sort_channels": True})))
    result = run_cli("space", "show", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "channels sorted by importance after epoch 1" in " ".join(result.stdout.split())


def test_a_study_resumes_only_with_its_strategy_and_supernet_settings(tmp_path: Path) -> None:
    from nas.errors import NasError
    from nas.search.engine.study import open_study
    from nas.search.space import space_from_dict

    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'nas.db'}")
    trials, supernet = space_from_dict(_space(strategy="trials")), space_from_dict(_space())
    open_study(trials, storage, "by-trials")
    open_study(space_from_dict(_space(strategy="trials", trials=9)), storage, "by-trials")  # budget may grow
    with pytest.raises(NasError, match=r"searched with search\.strategy trials, not supernet"):
        open_study(supernet, storage, "by-trials")
    open_study(supernet, storage, "by-supernet")
    with pytest.raises(NasError, match=r"searched with search\.strategy supernet, not trials"):
        open_study(trials, storage, "by-supernet")
    # Its trials are scored by weights these settings trained: other settings are another study.
    with pytest.raises(NasError, match="created from a different space"):
        open_study(space_from_dict(_space(supernet={"epochs": 5, "calibration_batches": 2})), storage, "by-supernet")
    with pytest.raises(NasError, match="created from a different space"):
        sorting = {"epochs": 3, "calibration_batches": 2, "sort_channels": True}
        open_study(space_from_dict(_space(supernet=sorting)), storage, "by-supernet")
    # Fine-tuning acts after the search: its settings may change on the same study.
    tuned = {"epochs": 3, "calibration_batches": 2, "finetune": {"epochs": 7, "learning_rate": 0.001}}
    open_study(space_from_dict(_space(supernet=tuned)), storage, "by-supernet")

    # `nas finetune` is for a supernet study whose supernet is trained; anything else: exit 2.
    from nas.search.engine import SearchOptions
    from nas.search.records import StudyAttr
    from nas.storage import resolve_storage_url

    url = f"sqlite:///{tmp_path / 'nas.db'}"
    shared = SearchOptions(resolve_storage_url(url), "x", 3, "tpe", 0).shared()
    for name, document in (("by-trials", _space(strategy="trials")), ("by-supernet", _space())):
        made = optuna.load_study(study_name=name, storage=storage)  # as `nas search` leaves it
        made.set_user_attr(StudyAttr.SPACE_DOCUMENT, document)
        made.set_user_attr(StudyAttr.SEARCH, shared)
        made.set_user_attr(StudyAttr.BUDGET, 3)
    for name, message in (
        ("by-trials", "study 'by-trials' trained every trial's network itself; fine-tuning is for supernet studies"),
        ("by-supernet", "study 'by-supernet' has no supernet checkpoint at "),
        ("nope", "study 'nope' not found"),
    ):
        result = run_cli("finetune", name, "--storage", url, cwd=tmp_path)
        assert result.returncode == 2 and result.stderr.startswith(f"Error: {message}"), result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_killed_supernet_training_resumes_from_its_last_epoch_and_the_search_finishes(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    supernet = {"epochs": 2, "calibration_batches": 2, "fixed": {"learning_rate": 0.01}, "finetune": {"epochs": 0}}
    space = _space(supernet=supernet)
    space["measure"] = {**space["measure"], "confirm": False}
    # Two stages (depth, kernel, expansion, SE and width still elastic): the sandwich step is
    # traced once per process, and with a third stage each trace took 10 s here, not 6.
    space["model"]["stages"] = space["model"]["stages"][:2]
    path.write_text(yaml.safe_dump(space))
    storage = f"sqlite:///{tmp_path / 'nas.db'}"
    kill_nas_at("supernet: epoch 1/2", "search", str(path), "--storage", storage, cwd=tmp_path)
    first = optuna.load_study(study_name="elastic", storage=storage).user_attrs["supernet"]
    assert first["done"] == 1 and not optuna.load_study(study_name="elastic", storage=storage).trials

    # The kill needed a process of its own; the resumes are searches like any (in this one).
    resumed = run_cli("search", str(path), "--storage", storage, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "supernet: resuming from epoch 1 of 2" in resumed.stderr + resumed.stdout
    study = optuna.load_study(study_name="elastic", storage=storage)
    record = study.user_attrs["supernet"]
    assert record["done"] == 2 and record["history"][:1] == first["history"]
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 3
    assert all(t.user_attrs["accuracy_source"] == "supernet" for t in done)
    # Trials store the training knobs the supernet trained with, so they rebuild as they are.
    assert all(t.params["batch_size"] == 32 and t.params["dropout"] == 0.0 for t in done)
    assert max(t.values[0] for t in done) > 0.25  # inherited weights after 14 steps; chance is 0.1

    # Resumed once more, now fine-tuning (not part of the study's space, so no other study): the
    # supernet is loaded, not trained again, the budget grows and the front is fine-tuned.
    weights = WeightStore(sa.create_engine(storage), tmp_path / "nas-artifacts")
    inherited = {t.number: weights.get("elastic", t.number) for t in done}
    space["search"]["supernet"]["finetune"] = {"epochs": 1}
    path.write_text(yaml.safe_dump(space))
    again = run_cli("search", str(path), "--storage", storage, "--trials", "4", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "supernet: trained (2 epochs), loaded from" in again.stderr + again.stdout
    study = optuna.load_study(study_name="elastic", storage=storage)
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) == 4
    front = {t.number: t for t in study.best_trials}
    assert f"Fine-tuning {len(front)} subnets of the front from their inherited weights: 1 epoch each" in again.stderr
    tuned = study.user_attrs["finetuned"]["trials"]
    assert set(tuned) == {str(n) for n in front}
    for number, t in front.items():
        figure = tuned[str(number)]
        assert figure["inherited"] == t.values[0] and 0 <= figure["accuracy"] <= 1 and len(figure["val_accuracy"]) == 1
        assert figure["epochs"] == 1 and figure["learning_rate"] == pytest.approx(0.001) and figure["weights_kept"]
        # The trial's stored model is now the fine-tuned one.
        if inherited.get(number):
            stored = weights.get("elastic", number)
            assert stored is not None and stored.sha256 != inherited[number].sha256
    records = json.loads(run_cli("pareto", "elastic", "--storage", storage, "--format", "json", cwd=tmp_path).stdout)
    assert {r["trial"]: r["finetuned_accuracy"] for r in records if r["on_front"]} == {
        n: tuned[str(n)]["accuracy"] for n in front
    }
    # Asked again with the same epochs: nothing left to fine-tune.
    nothing = run_cli("finetune", "elastic", "--storage", storage, cwd=tmp_path)
    assert nothing.returncode == 0 and "Fine-tuning" not in nothing.stderr, nothing.stderr[-3000:]

    # The front's fine-tuned subnets export through the same converters and parity checks as
    # any trial; the Keras model exported scores what the fine-tuning scored.
    out = tmp_path / "exported"
    exported = run_cli("export", "elastic", "--storage", storage, "--format", "tflite", "--out", str(out), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "search weights (fine-tuned 1 epoch)" in exported.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["passed"] is True and manifest["trials"]
    one_image = 1 / manifest["trials"][0]["parity"]["images"]
    for record in manifest["trials"]:
        assert record["parity"]["passed"] and record["finetuned"] == tuned[str(record["trial"])]
        assert record["parity"]["keras_accuracy"] == pytest.approx(record["finetuned"]["keras_accuracy"], abs=one_image)


@pytest.mark.slow
def test_the_python_api_finishes_a_supernet_search_as_the_command_line_does(tmp_path: Path) -> None:
    """`nas.api.search` calls the engine's one entry: after a supernet search it fine-tunes
    the front and confirms its throughput, as `nas search` does (engine/strategy.py)."""
    import nas.api

    supernet = {"epochs": 1, "calibration_batches": 2, "fixed": {"learning_rate": 0.01}, "finetune": {"epochs": 1}}
    space = _space(supernet=supernet)
    space["model"]["stages"] = space["model"]["stages"][:2]  # one trace of the sandwich step, as above
    space["dataset"]["test_fraction"] = 0.2  # for `nas train` below
    space["final"] = {"epochs": 1, "warmup_epochs": 0, "trials": 1}
    lines: list[str] = []
    storage = f"sqlite:///{tmp_path / 'api.db'}"
    # Told not to finish (a benchmark's clock), the engine stops after the trials.
    unfinished = nas.api.search(space, storage=storage, trials=2, finish=False)
    assert "finetuned" not in unfinished.optuna.user_attrs and "confirmed" not in unfinished.optuna.user_attrs
    # Run again, its budget already spent, the search only finishes: fine-tuning and confirming
    # the first run's trials (the supernet is not trained again).
    found = nas.api.search(space, storage=storage, trials=2, on_message=lines.append)
    study = found.optuna
    assert [t.number for t in study.trials] == [t.number for t in unfinished.optuna.trials]
    assert not any(line.startswith("supernet:") for line in lines), lines
    front = {str(t.number) for t in study.best_trials}
    # Subnets are not timed at batch 1 unless the space asks (SpaceSpec.search_measure).
    assert [t.user_attrs["hardware"]["latency"] for t in study.trials] == [None, None]
    assert set(study.user_attrs["finetuned"]["trials"]) == front
    assert front <= set(study.user_attrs["confirmed"]["trials"])
    assert any(line.startswith("Fine-tuning") for line in lines) and any(
        line.startswith("Confirming") for line in lines
    )
    # `nas train`, the finishing command of both strategies, starts a supernet study's networks
    # from their inherited weights, or from scratch when told.
    for flags, start in (((), "inherited"), (("--from-scratch",), "scratch")):
        trained = run_cli("train", found.name, "--storage", storage, *flags, cwd=tmp_path)
        assert trained.returncode == 0, trained.stderr[-3000:]
        final = optuna.load_study(study_name=found.name, storage=storage).user_attrs["final"]["trials"]
        assert [f["recipe"]["start"] for f in final.values()] == [start]
        assert f"from {'inherited weights' if start == 'inherited' else 'scratch'}" in trained.stderr


def test_recalibration_reaches_the_batchnorm_of_a_nested_model() -> None:
    """A keras.applications network wrapped in another model (benchmarks/fashion_references.py)
    keeps its BatchNormalization one level down: re-estimating must reach it."""
    import keras
    import numpy as np

    from nas.search.strategies.supernet.extract import recalibrate

    inner = keras.Sequential([keras.Input((4, 4, 1)), keras.layers.Conv2D(2, 1), keras.layers.BatchNormalization()])
    inputs = keras.Input((4, 4, 1))
    outer = keras.Model(inputs, inner(keras.layers.Rescaling(2.0)(inputs)))
    batch = np.full((8, 4, 4, 1), 3.0, dtype=np.float32)
    assert recalibrate(outer, [(batch, None)]) == 1
    norm = inner.layers[-1]
    expected = np.asarray(inner.layers[0](2.0 * batch)).mean(axis=(0, 1, 2))
    np.testing.assert_allclose(np.asarray(norm.moving_mean), expected, rtol=1e-5)


@pytest.mark.slow
def test_a_supernet_left_by_another_space_of_the_same_name_is_refused(tmp_path: Path) -> None:
    """A new database, the same study name, another space: the folder's supernet.npz was
    trained for the old space and must not score this study's subnets."""
    # The cheapest supernet search that leaves a checkpoint: one epoch, nothing after the search.
    quick = {"epochs": 1, "calibration_batches": 2, "reference_subnets": False, "finetune": {"epochs": 0}}
    space = _space(trials=1, supernet=quick)
    space["measure"] = {**space["measure"], "confirm": False}
    space["model"]["stages"] = space["model"]["stages"][:2]  # the cheaper trace
    first = tmp_path / "first.yaml"
    first.write_text(yaml.safe_dump(space))
    result = run_cli("search", str(first), "--no-weights", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "supernet: epoch 1/1" in result.stderr
    for path in tmp_path.glob("nas.db*"):
        path.unlink()
    other = json.loads(json.dumps(space))
    other["model"]["width_multiplier"] = {"choice": [0.75, 1.0]}
    second = tmp_path / "second.yaml"
    second.write_text(yaml.safe_dump(other))
    result = run_cli("search", str(second), "--no-weights", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "supernet.npz holds a supernet trained for another space" in result.stderr
    assert "--artifacts" in result.stderr and len(result.stderr.strip().splitlines()) == 1

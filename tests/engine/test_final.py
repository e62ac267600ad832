"""`nas train`: the front trained again with the space's final recipe and scored once on a
test set the search never read; killed, it resumes from its last epoch; its models export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import yaml

from ..helpers import QUICK_MEASURE, kill_nas_at, run_cli


def _write_npz(path: Path, x: np.ndarray, y: np.ndarray) -> str:
    np.savez(path, x=x, y=y)
    return str(path)


def _images(tmp_path: Path, seed: int = 0) -> tuple[str, str, np.ndarray]:
    """A learnable 10-class set of 12x12 images (the class is the brightness, which survives
    global pooling) and a test set of the same kind; returns both files and the test labels."""
    rng = np.random.default_rng(seed)

    def make(count: int) -> tuple[np.ndarray, np.ndarray]:
        y = rng.integers(0, 10, count).astype(np.int64)
        x = (rng.integers(0, 30, (count, 12, 12, 1)) + 22 * y[:, None, None, None]).astype(np.uint8)
        return x, y

    x, y = make(1000)
    xt, yt = make(120)
    return _write_npz(tmp_path / "train.npz", x, y), _write_npz(tmp_path / "test.npz", xt, yt), yt


def _space(train: str, test: str, **final: Any) -> dict[str, Any]:
    return {
        "name": "final",
        "dataset": {"source": "npz", "path": train, "test_path": test, "image_size": 12, "channels": 1},
        "model": {
            "stem_filters": 8,
            "stem_stride": 1,
            "head_filters": 16,
            "stages": [{"filters": 8, "kernel": {"choice": [3, 5]}}, {"filters": 16, "stride": 2}],
        },
        "training": {"epochs": 4, "batch_size": 32, "learning_rate": 0.02},
        "measure": {**QUICK_MEASURE, "confirm": False},
        "final": {"epochs": 4, "warmup_epochs": 1, "trials": 1, **final},
        "search": {"trials": 2},
    }


@pytest.mark.slow
def test_permuting_the_test_labels_changes_nothing_the_search_chose(tmp_path: Path) -> None:
    """The test set is read by `nas train` only: two searches of one space whose test labels
    differ sample the same trials and get the same objectives (throughput from the shared
    measurement cache, so the figures compare exactly)."""
    import nas.api

    train, test, labels = _images(tmp_path)
    storage = f"sqlite:///{tmp_path / 'nas.db'}"
    first = nas.api.search(_space(train, test), storage=storage, study="labels-as-given").optuna
    shuffled = np.random.default_rng(1).permutation(labels)
    assert (shuffled != labels).any()
    with np.load(test) as held:
        _write_npz(Path(test), held["x"], shuffled)
    second = nas.api.search(_space(train, test), storage=storage, study="labels-permuted").optuna

    def seen(study: optuna.Study) -> list[tuple[dict[str, Any], list[float] | None]]:
        return [(t.params, t.values) for t in study.trials]

    assert seen(first) == seen(second) and len(first.trials) == 2
    # The networks learned (a network that predicts one class scores the same on permuted labels).
    assert max(t.values[0] for t in first.trials) > 0.5
    # The dataset summary the study keeps (what workers see) tells the test set's size, nothing of its labels.
    assert first.user_attrs["dataset"]["test"] == second.user_attrs["dataset"]["test"] == 120


@pytest.mark.slow
def test_a_killed_final_training_resumes_from_its_last_epoch_and_its_model_exports(tmp_path: Path) -> None:
    train, test, _ = _images(tmp_path)
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(_space(train, test, epochs=6)))
    storage = f"sqlite:///{tmp_path / 'nas.db'}"
    searched = run_cli("search", str(path), "--storage", storage, cwd=tmp_path)
    assert searched.returncode == 0, searched.stderr[-3000:]

    kill_nas_at("epoch 2/6", "train", "final", "--storage", storage, cwd=tmp_path)
    assert "final" not in optuna.load_study(study_name="final", storage=storage).user_attrs  # nothing finished

    resumed = run_cli("train", "final", "--storage", storage, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    done = int(next(line for line in resumed.stderr.splitlines() if "resuming" in line).split("after epoch ")[1][0])
    assert done >= 2
    epochs = [line for line in resumed.stderr.splitlines() if "final training of trial" in line]
    assert f"epoch {done + 1}/6" in epochs[0] and "epoch 6/6" in epochs[-1] and len(epochs) == 6 - done
    study = optuna.load_study(study_name="final", storage=storage)
    (number, figures), *_ = study.user_attrs["final"]["trials"].items()
    assert len(figures["history"]["loss"]) == 6 and figures["recipe"]["epochs"] == 6
    assert 0.0 <= figures["test_accuracy"] <= 1.0 and figures["throughput"] > 0
    records = json.loads(run_cli("pareto", "final", "--storage", storage, "--format", "json", cwd=tmp_path).stdout)
    assert {r["trial"]: r["test_accuracy"] for r in records}[int(number)] == figures["test_accuracy"]
    again = run_cli("train", "final", "--storage", storage, cwd=tmp_path)  # the same recipe: nothing to do
    assert again.returncode == 0 and "Final training of" not in again.stderr, again.stderr[-2000:]

    out = tmp_path / "exported"
    export = ("export", "final", "--storage", storage, "--format", "tflite", "--out", str(out), "--trial", number)
    exported = run_cli(*export, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "final-trained 6 epochs" in exported.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    record = next(r for r in manifest["trials"] if str(r["trial"]) == number)
    assert manifest["passed"] is True and record["parity"]["passed"]
    assert record["final"]["test_accuracy"] == figures["test_accuracy"]

    # A fresh clone of the results (the figures in the database, not the model file): nothing is
    # trained again unasked, and the export says why it cannot export that trial.
    (tmp_path / "nas-artifacts" / figures["model"]).unlink()  # stored relative to the artifacts folder
    kept = run_cli("train", "final", "--storage", storage, cwd=tmp_path)
    assert kept.returncode == 0 and "Final training of" not in kept.stderr
    assert f"trial {number}: final-trained with this recipe already (figures kept)" in kept.stderr
    missing = run_cli(*export, cwd=tmp_path)
    assert missing.returncode == 2 and "the final-trained model of trial" in missing.stderr


def test_a_test_path_is_outside_the_study_s_fingerprint(tmp_path: Path) -> None:
    """Adding a test set to a finished study's space file changes nothing the search read."""
    from nas.search.space import space_from_dict

    train, test, _ = _images(tmp_path)
    with_test = space_from_dict(_space(train, test))
    without = _space(train, test)
    del without["dataset"]["test_path"]
    assert with_test.fingerprint() == space_from_dict(without).fingerprint()
    held_out = _space(train, test)
    held_out["dataset"] = {**held_out["dataset"], "test_path": None, "test_fraction": 0.2}
    assert space_from_dict(held_out).fingerprint() != with_test.fingerprint()  # other training data


def test_a_final_training_needs_a_test_set_and_finished_trials(tmp_path: Path) -> None:
    from nas.errors import NasError
    from nas.search.engine.final import final_data

    train, test, _ = _images(tmp_path)
    storage = f"sqlite:///{tmp_path / 'nas.db'}"
    optuna.create_study(storage=storage, study_name="other")
    for args, message in (
        (("train", "nope"), "study 'nope' not found"),
        (("train", "nope", "--trials", "x"), "--trials: 'x' is not a list of trial numbers"),
    ):
        result = run_cli(*args, "--storage", storage, cwd=tmp_path)
        assert result.returncode == 2 and result.stderr.startswith(f"Error: {message}"), result.stderr
    from nas.search.data import load_dataset
    from nas.search.space import space_from_dict

    without = space_from_dict({**_space(train, test), "dataset": {"source": "digits", "image_size": 8}})
    with pytest.raises(NasError, match="no test set"):
        final_data(load_dataset(without.spec.dataset), "train")

"""The Python API walks what the command line walks, through `nas.api` only: search, choose by
figures, final-train, confirm, load the Keras model and predict, export; with the command
line's errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import nas.api

from ..helpers import QUICK_MEASURE


def _space() -> dict[str, Any]:
    """The tiny preset's kind of network on the built-in digits, with a test split for `train`."""
    return {
        "name": "api",
        "dataset": {"source": "digits", "image_size": 8, "subset": 300, "test_fraction": 0.2},
        "model": {
            "stem_filters": 8,
            "stem_stride": 1,
            "head_filters": 16,
            "stages": [{"filters": 8, "kernel": {"choice": [3, 5]}}, {"filters": 16, "stride": 2}],
        },
        "training": {"epochs": 1, "batch_size": 32, "learning_rate": 0.02},
        "measure": {**QUICK_MEASURE, "confirm": False},
        "final": {"epochs": 1, "warmup_epochs": 0, "trials": 1},
        "search": {"trials": 2},
    }


@pytest.mark.slow  # trains
def test_search_train_best_model_predict_export(tmp_path: Path) -> None:
    import keras  # reads the exported file, as a user of it would
    from sklearn.datasets import load_digits

    study = nas.api.search(_space(), storage=f"sqlite:///{tmp_path / 'nas.db'}")
    front = study.pareto()
    best = study.best("accuracy")
    assert best in front and best["accuracy"] == max(r["accuracy"] for r in front)
    bound = best["params"]
    assert all(r["params"] <= bound for r in study.pareto(where=f"params<={bound}"))
    number = best["trial"]

    figures = study.train(trials=[number])
    assert 0.0 <= figures[number]["test_accuracy"] <= 1.0 and Path(figures[number]["model"]).is_file()
    assert study.best("test_accuracy")["trial"] == number  # the only final-trained trial

    assert all(r["confirmed_throughput"] is None for r in front)
    confirmed = study.confirm()
    assert confirmed and all(r["confirmed_throughput"] > 0 for r in confirmed)

    model = study.model(number)
    assert model.nas_weights == "final-trained"
    images = (load_digits().images[:20, :, :, None] / 16.0).astype(np.float32)
    predicted = model.predict(images, verbose=0)
    assert predicted.shape == (20, 10) and np.allclose(predicted.sum(axis=1), 1.0, atol=1e-4)
    searched = study.model(number, search_weights=True)
    assert searched.nas_weights == "search"
    assert not np.allclose(searched.predict(images, verbose=0), predicted)  # other weights

    manifest = study.export("keras", tmp_path / "exported", trials=[number])
    (record,) = manifest["trials"]
    assert record["weights"] == "final-trained" and record["final"]["test_accuracy"] == figures[number]["test_accuracy"]
    assert manifest["passed"] is True
    exported = keras.saving.load_model(tmp_path / "exported" / record["files"][0]["path"])
    assert np.allclose(exported.predict(images, verbose=0), predicted, atol=1e-6)  # the final-trained model
    (other,) = study.export("keras", tmp_path / "search", trials=[number], search_weights=True)["trials"]
    assert other["weights"] == "search" and other["final"] is None

    # The command line's errors, with the API's parameter names.
    errors = [
        (lambda: study.best("accuracy", where="throughput>=1e12"), "where throughput>=1e12: no trial of study 'api'"),
        (lambda: study.best("speed"), "objective 'speed': unknown figure 'speed' (figures: accuracy,"),
        (lambda: study.train(trials=[number], where="params>0"), "trials names the trials and where chooses them"),
        (lambda: study.model(99), "study 'api' has no trial 99"),
        (
            lambda: study.export("keras", tmp_path / "x", search_weights=True, retrain_full=True),
            "search_weights exports the search's weights, retrain_full trains new ones",
        ),
    ]
    for call, message in errors:
        with pytest.raises(nas.api.NasError) as caught:
            call()
        assert message in str(caught.value), str(caught.value)

"""The Python API walks what the command line walks, through `nas.api` only: search, choose by
figures, final-train, confirm, load the Keras model and predict, export; with the command
line's errors."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

import nas.api

from ..helpers import REPO


@pytest.mark.slow  # trains
def test_search_train_best_model_predict_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/python_api.py as a user runs it (2 trials), then its study through nas.api."""
    import keras  # reads the exported file, as a user of it would
    from sklearn.datasets import load_digits

    storage = f"sqlite:///{tmp_path / 'nas.db'}"
    monkeypatch.chdir(tmp_path)
    example = runpy.run_path(str(REPO / "examples" / "python_api.py"))
    monkeypatch.setattr(sys, "argv", ["python_api.py", "--trials", "2", "--storage", storage, "--out", "demo"])
    example["main"]()
    assert json.loads((tmp_path / "demo" / "manifest.json").read_text())["passed"] is True

    study = nas.api.load("api-demo", storage=storage)
    front = study.pareto()
    best = study.best("accuracy")
    assert best in front and best["accuracy"] == max(r["accuracy"] for r in front)
    bound = best["params"]
    assert all(r["params"] <= bound for r in study.pareto(where=f"params<={bound}"))
    (number,) = [r["trial"] for r in front if r["test_accuracy"] is not None]  # the example's choice

    figures = study.train(trials=[number])  # trained by the example already: kept, not trained again
    assert 0.0 <= figures[number]["test_accuracy"] <= 1.0 and Path(figures[number]["model"]).is_file()
    assert study.best("test_accuracy")["trial"] == number  # the only final-trained trial

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
        (
            lambda: study.best("accuracy", where="throughput>=1e12"),
            "where throughput>=1e12: no trial of study 'api-demo'",
        ),
        (lambda: study.best("speed"), "objective 'speed': unknown figure 'speed' (figures: accuracy,"),
        (lambda: study.train(trials=[number], where="params>0"), "trials names the trials and where chooses them"),
        (lambda: study.model(99), "study 'api-demo' has no trial 99"),
        (
            lambda: study.export("keras", tmp_path / "x", search_weights=True, retrain_full=True),
            "search_weights exports the search's weights, retrain_full trains new ones",
        ),
    ]
    for call, message in errors:
        with pytest.raises(nas.api.NasError) as caught:
            call()
        assert message in str(caught.value), str(caught.value)

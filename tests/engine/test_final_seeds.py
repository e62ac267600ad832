"""`nas train` on one small final-trained study, copied per test: `--seeds N` trains only the
seeds it lacks and stores each seed's figures with their mean; `--again` trains again; a copied
study finds its final models and its data from the artifacts folder it is given."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import yaml
from optuna.trial import TrialState

from nas.errors import NasError

from ..helpers import QUICK_MEASURE, run_cli

pytestmark = pytest.mark.slow  # a search and final trainings

SPACE: dict[str, Any] = {
    "name": "seeds",
    # Written relative to the space file, as a user's own data is.
    "dataset": {"source": "npz", "path": "data/train.npz", "test_path": "data/test.npz", "image_size": 8},
    "model": {"stem_filters": 8, "stem_stride": 1, "head_filters": 16, "stages": [{"filters": 8}]},
    "training": {"epochs": 1, "batch_size": 32, "learning_rate": 0.02},
    "measure": {**QUICK_MEASURE, "latency": False, "confirm": False},
    "final": {"epochs": 1, "warmup_epochs": 0, "trials": 1},
    "search": {"trials": 1},
}


@pytest.fixture(scope="module")
def _trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One searched trial, final-trained once (seed 0): space.yaml, data/, nas.db and
    nas-artifacts/ in a folder."""
    from sklearn.datasets import load_digits

    import nas.api

    folder = tmp_path_factory.mktemp("final-seeds")
    (folder / "data").mkdir()
    x, y = load_digits(return_X_y=True)
    images = (x.reshape(-1, 8, 8) * 15).astype(np.uint8)
    np.savez(folder / "data" / "train.npz", x=images[:300], y=y[:300])
    np.savez(folder / "data" / "test.npz", x=images[300:420], y=y[300:420])
    (folder / "space.yaml").write_text(yaml.safe_dump(SPACE))
    nas.api.search(str(folder / "space.yaml"), storage=f"sqlite:///{folder / 'nas.db'}")
    trained = run_cli("train", "seeds", "--storage", f"sqlite:///{folder / 'nas.db'}", cwd=folder)
    assert trained.returncode == 0, trained.stderr[-3000:]
    return folder


def _copy(source: Path, to: Path, *, artifacts: Path | None = None) -> str:
    """The study's database in `to`, its artifacts beside it or in `artifacts`; its URL."""
    to.mkdir(parents=True, exist_ok=True)
    for path in source.glob("nas.db*"):
        shutil.copy2(path, to / path.name)
    shutil.copytree(source / "nas-artifacts", artifacts or to / "nas-artifacts")
    return f"sqlite:///{to / 'nas.db'}"


def _final(storage: str) -> dict[str, Any]:
    record: dict[str, Any] = optuna.load_study(study_name="seeds", storage=storage).user_attrs["final"]
    return record


def test_more_seeds_train_only_those_missing_and_store_each_seed_with_their_mean(
    _trained: Path, tmp_path: Path
) -> None:
    storage = _copy(_trained, tmp_path)
    (number, before), *_ = _final(storage)["trials"].items()
    assert "seeds" not in before  # one seed: the record as nas stored it before seeds

    result = run_cli("train", "seeds", "--seeds", "2", "--storage", storage, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Final training of 1 trial ({number}: seed 1)" in result.stderr  # seed 0 is not trained again
    figures = _final(storage)["trials"][number]
    runs = figures["seeds"]
    assert [run["seed"] for run in runs] == [0, 1]
    first = {key: before[key] for key in runs[0] if key != "seed"}
    assert {key: value for key, value in runs[0].items() if key != "seed"} == first  # kept as it was
    accuracies = [run["test_accuracy"] for run in runs]
    assert figures["test_accuracy"] == pytest.approx(statistics.mean(accuracies), abs=1e-6)
    assert figures["test_accuracy_sd"] == pytest.approx(statistics.stdev(accuracies), abs=1e-6)
    speeds = [run["throughput"] for run in runs]
    assert figures["throughput"] == pytest.approx(statistics.mean(speeds), abs=0.01)
    assert figures["throughput_sd"] == pytest.approx(statistics.stdev(speeds), abs=0.01)
    # The kept model is the seed's closest to the mean: two seeds are equally close, so the lower
    # seed's; every seed's file is kept.
    assert (figures["model"], figures["sha256"]) == (runs[0]["model"], runs[0]["sha256"])
    assert all((tmp_path / "nas-artifacts" / run["model"]).is_file() for run in runs)
    assert "±" in result.stdout and "2 seeds" in result.stdout

    # The other commands read the mean.
    records = json.loads(run_cli("pareto", "seeds", "--storage", storage, "--format", "json", cwd=tmp_path).stdout)
    shown = next(r for r in records if str(r["trial"]) == number)
    assert shown["test_accuracy"] == figures["test_accuracy"]
    assert shown["final_throughput"] == figures["throughput"]

    fewer = run_cli("train", "seeds", "--seeds", "1", "--storage", storage, cwd=tmp_path)
    assert fewer.returncode == 0 and "Final training of" not in fewer.stderr  # nothing missing
    assert _final(storage)["trials"][number] == figures  # every stored seed kept

    # Trained again with one seed: seed 0's record alone, as before seeds; seed 1's file is gone.
    again = run_cli("train", "seeds", "--again", "--storage", storage, cwd=tmp_path)
    assert again.returncode == 0 and f"Final training of 1 trial ({number})" in again.stderr, again.stderr[-2000:]
    assert "seeds" not in _final(storage)["trials"][number]
    assert not (tmp_path / "nas-artifacts" / runs[1]["model"]).exists()
    assert (tmp_path / "nas-artifacts" / runs[0]["model"]).is_file()


def test_again_trains_a_final_trained_trial_again(_trained: Path, tmp_path: Path) -> None:
    storage = _copy(_trained, tmp_path)
    (number, before), *_ = _final(storage)["trials"].items()
    model = tmp_path / "nas-artifacts" / "seeds" / "final" / f"trial-{number}.keras"
    stamp = model.stat().st_mtime_ns

    kept = run_cli("train", "seeds", "--storage", storage, cwd=tmp_path)
    assert kept.returncode == 0 and "Final training of" not in kept.stderr
    again = run_cli("train", "seeds", "--again", "--storage", storage, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"Final training of 1 trial ({number})" in again.stderr and "figures kept" not in again.stderr
    assert model.stat().st_mtime_ns != stamp  # a new model, not the old one
    after = _final(storage)["trials"][number]
    assert after["recipe"] == before["recipe"] and after["history"]["seconds"] != before["history"]["seconds"]


def test_a_copied_study_finds_its_final_models_and_data_from_the_artifacts_folder_it_is_given(
    _trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nas.search.engine import final_model_file

    # The database in one folder; the artifacts and the data beside each other in another, as
    # they were; the folders it was trained in gone (the study names them as another machine's).
    moved = tmp_path / "elsewhere" / "artifacts"
    storage = _copy(_trained, tmp_path / "db", artifacts=moved)
    shutil.copytree(_trained / "data", moved.parent / "data")
    study = optuna.load_study(study_name="seeds", storage=storage)
    assert study.user_attrs["data_paths"] == {"path": "../data/train.npz", "test_path": "../data/test.npz"}
    document = study.user_attrs["space_document"]
    document["dataset"] |= {"path": "/training/machine/data/train.npz", "test_path": "/training/machine/data/test.npz"}
    study.set_user_attr("space_document", document)
    (number, figures), *_ = _final(storage)["trials"].items()
    assert not Path(figures["model"]).is_absolute()  # stored relative to the artifacts folder

    out = tmp_path / "exported"
    args = ("export", "seeds", "--format", "keras", "--trial", number, "--out", str(out), "--storage", storage)
    missing = run_cli(*args, cwd=tmp_path)  # the default folder, beside the database, holds neither
    assert missing.returncode == 2 and "final-trained model of trial" in missing.stderr, missing.stderr[-2000:]
    exported = run_cli(*args, "--artifacts", str(moved), cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert "final-trained 1 epoch" in exported.stderr

    # A record from before relative paths: the training machine's absolute path, found by its tail.
    record = study.user_attrs["final"]
    record["trials"][number]["model"] = f"/training/machine/nas-artifacts/{figures['model']}"
    study.set_user_attr("final", record)
    assert final_model_file(study, int(number), moved) == moved / figures["model"]
    (moved / figures["model"]).unlink()
    with pytest.raises(NasError, match=f"model of trial {number} is missing at {moved / figures['model']}"):
        final_model_file(study, int(number), moved)

    # `nas worker` on this machine joins the study and finds the data as nas train does.
    from nas.search.engine import join_study
    from nas.storage import resolve_storage_url

    monkeypatch.setenv("NAS_ARTIFACTS", str(moved))
    dataset = join_study(resolve_storage_url(storage), "seeds").space.spec.dataset
    assert (dataset.path, dataset.test_path) == (
        str(moved.parent / "data" / "train.npz"),
        str(moved.parent / "data" / "test.npz"),
    )


def test_a_search_resumes_in_a_project_folder_copied_with_its_data(_trained: Path, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    shutil.copytree(_trained, moved)
    storage = f"sqlite:///{moved / 'nas.db'}"
    # The stored space names the first folder's data; this one's lie where the study says, beside its artifacts.
    resumed = run_cli("search", "space.yaml", "--storage", storage, "--trials", "2", cwd=moved)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Resuming study 'seeds': 1 of 2 trials finished" in resumed.stderr
    assert len(optuna.load_study(study_name="seeds", storage=storage).get_trials(states=[TrialState.COMPLETE])) == 2

    # Another data file is another space, moved or not.
    shutil.copy2(moved / "data" / "train.npz", moved / "data" / "other.npz")
    other = {**SPACE, "dataset": {**SPACE["dataset"], "path": "data/other.npz"}}
    (moved / "space.yaml").write_text(yaml.safe_dump(other))
    refused = run_cli("search", "space.yaml", "--storage", storage, cwd=moved)
    assert refused.returncode == 2 and "was created from a different space" in refused.stderr, refused.stderr[-2000:]

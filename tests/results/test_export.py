"""`nas export` against a real study: every float format run in its real runtime, int8
TFLite, the manifest, weight retention, and the error paths."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import optuna
import pytest
import sqlalchemy as sa
import yaml
from optuna.trial import TrialState

from nas.storage.weights import WeightStore

from ..helpers import REPO, run_cli, run_nas


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 5-trial search on all digits at 8x8 (450 validation images, so a one-image slip is
    0.2 points, not the 1 point of the tiny preset's 100)."""
    folder = tmp_path_factory.mktemp("export-study")
    data = yaml.safe_load((REPO / "spaces" / "tiny.yaml").read_text())
    data["name"] = "exp"
    data["dataset"].pop("subset")
    data["training"]["epochs"] = 4
    data["measure"] = {"batch_sizes": [32], "latency": False, "rounds": 3, "round_seconds": 0.05}
    (folder / "exp.yaml").write_text(yaml.safe_dump(data))
    result = run_nas("search", "exp.yaml", "--trials", "5", cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder


def _study(folder: Path) -> optuna.Study:
    return optuna.load_study(study_name="exp", storage=f"sqlite:///{folder / 'nas.db'}")


def _store(folder: Path) -> WeightStore:
    return WeightStore(sa.create_engine(f"sqlite:///{folder / 'nas.db'}"), folder / "nas-artifacts")


@pytest.mark.slow
def test_retention_keeps_the_front_and_deletes_dominated_weights(study_dir: Path) -> None:
    study = _study(study_dir)
    finished = {t.number for t in study.trials if t.state == TrialState.COMPLETE and "screened" not in t.user_attrs}
    front = {t.number for t in study.best_trials}
    rows = {w.trial: w for w in _store(study_dir).all("exp")}
    assert set(rows) == finished  # every trained trial's weights were saved once
    assert {n for n, w in rows.items() if w.available} == front
    dominated = finished - front
    for n in dominated:
        assert rows[n].deleted is not None and not rows[n].path.exists()
    for n in front:
        assert hashlib.sha256(rows[n].path.read_bytes()).hexdigest() == rows[n].sha256
    files = sorted(p.name for p in (study_dir / "nas-artifacts" / "exp").iterdir())
    assert files == sorted(f"trial-{n}.keras" for n in front)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fmt", "runtime", "suffix"),
    [
        ("keras", "keras", "model.keras"),
        ("savedmodel", "tensorflow", "saved_model.pb"),
        ("tflite", "ai-edge-litert", "model.tflite"),
        ("onnx", "onnxruntime", "model.onnx"),
    ],
)
def test_float_formats_match_the_keras_model_in_their_runtime(
    study_dir: Path, fmt: str, runtime: str, suffix: str
) -> None:
    out = study_dir / f"out-{fmt}"
    result = run_nas("export", "exp", "--format", fmt, "--out", str(out), cwd=study_dir)
    assert result.returncode == 0, result.stderr + result.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    study = _study(study_dir)
    front = {t.number: t for t in study.best_trials}
    assert [r["trial"] for r in manifest["trials"]] == sorted(front)
    assert manifest["passed"] is True and manifest["format"] == fmt
    assert manifest["input"]["shape"] == [None, 8, 8, 1] and manifest["input"]["range"] == [0.0, 1.0]
    assert manifest["input"]["classes"] == [str(d) for d in range(10)]
    assert runtime in manifest["versions"] or runtime in ("keras", "tensorflow")
    for record in manifest["trials"]:
        trial = front[record["trial"]]
        assert record["parameters"] == trial.params
        assert record["objectives"] == {"accuracy": trial.values[0], "throughput": trial.values[1]}
        assert record["measured_on"]["kind"] == "cpu"
        assert record["runtime"].startswith(runtime)
        parity = record["parity"]
        assert parity["passed"] and parity["agreement"] >= 0.99 and parity["images"] > 400
        assert parity["keras_accuracy"] == pytest.approx(trial.values[0], abs=1e-6)
        assert any(f["path"].endswith(suffix) for f in record["files"])
        for f in record["files"]:
            assert hashlib.sha256((out / f["path"]).read_bytes()).hexdigest() == f["sha256"]


@pytest.mark.slow
def test_int8_tflite_stays_within_two_points(study_dir: Path) -> None:
    out = study_dir / "out-int8"
    result = run_nas("export", "exp", "--format", "tflite", "--quantize", "int8", "--out", str(out), cwd=study_dir)
    manifest = json.loads((out / "manifest.json").read_text())
    for record in manifest["trials"]:
        assert record["input"]["dtype"] == "int8" and record["input"]["scale"] > 0
        assert record["files"][0]["path"].endswith("model_int8.tflite")
        assert record["parity"]["rule"] == "accuracy drop <= 2%"
        assert record["parity"]["accuracy_drop"] <= 0.02 + 1e-9, record["parity"]
    assert result.returncode == 0, result.stdout


@pytest.mark.slow
def test_retrain_full_exports_a_freshly_trained_model(study_dir: Path) -> None:
    study = _study(study_dir)
    dominated = [t.number for t in study.trials if t.number not in {b.number for b in study.best_trials}][:1]
    chosen = dominated or [study.best_trials[0].number]
    out = study_dir / "out-retrain"
    args = ["export", "exp", "--format", "keras", "--trial", str(chosen[0]), "--retrain-full", "--out", str(out)]
    result = run_nas(*args, cwd=study_dir)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["retrain_full"] is True and "note" in manifest["parity_data"]
    (record,) = manifest["trials"]
    assert record["trial"] == chosen[0] and record["retrained_on_full_data"] is True
    assert record["parity"]["passed"]


def test_export_errors_are_one_line_with_status_2(study_dir: Path) -> None:
    study = _study(study_dir)
    front = {t.number for t in study.best_trials}
    dominated = [t.number for t in study.trials if t.state == TrialState.COMPLETE and t.number not in front]
    cases: list[tuple[list[str], str]] = [
        (["export", "nope", "--format", "onnx", "--out", "x"], "study 'nope' not found"),
        (["export", "exp", "--format", "onnx", "--out", "/etc/hostname/sub"], "--out: cannot write to"),
        (
            ["export", "exp", "--format", "onnx", "--trial", "99", "--out", "x"],
            "--trial 99: study 'exp' has no trial 99",
        ),
        (
            ["export", "exp", "--format", "onnx", "--quantize", "int8", "--out", "x"],
            "--quantize int8 applies to tflite",
        ),
        (["export", "exp", "--format", "tftrt", "--out", "x"], "--format tftrt: this TensorFlow 2.21.0 build has no"),
        (["export", "exp", "--format", "tensorrt", "--out", "x"], "--format tensorrt: "),
        (["export", "exp", "--format", "pdf", "--out", "x"], "Invalid value for '--format'"),
    ]
    if dominated:
        cases.append(
            (["export", "exp", "--format", "onnx", "--trial", str(dominated[0]), "--out", "x"], "were deleted on")
        )
    for args, message in cases:
        result = run_cli(*args, cwd=study_dir)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("Error: ") and message in result.stderr, (args, result.stderr)
        assert result.stderr.strip().count("\n") == 0, result.stderr
    assert not (study_dir / "x").exists()


@pytest.mark.slow
def test_search_without_weights_keeps_nothing(tmp_path: Path) -> None:
    result = run_nas("search", "tiny", "--trials", "1", "--no-weights", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "nas-artifacts").exists()
    result = run_nas("export", "tiny", "--format", "keras", "--out", "out", cwd=tmp_path)
    assert result.returncode == 2 and "has no stored weights" in result.stderr

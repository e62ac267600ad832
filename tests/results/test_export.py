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

from ..helpers import QUICK_MEASURE, REPO, run_cli


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 5-trial search on all digits at 8x8 (450 validation images, so a one-image slip is
    0.2 points, not the 1 point of the tiny preset's 100)."""
    folder = tmp_path_factory.mktemp("export-study")
    data = yaml.safe_load((REPO / "spaces" / "tiny.yaml").read_text())
    data["name"] = "exp"
    data["dataset"].pop("subset")
    data["training"]["epochs"] = 3
    data["measure"] = {**QUICK_MEASURE, "latency": False}
    (folder / "exp.yaml").write_text(yaml.safe_dump(data))
    result = run_cli("search", "exp.yaml", "--trials", "5", cwd=folder)
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
    # A trial dominated when it finished is never saved; every other trained trial once.
    skipped = {t.number: t.user_attrs["weights_skipped"] for t in study.trials if "weights_skipped" in t.user_attrs}
    assert set(rows) | set(skipped) == finished and not set(rows) & set(skipped)
    by_number = {t.number: t for t in study.trials}
    for n, reason in skipped.items():
        dominating = by_number[int(reason.split()[1])]
        assert reason == f"trial {dominating.number} dominated it when it finished"
        assert dominating.datetime_complete <= by_number[n].datetime_complete
        assert all(a >= b for a, b in zip(dominating.values, by_number[n].values, strict=True))
    assert {n for n, w in rows.items() if w.available} == front
    for n in set(rows) - front:  # saved, then dominated by a later trial
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
    study = _study(study_dir)
    front = {t.number: t for t in study.best_trials}
    # One front trial per format: exporting the whole front is checked with the keras format
    # below (test_files_that_cannot_run_here...), on a server and through the Python API.
    chosen = max(front)
    result = run_cli("export", "exp", "--format", fmt, "--trial", str(chosen), "--out", str(out), cwd=study_dir)
    assert result.returncode == 0, result.stderr + result.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert [r["trial"] for r in manifest["trials"]] == [chosen]
    assert manifest["passed"] is True and manifest["format"] == fmt
    assert manifest["input"]["shape"] == [None, 8, 8, 1] and manifest["input"]["range"] == [0.0, 1.0]
    assert manifest["input"]["classes"] == [str(d) for d in range(10)]
    assert runtime in manifest["versions"] or runtime in ("keras", "tensorflow")
    for record in manifest["trials"]:
        trial = front[record["trial"]]
        assert record["parameters"] == trial.params
        assert record["objectives"] == {"accuracy": trial.values[0], "throughput": trial.values[1]}
        assert record["measured_on"]["kind"] == "cpu"
        low, high = record["throughput_interval"]
        assert low <= trial.values[1] <= high
        confirmed = record["confirmed_throughput"]  # the search confirmed its front at the end
        assert confirmed["low"] <= confirmed["images_per_s"] <= confirmed["high"]
        assert confirmed["rounds"] == 9 and confirmed["device"] and confirmed["measured_at"]
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
    chosen = str(min(t.number for t in _study(study_dir).best_trials))
    args = ["export", "exp", "--format", "tflite", "--quantize", "int8", "--trial", chosen, "--out", str(out)]
    result = run_cli(*args, cwd=study_dir)
    manifest = json.loads((out / "manifest.json").read_text())
    assert [r["trial"] for r in manifest["trials"]] == [int(chosen)]
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
    result = run_cli(*args, cwd=study_dir)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["retrain_full"] is True and "note" in manifest["parity_data"]
    (record,) = manifest["trials"]
    assert record["trial"] == chosen[0] and record["retrained_on_full_data"] is True
    assert record["parity"]["passed"]


def test_export_errors_are_one_line_with_status_2(study_dir: Path) -> None:
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
        (
            ["export", "exp", "--format", "tensorrt", "--quantize", "int8", "--out", "x"],
            "--format tensorrt takes --quantize none, float16, not int8 (int8 needs a calibrator: use tftrt)",
        ),
        (
            ["export", "exp", "--format", "tftrt", "--quantize", "dynamic", "--out", "x"],
            "--format tftrt takes --quantize none, float16, int8, not dynamic",
        ),
        (["export", "exp", "--format", "tftrt", "--out", "x"], "--format tftrt: this TensorFlow 2.21.0 build has no"),
        (["export", "exp", "--format", "tensorrt", "--out", "x"], "--format tensorrt: "),
        (["export", "exp", "--format", "pdf", "--out", "x"], "Invalid value for '--format'"),
    ]
    for args, message in cases:
        result = run_cli(*args, cwd=study_dir)
        assert result.returncode == 2, (args, result.stderr)
        assert result.stderr.startswith("Error: ") and message in result.stderr, (args, result.stderr)
        assert result.stderr.strip().count("\n") == 0, result.stderr
    assert not (study_dir / "x").exists()


def test_export_of_a_trial_whose_weights_were_deleted(study_dir: Path, tmp_path: Path) -> None:
    """On a copy of the study, retention deletes one front trial's weights: exporting it says when."""
    import shutil
    import sqlite3

    # The backup API, not a file copy: the study's last writes may still sit in its WAL file.
    source, copy = sqlite3.connect(study_dir / "nas.db"), sqlite3.connect(tmp_path / "nas.db")
    with copy:
        source.backup(copy)
    source.close()
    copy.close()
    shutil.copytree(study_dir / "nas-artifacts", tmp_path / "nas-artifacts")
    chosen = _study(tmp_path).best_trials[0].number
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'nas.db'}")
    with engine.begin() as connection:  # the copy's rows point at the copy's files
        connection.execute(
            sa.text("UPDATE nas_weights SET path = replace(path, :old, :new)"),
            {"old": str(study_dir), "new": str(tmp_path)},
        )
    store = WeightStore(engine, tmp_path / "nas-artifacts")
    assert chosen in store.retain("exp", keep=set())
    args = ["export", "exp", "--format", "onnx", "--trial", str(chosen), "--out", "x"]
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"Error: weights of trial {chosen} were deleted on "), result.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_search_without_weights_keeps_nothing(tmp_path: Path) -> None:
    result = run_cli("search", "tiny", "--trials", "1", "--no-weights", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "nas-artifacts").exists()
    result = run_cli("export", "tiny", "--format", "keras", "--out", "out", cwd=tmp_path)
    assert result.returncode == 2 and "has no stored weights" in result.stderr


@pytest.mark.slow
def test_files_that_cannot_run_here_are_not_run_never_passed(study_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer whose runtime is missing here (a TensorRT engine without cuda-python): the
    files are kept, the verdict says `not run` and why, and the export exits 0 with a warning."""
    from nas.search.deploy import Written
    from nas.search.deploy import converters as ex
    from nas.search.results import export

    def keras_without_runtime(fmt: str, model: object, folder: Path, quantize: str, rep: object) -> Written:
        written = ex.write_keras(model, folder)  # type: ignore[arg-type]
        return Written(written.files, "engine", None, {}, not_run="no runtime here (test)")

    monkeypatch.setattr(export, "_write", keras_without_runtime)
    out = study_dir / "out-not-run"
    result = run_cli("export", "exp", "--format", "keras", "--out", str(out), cwd=study_dir)
    assert result.returncode == 0, result.stderr
    assert "Warning: the files of at least one trial could not be run here" in result.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["verdict"] == "not run" and manifest["passed"] is False
    # Without --trial, the export takes the whole front, best first objective's order aside.
    assert sorted(r["trial"] for r in manifest["trials"]) == sorted(t.number for t in _study(study_dir).best_trials)
    for record in manifest["trials"]:
        assert record["verdict"] == "not run: no runtime here (test)" and "parity" not in record
        assert (out / record["files"][0]["path"]).is_file()


def _one_trial_export(tmp_path: Path, write: object, monkeypatch: pytest.MonkeyPatch) -> object:
    """_export_one on a one-trial study and a small Keras model, with `write` as the writer."""
    import keras
    import numpy as np

    from nas.search.results import export

    study = optuna.create_study(directions=["maximize", "maximize"])
    study.set_metric_names(["accuracy", "throughput"])
    study.add_trial(optuna.trial.create_trial(values=[0.5, 100.0]))
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(10, "softmax")])
    monkeypatch.setattr(export, "_write", write)
    request = export.ExportRequest(storage=None, study="s", out=tmp_path, format="keras")  # type: ignore[arg-type]
    x = np.random.default_rng(0).random((20, 8, 8, 1), dtype=np.float32)
    return export._export_one(request, study, study.trials[0], model, x, np.zeros(20, int), x, export.SEARCH)


def test_a_failing_or_interrupted_export_leaves_no_trial_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nas.errors import ConversionError

    def half_then(error: BaseException) -> object:
        def write(fmt: str, model: object, folder: Path, quantize: str, rep: object) -> None:
            (folder / "model.part").write_bytes(b"half")  # what a converter wrote before failing
            raise error

        return write

    result = _one_trial_export(tmp_path, half_then(ConversionError("converter said no")), monkeypatch)
    assert result.verdict == "failed" and result.record["error"] == "converter said no"  # type: ignore[attr-defined]
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(KeyboardInterrupt):
        _one_trial_export(tmp_path, half_then(KeyboardInterrupt()), monkeypatch)
    assert list(tmp_path.iterdir()) == []


def test_a_runtime_that_refuses_the_files_is_a_failed_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from nas.search.deploy import Written

    def refuse(x: np.ndarray) -> np.ndarray:
        raise RuntimeError("unsupported op")

    def write(fmt: str, model: object, folder: Path, quantize: str, rep: object) -> Written:
        (folder / "model.bin").write_bytes(b"complete")
        return Written([folder / "model.bin"], "fake runtime", refuse, {})

    result = _one_trial_export(tmp_path, write, monkeypatch)
    assert result.verdict == "failed"  # type: ignore[attr-defined]
    assert result.record["error"] == "fake runtime could not run the exported files: unsupported op"  # type: ignore[attr-defined]
    assert (tmp_path / "trial-0" / "model.bin").read_bytes() == b"complete"  # complete files are kept
    assert not any(p.name.endswith(".partial") for p in tmp_path.iterdir())


def test_overall_verdict() -> None:
    from nas.search.results.export import overall_verdict

    assert overall_verdict(["passed", "passed"]) == "passed"
    assert overall_verdict(["passed", "not run: no GPU"]) == "not run"
    assert overall_verdict(["not run: no GPU", "failed"]) == "failed"


def test_float_parity_counts_a_near_tie_as_agreeing_and_a_real_flip_as_not() -> None:
    import numpy as np

    from nas.search.results.export import parity

    labels = np.zeros(100, dtype=int)
    # A barely trained network: near-uniform outputs, the top two 1e-6 apart.
    reference = np.full((100, 10), 0.1, dtype=np.float32)
    reference[:, 0] += 1e-6
    exported = reference.copy()
    exported[:5, 3] += 2e-6  # float rounding puts class 3 on top for 5 images
    tied = parity(reference, exported, labels, quantized=False)
    assert tied["passed"] and tied["agreement"] == 1.0 and tied["ties"] == 5

    reference[:, 0] += 0.2  # a confident network: the same 5 flips are real disagreements
    exported = reference.copy()
    exported[:5, 3] += 0.3
    flipped = parity(reference, exported, labels, quantized=False)
    assert not flipped["passed"] and flipped["agreement"] == 0.95 and flipped["ties"] == 0

"""`nas export`: the Pareto front (or chosen trials) as deployable files, each run in its real
runtime on the validation data and compared with the Keras model, with a manifest."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import keras
import numpy as np
import optuna
from optuna.trial import TrialState

from nas import __version__
from nas.errors import ConversionError, NasError
from nas.search.data import Dataset, load_dataset
from nas.search.deploy import QUANTIZE_MODES, Written, check_packages, tensorrt_engine_status, tensorrt_status
from nas.search.deploy import converters as ex
from nas.search.engine import (
    confirmation,
    final_figures,
    final_model_file,
    finetuned,
    load_existing_study,
    located,
    objective_names,
    pareto_front,
    rebuild,
    shared_options,
    study_space,
    throughput_interval,
    trial_plans,
)
from nas.search.nets import build_plan
from nas.search.records import ExportFormat, FinalFigures, QuantizeMode, TrialAttr, choices
from nas.search.results.choose import Choice, either
from nas.search.runtime import import_tensorflow
from nas.search.space import SearchSpace
from nas.search.training import precision_policy, train_compressed
from nas.storage import (
    StorageURL,
    StoredWeights,
    WeightStore,
    contained,
    default_artifact_root,
    open_storage,
    safe_name,
    sha256_file,
    trial_number,
)

MIN_AGREEMENT = 0.99  # float formats: top-1 agreement with the Keras model
# A class whose Keras probability is this close to the top one is a tie: an exported model that
# picks it agrees (a barely trained network's near-uniform outputs flip their top-1 on float
# rounding, which is no fault of the export).
TIE = 1e-4
MAX_DROP = 0.02  # quantized formats: accuracy drop against the Keras model


@dataclass(frozen=True)
class ExportRequest:
    storage: StorageURL
    study: str
    out: Path
    format: str
    quantize: str = "none"
    trials: list[int] = field(default_factory=list)  # empty: the Pareto front, or what where/best choose
    retrain_full: bool = False
    artifacts: str | None = None
    where: tuple[str, ...] = ()  # results/choose.py's grammar
    best: str | None = None
    search_weights: bool = False  # the search's weights even where `nas train` kept a final-trained model


# Which weights a trial's exported model has (the manifest's `weights`).
FINAL_TRAINED, SEARCH, RETRAINED = "final-trained", "search", "retrained"


PASSED, FAILED, NOT_RUN = "passed", "failed", "not run"


@dataclass
class TrialExport:
    trial: int
    record: dict[str, Any]
    verdict: str  # passed, failed, or "not run: <why>"

    @property
    def passed(self) -> bool:
        return self.verdict == PASSED


def overall_verdict(verdicts: list[str]) -> str:
    """failed if any failed, else not run if any could not be run, else passed."""
    if any(v == FAILED for v in verdicts):
        return FAILED
    if any(v.startswith(NOT_RUN) for v in verdicts):
        return NOT_RUN
    return PASSED


def _check_request(req: ExportRequest) -> Choice:
    safe_name(req.study, "study")  # its weights lie in the folder of that name
    choice = Choice.parse(req.where, req.best)
    either(req.trials, choice, "trial")
    if req.search_weights and req.retrain_full:
        raise NasError("{search_weights} exports the search's weights, {retrain_full} trains new ones: give one")
    if req.format not in set(ExportFormat):
        raise NasError(f"{{format}}: unknown format '{req.format}' (use {choices(ExportFormat)})")
    if req.quantize not in set(QuantizeMode):
        raise NasError(f"{{quantize}}: unknown mode '{req.quantize}' (use {choices(QuantizeMode)})")
    modes = QUANTIZE_MODES.get(req.format, ("none",))
    if req.quantize not in modes:
        if modes == ("none",):
            raise NasError(f"{{quantize}} {req.quantize} applies to tflite, tftrt and tensorrt, not {req.format}")
        hint = " (int8 needs a calibrator: use tftrt)" if req.format == "tensorrt" and req.quantize == "int8" else ""
        raise NasError(f"{{format}} {req.format} takes {{quantize}} {', '.join(modes)}, not {req.quantize}{hint}")
    if req.format == "tftrt" and (reason := tensorrt_status()):
        raise NasError(f"{{format}} tftrt: {reason}")
    if req.format == "tensorrt" and (reason := tensorrt_engine_status()):
        raise NasError(f"{{format}} tensorrt: {reason}")
    check_packages(req.format)
    return choice


def _prepare_out(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".nas-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise NasError(f"{{out}}: cannot write to {out} ({exc.strerror or exc})") from None


def _select(study: optuna.Study, wanted: list[int]) -> list[optuna.trial.FrozenTrial]:
    if not wanted:
        front = pareto_front(study)  # one per device where the study was measured on several
        if not front:
            raise NasError(f"study '{study.study_name}' has no feasible finished trials to export")
        return front
    by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
    chosen = []
    for n in wanted:
        t = by_number.get(n)
        if t is None:
            raise NasError(f"{{trial}} {n}: study '{study.study_name}' has no trial {n}")
        if t.state != TrialState.COMPLETE or t.user_attrs.get(TrialAttr.SCREENED):
            screened = t.user_attrs.get(TrialAttr.SCREENED)
            what = f"was screened out ({screened})" if screened else f"is {t.state.name}"
            raise NasError(f"{{trial}} {n}: trial {n} {what}; only trained trials can be exported")
        chosen.append(t)
    return chosen


def model_file(
    study: optuna.Study, trial: optuna.trial.FrozenTrial, store: WeightStore, artifacts: str | None, search: bool
) -> tuple[Path, str]:
    """The trial's kept model and whose weights it holds: `nas train`'s final-trained model
    where there is one (what the final recipe trained and the test set scored), else, or with
    `search`, the search's own (a supernet study's fine-tuned ones)."""
    if not search and (final := final_model_file(study, trial.number, store.root)) is not None:
        return final, FINAL_TRAINED
    return _weights_file(store, study.study_name, trial, artifacts), SEARCH


def trial_model(
    url: StorageURL, study_name: str, number: int, *, artifacts: str | None = None, search_weights: bool = False
) -> tuple[keras.Model, str]:
    """One trial's trained Keras model and whose weights it holds (FINAL_TRAINED or SEARCH),
    for the Python API; the errors are `nas export`'s."""
    storage = open_storage(url, create=False)
    study = load_existing_study(storage, study_name, url)
    (trial,) = _select(study, [number])
    store = WeightStore(storage.engine, default_artifact_root(url, artifacts))
    path, weights = model_file(study, trial, store, artifacts, search_weights)
    return keras.saving.load_model(path, safe_mode=True), weights


def _weights_file(store: WeightStore, study: str, frozen: optuna.trial.FrozenTrial, artifacts: str | None) -> Path:
    trial = frozen.number
    stored: StoredWeights | None = store.get(study, trial)
    if stored is None and (skipped := frozen.user_attrs.get(TrialAttr.WEIGHTS_SKIPPED)):
        raise NasError(
            f"weights of trial {trial} were never saved: {skipped}, so they would have been deleted "
            "(keep more with `nas search {keep_top_k} K`); use {retrain_full} to train it again"
        )
    if stored is None:
        raise NasError(
            f"trial {trial} has no stored weights (the search ran with {{no_weights}} or before weights were kept); "
            "use {retrain_full} to train it again"
        )
    if stored.deleted is not None:
        raise NasError(
            f"weights of trial {trial} were deleted on {stored.deleted:%Y-%m-%d %H:%M} when it left the Pareto front "
            "(keep more with `nas search {keep_top_k} K`); use {retrain_full} to train it again"
        )
    candidates = [stored.path]
    if artifacts:
        candidates.append(Path(artifacts).expanduser() / study / stored.path.name)
    for path in candidates:
        if path.is_file():
            if sha256_file(path) != stored.sha256:
                raise NasError(f"weights of trial {trial} at {path} do not match their recorded hash")
            return path
    raise NasError(
        f"weights of trial {trial} were saved on host {stored.host} at {stored.path}, which is not here; "
        "run the export there, or pass {artifacts} with a shared copy of that folder"
    )


def _versions(fmt: str) -> dict[str, str]:
    out = {"nas": __version__, "tensorflow": import_tensorflow().__version__, "keras": keras.__version__}
    out["python"] = platform.python_version()
    extra = {"tflite": ["ai-edge-litert"], "onnx": ["tf2onnx", "onnx", "onnxruntime"], "tensorrt": ["tensorrt"]}
    for package in extra.get(fmt, []):
        with contextlib.suppress(PackageNotFoundError):
            out[package] = version(package)
    return out


def _file_record(path: Path, root: Path) -> dict[str, Any]:
    return {
        "path": str(path.relative_to(root)),
        "bytes": path.stat().st_size,
        "sha256": sha256_file(path),
    }


def _float32_model(model: keras.Model, space: SearchSpace, params: dict[str, Any], classes: int, channels: int) -> Any:
    """The trained model under float32: a mixed-precision model is rebuilt in float32 with the
    same (float32) variables, since exporters and runtimes expect float32 graphs."""
    if all(
        getattr(layer, "dtype_policy", None) is None or layer.dtype_policy.name == "float32" for layer in model.layers
    ):
        return model
    # The trained model of a channel-pruned candidate is the cut network.
    float_model = rebuild(space, params, classes, channels, float32=True)
    float_model.set_weights(model.get_weights())
    return float_model


def _write(fmt: str, model: keras.Model, folder: Path, quantize: str, representative: np.ndarray) -> Written:
    if fmt == "keras":
        return ex.write_keras(model, folder)
    if fmt == "savedmodel":
        return ex.write_savedmodel(model, folder)
    if fmt == "tflite":
        return ex.write_tflite(model, folder, quantize, representative)
    if fmt == "onnx":
        return ex.write_onnx(model, folder)
    if fmt == "tftrt":
        return ex.write_tftrt(model, folder, quantize, representative)
    return ex.write_tensorrt(model, folder, quantize)


def parity(reference: np.ndarray, exported: np.ndarray, labels: np.ndarray, quantized: bool) -> dict[str, Any]:
    """Top-1 agreement with the Keras model, near-ties agreeing (float formats), or the
    accuracy drop against it (quantized ones)."""
    ref_top, exp_top = reference.argmax(axis=1), exported.argmax(axis=1)
    keras_acc, acc = float((ref_top == labels).mean()), float((exp_top == labels).mean())
    rows = np.arange(len(labels))
    tied = (ref_top != exp_top) & (reference[rows, exp_top] >= reference[rows, ref_top] - TIE)
    agreement = float(((ref_top == exp_top) | tied).mean())
    drop = keras_acc - acc
    # The epsilon keeps 2 images in 100 (0.63 - 0.61 = 0.0200000000000000018) within 2 points.
    passed = drop <= MAX_DROP + 1e-9 if quantized else agreement >= MIN_AGREEMENT - 1e-9
    rule = f"accuracy drop <= {MAX_DROP:.0%}" if quantized else f"top-1 agreement >= {MIN_AGREEMENT:.0%}"
    return {
        "images": len(labels),
        "agreement": round(agreement, 6),
        "ties": int(tied.sum()),  # counted as agreeing: the Keras model's top two within TIE
        "keras_accuracy": round(keras_acc, 6),
        "accuracy": round(acc, 6),
        "accuracy_drop": round(drop, 6),
        "max_abs_diff": float(np.abs(reference - exported).max()),
        "rule": rule,
        "passed": bool(passed),
    }


def run_export(req: ExportRequest, say: Callable[[str], None]) -> tuple[dict[str, Any], str]:
    """Export every selected trial; returns the manifest and the overall verdict (passed,
    failed, or not run when some file could not be run here). Bad input raises NasError
    before anything is written."""
    choice = _check_request(req)
    storage = open_storage(req.storage, create=False)
    study = load_existing_study(storage, req.study, req.storage)
    store = WeightStore(storage.engine, default_artifact_root(req.storage, req.artifacts))
    space = located(study_space(study), study, store.root)  # a copied study's data, found from the artifacts folder
    chosen = _select(study, choice.trials_to_export(study) if choice else req.trials)
    if choice:
        say(f"chosen {choice.describe()}: trial{'s' * (len(chosen) != 1)} {', '.join(str(t.number) for t in chosen)}")
    weights: dict[int, tuple[Path, str]] = {}
    final = final_figures(study)
    if not req.retrain_full:  # every trial's weights are found and checked before anything is written
        for t in chosen:
            weights[t.number] = model_file(study, t, store, req.artifacts, req.search_weights)
    _prepare_out(req.out)

    data = load_dataset(space.spec.dataset, warn=say)
    x_val = data.x_val.astype(np.float32) / 255.0
    representative = data.x_train[:200].astype(np.float32) / 255.0
    seed = int(shared_options(study).get("seed", 0))
    results = []
    tuned_figures = finetuned(study)
    for t in chosen:
        trained, tuned = final.get(str(t.number)), tuned_figures.get(str(t.number))
        if req.retrain_full:
            say(f"trial {t.number}: retraining on training + validation data")
            model, kind = _retrain(space, t, data, seed), RETRAINED
        else:
            path, kind = weights[t.number]
            say(f"trial {t.number}: {_weights_line(kind, trained, tuned, req.search_weights)}")
            loaded = keras.saving.load_model(path, safe_mode=True)
            model = _float32_model(loaded, space, t.params, data.num_classes, data.channels)
        results.append(_export_one(req, study, t, model, x_val, data.y_val, representative, kind))
        keras.backend.clear_session(free_memory=True)
    manifest = _manifest(req, study, space, data, results)
    partial = req.out / "manifest.json.partial"
    partial.write_text(json.dumps(manifest, indent=2, default=str))
    os.replace(partial, req.out / "manifest.json")
    return manifest, manifest["verdict"]


def _weights_line(kind: str, trained: FinalFigures | None, tuned: dict[str, Any] | None, asked: bool) -> str:
    """Which weights a trial's export took, and what that means for its figures."""
    if kind == FINAL_TRAINED and trained is not None:
        epochs = trained.epochs
        seeds = f" over {len(trained.runs)} seeds, seed {trained.kept_seed}'s model" if len(trained.runs) > 1 else ""
        return (
            f"final-trained weights (final-trained {epochs} epoch{'s' * (epochs != 1)}, "
            f"test accuracy {trained.test_accuracy:.4f}{seeds})"
        )
    if tuned and tuned["weights_kept"]:
        why = f"fine-tuned {tuned['epochs']} epoch{'s' * (tuned['epochs'] != 1)}"
    elif trained is not None and asked:
        why = "as asked: its final-trained model is left out"
    else:
        why = "not final-trained: `nas train` trains it with the final recipe"
    return f"search weights ({why})"


def _final_summary(trained: FinalFigures | None, other_weights: bool) -> dict[str, Any] | None:
    if trained is None or other_weights:
        return None
    summary = {
        "recipe": trained.recipe,
        "test_accuracy": trained.test_accuracy,
        "keras_test_accuracy": trained.keras_test_accuracy,
        "throughput": trained.throughput,
        "throughput_low": trained.throughput_low,
        "throughput_high": trained.throughput_high,
        "device": trained.device,
    }
    if trained.seeds is not None:  # `nas train --seeds N`: the figures above are the seeds' means
        summary |= {
            "seeds": [run.seed for run in trained.seeds],
            "kept_seed": trained.kept_seed,
            "test_accuracy_sd": trained.test_accuracy_sd,
            "throughput_sd": trained.throughput_sd,
        }
    return summary


def _retrain(space: SearchSpace, t: optuna.trial.FrozenTrial, data: Dataset, seed: int) -> keras.Model:
    """Train the candidate again on training + validation data (like AutoKeras' final fit),
    with its pruning method."""
    candidate, net_full, net = trial_plans(space, t.params, data.num_classes, data.channels)
    full = replace(
        data, x_train=np.concatenate([data.x_train, data.x_val]), y_train=np.concatenate([data.y_train, data.y_val])
    )
    augmentation = space.spec.dataset.augmentation
    with precision_policy(candidate.precision):
        keras.utils.set_random_seed(seed + t.number)
        model, _ = train_compressed(
            build_plan(net),
            net_full,
            net,
            candidate,
            full,
            seed=seed + t.number,
            pruning=space.spec.compression.pruning,
            augmentation=augmentation if augmentation.active else None,
        )
    return _float32_model(model, space, t.params, data.num_classes, data.channels)


def _export_one(
    req: ExportRequest,
    study: optuna.Study,
    t: optuna.trial.FrozenTrial,
    model: keras.Model,
    x_val: np.ndarray,
    y_val: np.ndarray,
    representative: np.ndarray,
    weights: str,
) -> TrialExport:
    """Write one trial's files into a staging folder and move it into place only once they are
    complete, so a failed or interrupted export leaves no half-written `trial-N/`."""
    folder = contained(req.out, f"trial-{trial_number(t.number)}")  # not through a link out of --out
    staging = req.out / f".trial-{t.number}.partial"
    names = objective_names(study)
    record: dict[str, Any] = {
        "trial": t.number,
        "parameters": t.params,
        "objectives": dict(zip(names, t.values, strict=True)),
        "constraints": t.constraints,
        "params": t.user_attrs.get(TrialAttr.PARAMS),
        "flops": t.user_attrs.get(TrialAttr.FLOPS),
        "measured_on": t.user_attrs.get(TrialAttr.DEVICE),
        "throughput_interval": throughput_interval(t),
        "confirmed_throughput": _confirmed_throughput(study, t.number),
        # A supernet study's front: the weights kept are the fine-tuned ones (strategies/supernet/finetune.py).
        "finetuned": finetuned(study).get(str(t.number)),
        # `nas train`: the exported model is the final-trained one, scored once on the test set.
        "final": _final_summary(final_figures(study).get(str(t.number)), weights != FINAL_TRAINED),
        "retrained_on_full_data": req.retrain_full,
        "weights": weights,  # final-trained, search or retrained
    }
    reference = model.predict(x_val, verbose=0)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        written = _write(req.format, model, staging, req.quantize, representative)
    except ConversionError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        record["error"] = str(exc)
        record["verdict"] = FAILED
        return TrialExport(t.number, record, FAILED)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(folder, ignore_errors=True)  # an earlier export of this trial into the same folder
    os.replace(staging, folder)
    record["files"] = [_file_record(folder / p.relative_to(staging), req.out) for p in written.files]
    record["runtime"] = written.runtime_name
    if written.input:
        record["input"] = written.input
    if written.runtime is None:
        verdict = f"{NOT_RUN}: {written.not_run}"
    else:
        try:
            exported = written.runtime(x_val)
        except Exception as exc:  # the files exist but their runtime refuses them: a failed check
            record["error"] = f"{written.runtime_name} could not run the exported files: {exc}".splitlines()[0]
            verdict = FAILED
        else:
            record["parity"] = parity(reference, exported, y_val, quantized=req.quantize != "none")
            verdict = PASSED if record["parity"]["passed"] else FAILED
    record["verdict"] = verdict
    return TrialExport(t.number, record, verdict)


def _confirmed_throughput(study: optuna.Study, number: int) -> dict[str, Any] | None:
    """The trial's throughput measured again after the search (`nas pareto --confirm`), with
    when and where; None when it was not confirmed."""
    record = confirmation(study)
    figure = record.trials.get(str(number)) if record else None
    if record is None or figure is None:
        return None
    return {
        "images_per_s": figure.images_per_s,
        "low": figure.low,
        "high": figure.high,
        "trustworthy": figure.trustworthy,
        "measured_at": record.measured_at,
        "device": record.device,
        "batch_size": record.batch_size,
        "rounds": record.rounds,
    }


def _manifest(
    req: ExportRequest, study: optuna.Study, space: SearchSpace, data: Dataset, results: list[TrialExport]
) -> dict[str, Any]:
    size, channels = space.spec.dataset.image_size, data.channels
    colour = "grayscale" if channels == 1 else "RGB"
    return {
        "study": req.study,
        "storage": req.storage.masked,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "format": req.format,
        "quantize": req.quantize,
        "retrain_full": req.retrain_full,
        "versions": _versions(req.format),
        "input": {
            "shape": [None, size, size, channels],
            "layout": "NHWC",
            "dtype": "float32",
            "range": [0.0, 1.0],
            "preprocessing": f"decode, convert to {colour}, resize to {size}x{size} (bilinear, antialiased), "
            "divide by 255"
            + (
                "; then to int8: round(x / scale + zero_point), see each trial's input"
                if req.quantize == "int8"
                else ""
            ),
            "classes": list(data.class_names),
        },
        "output": {"shape": [None, data.num_classes], "dtype": "float32", "meaning": "softmax probabilities"},
        "parity_data": {"split": "validation", "images": len(data.y_val)}
        | ({"note": "part of training (retrain_full): accuracies are optimistic"} if req.retrain_full else {}),
        "trials": [r.record for r in results],
        # Only what ran gets a verdict: `passed` is true only when every file was run and agreed.
        "verdict": overall_verdict([r.verdict for r in results]),
        "passed": all(r.passed for r in results),
    }

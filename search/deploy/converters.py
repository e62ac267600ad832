"""One function per export format: write the files, and run them in their real runtime.

Every `write_*` returns the files it wrote; every runtime returns class probabilities for a
batch of [0, 1] float images, so parity is checked the same way for each format.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import keras
import numpy as np

from nas.errors import ConversionError, NasError
from nas.extras import install_hint, require
from nas.search.records import ExportFormat
from nas.search.runtime import import_tensorflow, native_stderr_captured

Runtime = Callable[[np.ndarray], np.ndarray]
FLOAT_FORMATS = {ExportFormat.KERAS, ExportFormat.SAVEDMODEL, ExportFormat.ONNX}
QUANTIZABLE = {ExportFormat.TFLITE, ExportFormat.TFTRT, ExportFormat.TENSORRT}
# The --quantize modes each format can take, checked before anything is written.
QUANTIZE_MODES: dict[str, tuple[str, ...]] = {
    ExportFormat.TFLITE: ("none", "dynamic", "float16", "int8"),
    ExportFormat.TFTRT: ("none", "float16", "int8"),
    ExportFormat.TENSORRT: ("none", "float16"),  # int8 needs a calibrator: TF-TRT has one
}
ONNX_OPSET = 17


@dataclass(frozen=True)
class Written:
    files: list[Path]
    runtime_name: str
    runtime: Runtime | None  # None: the files cannot be run here, and `not_run` says why
    input: dict[str, Any]  # what the exported model takes, when it differs from float images
    not_run: str | None = None


def _batches(x: np.ndarray, size: int = 256) -> Iterator[np.ndarray]:
    for i in range(0, len(x), size):
        yield x[i : i + size]


def tensorrt_status() -> str | None:
    """None when TF-TRT can run here, else why not."""
    tf = import_tensorflow()
    if not tf.sysconfig.get_build_info().get("is_tensorrt_build", False):
        return (
            f"this TensorFlow {tf.__version__} build has no TensorRT (pip builds of TensorFlow 2.18 and later do not); "
            "use {format} onnx, or {format} tensorrt with the tensorrt package on a GPU machine"
        )
    if not tf.config.list_physical_devices("GPU"):
        return "TF-TRT needs an NVIDIA GPU and none is visible; use {format} onnx or savedmodel"
    return None


def tensorrt_engine_status() -> str | None:
    """None when a TensorRT engine can be built here, else why not."""
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        hint = install_hint("tensorrt")
        return f"the tensorrt Python package is not installed ({hint}, on a machine with an NVIDIA GPU)"
    tf = import_tensorflow()
    if not tf.config.list_physical_devices("GPU"):
        return "TensorRT needs an NVIDIA GPU and none is visible; use {format} onnx and build the engine there"
    return None


def write_keras(model: keras.Model, folder: Path) -> Written:
    path = folder / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    return Written([path], f"keras {keras.__version__} (safe_mode)", lambda x: loaded.predict(x, verbose=0), {})


def write_savedmodel(model: keras.Model, folder: Path) -> Written:
    tf = import_tensorflow()
    path = folder / "saved_model"
    model.export(str(path), format="tf_saved_model", verbose=False)
    loaded = tf.saved_model.load(str(path))

    def run(x: np.ndarray) -> np.ndarray:
        return np.concatenate([loaded.serve(tf.constant(b)).numpy() for b in _batches(x)])

    files = sorted(p for p in path.rglob("*") if p.is_file())
    return Written(files, f"tensorflow {tf.__version__} saved_model", run, {})


def write_tflite(model: keras.Model, folder: Path, quantize: str, representative: np.ndarray) -> Written:
    """Through a SavedModel, as TFLite's converter prefers; `int8` is full-integer with int8
    input and output, calibrated on `representative` (training images)."""
    tf = import_tensorflow()
    staging = folder / "_saved_model_for_tflite"
    model.export(str(staging), format="tf_saved_model", verbose=False)
    converter = tf.lite.TFLiteConverter.from_saved_model(str(staging))
    if quantize != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        converter.target_spec.supported_types = [tf.float16]
    if quantize == "int8":

        def calibration() -> Iterator[list[np.ndarray]]:
            for image in representative:
                yield [image[None]]

        converter.representative_dataset = calibration
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    try:
        with native_stderr_captured():
            flat = converter.convert()
    except Exception as exc:  # the converter raises bare Exceptions with its reason
        raise ConversionError(f"TFLite converter: {str(exc).strip().splitlines()[-1][:300]}") from exc
    finally:
        _remove_tree(staging)
    path = folder / ("model.tflite" if quantize == "none" else f"model_{quantize}.tflite")
    path.write_bytes(flat)
    runtime, spec = tflite_runtime(path)
    return Written([path], runtime_label(), runtime, spec)


def check_packages(fmt: str) -> None:
    """Import what writing and running `fmt` needs, so that a missing package is told (a
    NasError naming its extra) before anything is written."""
    if fmt == ExportFormat.TFLITE:
        _litert_interpreter_class()
    if fmt in (ExportFormat.ONNX, ExportFormat.TENSORRT):
        _onnx_modules()


def _litert_interpreter_class() -> Any:
    # A dependency of nas; missing only where nas was installed before it became one.
    return require("ai_edge_litert.interpreter", "the TFLite interpreter (LiteRT)").Interpreter


def _onnx_modules() -> tuple[Any, Any]:
    """(tf2onnx, onnxruntime): the ONNX converter and the runtime its parity check runs in."""
    return require("tf2onnx", "{format} onnx", "onnx"), require("onnxruntime", "{format} onnx", "onnx")


def runtime_label() -> str:

    return f"ai-edge-litert {version('ai-edge-litert')} interpreter (XNNPACK)"


def litert_interpreter(path: Path, threads: int | None = None) -> Any:
    """A LiteRT interpreter of a .tflite file with its tensors allocated; LiteRT's own log on
    stderr is hidden unless it fails."""
    interpreter_class = _litert_interpreter_class()
    with native_stderr_captured():
        interpreter = interpreter_class(model_path=str(path), num_threads=threads)
        interpreter.allocate_tensors()
    return interpreter


def tflite_runtime(path: Path, threads: int | None = None) -> tuple[Runtime, dict[str, Any]]:
    interpreter = litert_interpreter(path, threads)
    inp, out = interpreter.get_input_details()[0], interpreter.get_output_details()[0]
    in_scale, in_zero = inp["quantization"]
    out_scale, out_zero = out["quantization"]
    integer = np.issubdtype(inp["dtype"], np.integer)
    spec: dict[str, Any] = {}
    if integer:
        spec = {"dtype": np.dtype(inp["dtype"]).name, "scale": float(in_scale), "zero_point": int(in_zero)}

    def run(x: np.ndarray) -> np.ndarray:
        outputs = []
        for batch in _batches(x, 64):
            interpreter.resize_tensor_input(inp["index"], list(batch.shape))
            interpreter.allocate_tensors()
            if integer:
                info = np.iinfo(inp["dtype"])
                batch = np.clip(np.round(batch / in_scale + in_zero), info.min, info.max).astype(inp["dtype"])
            interpreter.set_tensor(inp["index"], batch)
            interpreter.invoke()
            result = interpreter.get_tensor(out["index"])
            if np.issubdtype(result.dtype, np.integer):
                result = (result.astype(np.float32) - out_zero) * out_scale
            outputs.append(result)
        return np.concatenate(outputs)

    return run, spec


def write_onnx(model: keras.Model, folder: Path) -> Written:
    tf2onnx, ort = _onnx_modules()
    tf = import_tensorflow()
    path = folder / "model.onnx"
    signature = (tf.TensorSpec((None, *model.input_shape[1:]), tf.float32, name="image"),)
    try:
        tf2onnx.convert.from_keras(model, input_signature=signature, opset=ONNX_OPSET, output_path=str(path))
    except Exception as exc:
        raise ConversionError(f"tf2onnx: {str(exc).strip().splitlines()[-1][:300]}") from exc
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name

    def run(x: np.ndarray) -> np.ndarray:
        return np.concatenate([session.run(None, {name: b})[0] for b in _batches(x)])

    return Written([path], f"onnxruntime {ort.__version__} (CPU), opset {ONNX_OPSET}", run, {"name": name})


def write_tftrt(model: keras.Model, folder: Path, quantize: str, representative: np.ndarray) -> Written:
    """TF-TRT: TensorRT segments inside a SavedModel (TrtGraphConverterV2)."""
    reason = tensorrt_status()
    if reason:
        raise NasError(f"{{format}} tftrt: {reason}")
    tf = import_tensorflow()
    from tensorflow.python.compiler.tensorrt import trt_convert as trt

    staging = folder / "_saved_model_for_tftrt"
    model.export(str(staging), format="tf_saved_model", verbose=False)
    precision = {"none": "FP32", "float16": "FP16", "int8": "INT8"}[quantize]  # checked by the caller
    converter = trt.TrtGraphConverterV2(
        input_saved_model_dir=str(staging), precision_mode=precision, use_calibration=precision == "INT8"
    )
    if precision == "INT8":
        converter.convert(
            calibration_input_fn=lambda: ([tf.constant(representative[i : i + 8])] for i in range(0, 64, 8))
        )
    else:
        converter.convert()
    path = folder / "tftrt_saved_model"
    converter.save(str(path))
    _remove_tree(staging)
    loaded = tf.saved_model.load(str(path))
    serve = loaded.signatures["serving_default"]

    def run(x: np.ndarray) -> np.ndarray:
        return np.concatenate([next(iter(serve(tf.constant(b)).values())).numpy() for b in _batches(x)])

    files = sorted(p for p in path.rglob("*") if p.is_file())
    return Written(files, f"tensorflow {tf.__version__} TF-TRT {precision}", run, {})


def write_tensorrt(model: keras.Model, folder: Path, quantize: str) -> Written:
    """A serialized TensorRT engine built from the ONNX export (FP32 or FP16)."""
    reason = tensorrt_engine_status()
    if reason:
        raise NasError(f"{{format}} tensorrt: {reason}")
    import tensorrt as trt

    from nas.search.deploy.tensorrt_runtime import cuda_runtime_module, engine_runtime

    onnx = write_onnx(model, folder)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx.files[0].read_bytes()):
        raise ConversionError(f"TensorRT ONNX parser: {parser.get_error(0)}")
    config = builder.create_builder_config()
    if quantize == "float16":
        config.set_flag(trt.BuilderFlag.FP16)
    profile = builder.create_optimization_profile()
    shape = tuple(model.input_shape[1:])
    profile.set_shape(network.get_input(0).name, (1, *shape), (64, *shape), (256, *shape))
    config.add_optimization_profile(profile)
    engine_bytes = builder.build_serialized_network(network, config)
    if engine_bytes is None:
        raise ConversionError("TensorRT could not build an engine (see its log above)")
    path = folder / "model.engine"
    path.write_bytes(bytes(engine_bytes))
    label = f"tensorrt {trt.__version__} engine ({'FP16' if quantize == 'float16' else 'FP32'})"
    # The verdict is the engine's own outputs, never its ONNX source's: FP16 kernels can differ.
    cudart = cuda_runtime_module()
    if isinstance(cudart, str):
        return Written([onnx.files[0], path], label, None, {}, not_run=cudart)
    return Written([onnx.files[0], path], label, engine_runtime(trt, cudart, bytes(engine_bytes)), {})


def _remove_tree(path: Path) -> None:

    shutil.rmtree(path, ignore_errors=True)

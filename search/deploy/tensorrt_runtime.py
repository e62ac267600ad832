"""Running a serialized TensorRT engine on the GPU, for the parity check of `--format tensorrt`.

TensorRT's Python API does not allocate device memory; the buffers come from cuda-python's
runtime bindings (NVIDIA's own, small, and installed with the `tensorrt` extra). Written
here because no maintained library wraps "run this engine on these numpy arrays" without
pulling in PyTorch or PyCUDA's compiler toolchain.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from nas.extras import install_hint

Runtime = Callable[[np.ndarray], np.ndarray]
MAX_BATCH = 256  # the engine's optimization profile goes up to this batch size


def cuda_runtime_module() -> ModuleType | str:
    """cuda-python's runtime bindings, or why they are missing (an exporter's `not run` reason)."""
    # cuda-python 12.6 and later; then the older location of the same module.
    for name in ("cuda.bindings.runtime", "cuda.cudart"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return f"running a TensorRT engine needs CUDA buffers from cuda-python ({install_hint('tensorrt')})"


def _ok(cudart: ModuleType, result: tuple[Any, ...], what: str) -> Any:
    """cuda-python returns (error, value...) tuples; turn an error into an exception."""
    error, *values = result
    if error != cudart.cudaError_t.cudaSuccess:
        raise RuntimeError(f"CUDA {what} failed: {error}")
    return values[0] if values else None


def engine_runtime(trt: ModuleType, cudart: ModuleType, engine_bytes: bytes) -> Runtime:
    """A function that runs the engine on float32 NHWC images and returns its probabilities."""
    logger = trt.Logger(trt.Logger.WARNING)
    engine = trt.Runtime(logger).deserialize_cuda_engine(engine_bytes)
    if engine is None:
        raise RuntimeError("TensorRT could not deserialize the engine it built")
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
    outputs = [n for n in names if n not in inputs]
    if len(inputs) != 1 or len(outputs) != 1:
        raise RuntimeError(f"expected one input and one output tensor, found {inputs} and {outputs}")
    context = engine.create_execution_context()
    to_device = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
    to_host = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost

    def run_batch(batch: np.ndarray) -> np.ndarray:
        host_in = np.ascontiguousarray(batch, dtype=np.float32)
        context.set_input_shape(inputs[0], host_in.shape)
        host_out = np.empty(tuple(context.get_tensor_shape(outputs[0])), dtype=np.float32)
        stream = _ok(cudart, cudart.cudaStreamCreate(), "stream creation")
        device_in = _ok(cudart, cudart.cudaMalloc(host_in.nbytes), "allocation")
        device_out = _ok(cudart, cudart.cudaMalloc(host_out.nbytes), "allocation")
        try:
            _ok(cudart, cudart.cudaMemcpy(device_in, host_in.ctypes.data, host_in.nbytes, to_device), "copy")
            context.set_tensor_address(inputs[0], int(device_in))
            context.set_tensor_address(outputs[0], int(device_out))
            if not context.execute_async_v3(int(stream)):
                raise RuntimeError("TensorRT failed to run the engine")
            _ok(cudart, cudart.cudaStreamSynchronize(stream), "synchronize")
            _ok(cudart, cudart.cudaMemcpy(host_out.ctypes.data, device_out, host_out.nbytes, to_host), "copy")
        finally:
            cudart.cudaFree(device_in)
            cudart.cudaFree(device_out)
            cudart.cudaStreamDestroy(stream)
        return host_out

    def run(x: np.ndarray) -> np.ndarray:
        return np.concatenate([run_batch(x[i : i + MAX_BATCH]) for i in range(0, len(x), MAX_BATCH)])

    return run

"""The deployable form of a trained trial: TFLite conversion (with its quantization), its
accuracy in the LiteRT interpreter, its size (raw and compressed) and its latency."""

from __future__ import annotations

import statistics
import time
import zlib
from pathlib import Path
from tempfile import TemporaryDirectory

import keras
import numpy as np

from nas.search.data import Dataset
from nas.search.deploy.converters import litert_interpreter, write_tflite
from nas.search.deploy.deployed import Deployed

LATENCY_ROUNDS = 5
LATENCY_ROUND_S = 0.1


def weight_bytes(model: keras.Model) -> bytes:
    return b"".join(np.asarray(w, dtype=np.float32).tobytes() for w in model.get_weights())


def tflite_latency_ms(path: Path, threads: int) -> float:
    """Median over rounds of the mean time of one batch-1 inference in LiteRT (XNNPACK)."""
    interpreter = litert_interpreter(path, threads)
    inp = interpreter.get_input_details()[0]
    interpreter.set_tensor(inp["index"], np.zeros(inp["shape"], inp["dtype"]))
    for _ in range(10):  # warm-up: first calls allocate and pack weights
        interpreter.invoke()
    rounds = []
    for _ in range(LATENCY_ROUNDS):
        calls, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < LATENCY_ROUND_S or calls < 3:
            interpreter.invoke()
            calls += 1
        rounds.append(1000 * elapsed / calls)
    return statistics.median(rounds)


def deploy(
    model: keras.Model,
    quantization: str,
    data: Dataset,
    *,
    convert: bool,
    latency: bool,
    threads: int,
    pruned: bool = False,
) -> Deployed:
    """Convert (when asked, or when quantizing) and score the converted model; a converter
    failure raises ConversionError and fails the trial with its reason.

    Without conversion nothing is read back: the size is that of the float32 variables, and
    the weights are compressed only for a pruned model, where the figure means something."""
    if not convert and quantization == "none":
        compressed = len(zlib.compress(weight_bytes(model), 9)) if pruned else None
        return Deployed(None, 4 * model.count_params(), compressed, None, False)

    representative = data.x_train[:200].astype(np.float32) / 255.0
    with TemporaryDirectory(prefix="nas-tflite-") as tmp:
        written = write_tflite(model, Path(tmp), quantization, representative)
        assert written.runtime is not None  # the LiteRT interpreter is a dependency: TFLite always runs
        path = written.files[0]
        flat = path.read_bytes()
        x_val = data.x_val.astype(np.float32) / 255.0
        predicted = written.runtime(x_val).argmax(axis=1)
        accuracy = float((predicted == data.y_val).mean())
        ms = tflite_latency_ms(path, threads) if latency else None
    return Deployed(accuracy, len(flat), len(zlib.compress(flat, 9)), ms, True)

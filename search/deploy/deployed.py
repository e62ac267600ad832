"""A trained network's deployed form, as plain data: its accuracy in the runtime it ships in,
its size and latency (scoring.py measures them). No TensorFlow, so the engine's loop and a
tabulated benchmark read it without loading any."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deployed:
    accuracy: float | None  # in the LiteRT interpreter; None when not converted
    model_bytes: int  # the TFLite file, or the float32 weights when not converted
    compressed_bytes: int | None  # zlib level 9: what sparsity buys (None: not pruned, not converted)
    latency_ms: float | None  # batch 1 in LiteRT, median of rounds
    converted: bool

    def to_attr(self) -> dict[str, float | int | bool | None]:
        return {
            "tflite_accuracy": self.accuracy,
            "model_bytes": self.model_bytes,
            "compressed_bytes": self.compressed_bytes,
            "tflite_latency_ms": self.latency_ms,
            "converted": self.converted,
        }

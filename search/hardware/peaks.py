"""Data-sheet peak FLOP/s of NVIDIA GPUs, the fallback when a GPU's matmul peak cannot be
measured (the profiler measures first, as it does on CPUs).

Matching is by whole tokens of the device name, never by substring: "RTX A1000" is not an
A100, "L40" is not an L4, and "H100 PCIe" is not the SXM part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DataSheet:
    tokens: tuple[str, ...]  # every one must be a token of the upper-cased device name
    label: str
    fp32: float  # CUDA cores, dense
    tf32: float | None  # tensor cores, dense; None before Ampere
    half: float  # float16/bfloat16 tensor cores with float32 accumulation, dense


T = 1e12
# Vendors' data sheets, dense (no 2:4 sparsity) figures.
DATA_SHEETS = (
    DataSheet(("H200",), "H200 SXM", 67 * T, 494.5 * T, 989.5 * T),
    DataSheet(("H200", "NVL"), "H200 NVL", 60 * T, 417.5 * T, 835.5 * T),
    DataSheet(("H100",), "H100 SXM", 67 * T, 494.5 * T, 989.5 * T),
    DataSheet(("H100", "PCIE"), "H100 PCIe", 51 * T, 378 * T, 756 * T),
    DataSheet(("H100", "NVL"), "H100 NVL", 60 * T, 417.5 * T, 835.5 * T),
    DataSheet(("A100",), "A100", 19.5 * T, 156 * T, 312 * T),
    DataSheet(("A30",), "A30", 10.3 * T, 82 * T, 165 * T),
    DataSheet(("A10",), "A10", 31.2 * T, 62.5 * T, 125 * T),
    DataSheet(("L40S",), "L40S", 91.6 * T, 183 * T, 362 * T),
    DataSheet(("L40",), "L40", 90.5 * T, 90.5 * T, 181 * T),
    DataSheet(("L4",), "L4", 30.3 * T, 60 * T, 121 * T),
    DataSheet(("V100",), "V100 SXM2", 15.7 * T, None, 125 * T),
    DataSheet(("V100", "PCIE"), "V100 PCIe", 14 * T, None, 112 * T),
    DataSheet(("T4",), "T4", 8.1 * T, None, 65 * T),
    DataSheet(("RTX", "4090"), "GeForce RTX 4090", 82.6 * T, 82.6 * T, 165.2 * T),
    DataSheet(("RTX", "3090"), "GeForce RTX 3090", 35.6 * T, 35.6 * T, 71 * T),
)


def find_data_sheet(name: str) -> DataSheet | None:
    """The most specific entry all of whose tokens are in `name` (H100 PCIe before H100)."""
    tokens = set(re.findall(r"[A-Z0-9]+", name.upper()))
    matches = [sheet for sheet in DATA_SHEETS if set(sheet.tokens) <= tokens]
    return max(matches, key=lambda sheet: len(sheet.tokens), default=None)


def data_sheet_peak(info: dict[str, Any], precision: str) -> tuple[float, str] | None:
    """The peak FLOP/s a trial under `precision` can reach on this GPU, with where it came from.

    TensorFlow runs float32 matmuls and convolutions as TF32 on Ampere and later unless
    `tf.config.experimental.enable_tensor_float_32_execution(False)`: `info["tf32"]` says which.
    """
    if info.get("kind") != "gpu":
        return None
    sheet = find_data_sheet(str(info.get("name", "")))
    if sheet is None:
        return None
    if precision != "float32":
        return sheet.half, f"data sheet: {sheet.label}, 16-bit tensor cores"
    capability = tuple(info.get("compute_capability") or (0, 0))
    if sheet.tf32 is not None and info.get("tf32", True) and capability >= (8, 0):
        return sheet.tf32, f"data sheet: {sheet.label}, TF32 tensor cores"
    return sheet.fp32, f"data sheet: {sheet.label}, float32"

"""Counts and sizes written the way people write them: 3.5M parameters, 600M FLOPs, 4MB."""

from __future__ import annotations

import math
import re
from typing import Any

from nas.search.space.params import shown

_COUNT = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}
_BYTES = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def _parse(raw: Any, units: dict[str, int], example: str) -> Any:
    if raw is None or isinstance(raw, bool):
        return raw
    if isinstance(raw, int):
        return raw
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    if isinstance(raw, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([A-Za-z]*)\s*", raw)
        if match and match.group(2).lower() in units:
            value = float(match.group(1)) * units[match.group(2).lower()]
            if math.isfinite(value):  # "1e999" is infinite: no whole number
                return round(value)
    raise ValueError(f"expected a whole number or a figure such as {example}, got {shown(raw)}")


def parse_count(raw: Any) -> Any:
    """`3500000`, `3.5M`, `600k`, `1.2G`."""
    return _parse(raw, _COUNT, "3.5M or 600k")


def parse_bytes(raw: Any) -> Any:
    """`4000000`, `4MB`, `3.5MiB`, `800KB`."""
    return _parse(raw, _BYTES, "4MB or 3.5MiB")


def human(n: float, unit: str = "", sep: str = "") -> str:
    """1.23M, or with sep=" " 1.23 MFLOP/s: two decimals under an SI prefix."""
    for div, suffix in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if abs(n) >= div:
            return f"{n / div:.2f}{sep}{suffix}{unit}"
    return f"{n:g}{sep}{unit}".rstrip()

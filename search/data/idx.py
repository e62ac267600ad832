"""The IDX files of MNIST and Fashion-MNIST: a big-endian header (a magic number that holds
the element type and the number of dimensions, then each dimension's size) and uint8 data,
gzip-compressed or plain. Read with NumPy alone; a damaged file is a NasError naming it."""

from __future__ import annotations

import gzip
import math
import struct
import zlib
from pathlib import Path

import numpy as np

from nas.errors import NasError

IMAGES_MAGIC = 2051  # uint8 (0x08), 3 dimensions: count, rows, columns
LABELS_MAGIC = 2049  # uint8 (0x08), 1 dimension: count
GZIP_MAGIC = b"\x1f\x8b"


def _bytes(path: Path) -> bytes:
    try:
        with path.open("rb") as f:
            compressed = f.read(2) == GZIP_MAGIC
        if not compressed:
            return path.read_bytes()
        with gzip.open(path, "rb") as f:
            return f.read()
    except EOFError:
        raise NasError(f"dataset: {path} is truncated (the gzip stream ends early)") from None
    except (OSError, zlib.error) as exc:
        raise NasError(f"dataset: {path} is not a readable file ({exc})") from None


def read_idx(path: Path, magic: int) -> np.ndarray:
    """The array an IDX file holds: (count, rows, columns) images or (count,) labels."""
    what = "images" if magic == IMAGES_MAGIC else "labels"
    raw = _bytes(path)
    dims = magic & 0xFF
    header = 4 + 4 * dims
    if len(raw) < header:
        raise NasError(f"dataset: {path} is truncated ({len(raw)} bytes, shorter than an IDX header of {what})")
    found = int.from_bytes(raw[:4], "big")
    if found != magic:
        raise NasError(f"dataset: {path} has IDX magic number {found}, not {magic} (IDX {what})")
    shape = struct.unpack(f">{dims}I", raw[4:header])
    size = math.prod(shape)
    data = len(raw) - header
    if data != size:
        problem = "is truncated" if data < size else "has trailing bytes"
        dims_text = "x".join(str(n) for n in shape)
        raise NasError(f"dataset: {path} {problem}: {data} bytes of data for {dims_text} {what} ({size} bytes)")
    return np.frombuffer(raw, np.uint8, count=size, offset=header).reshape(shape)

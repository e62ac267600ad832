"""Reading a user's images: a folder per class, NumPy arrays, or TFRecords.

Each reader returns images already decoded and resized to the space's image size (uint8,
NHWC) with integer labels and class names, so a search decodes its data once. Every problem
with the data is a NasError that names the file.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nas.errors import NasError
from nas.search.runtime import import_tensorflow
from nas.search.space import DatasetSpec

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".gif"}


@dataclass
class Images:
    x: np.ndarray  # uint8, NHWC at the space's image size
    y: np.ndarray  # int32 class indices
    class_names: tuple[str, ...]
    skipped: list[str] = field(default_factory=list)  # corrupt files left out


def _channels(spec: DatasetSpec) -> int:
    return spec.channels or 3


def list_folder(root: Path) -> tuple[list[str], list[int], tuple[str, ...]]:
    """Image files under one sub-folder per class (sorted names give the class indices)."""
    if not root.is_dir():
        raise NasError(f"dataset.path: {root} is not a folder")
    classes = []
    files: list[str] = []
    labels: list[int] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        images = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        if not images:
            continue
        classes.append(folder.name)
        files += [str(p) for p in images]
        labels += [len(classes) - 1] * len(images)
    if not classes:
        raise NasError(
            f"dataset.path: {root} holds no images in class sub-folders "
            f"(expected {root}/<class>/<image>, with suffixes {', '.join(sorted(IMAGE_SUFFIXES))})"
        )
    if len(classes) == 1:
        raise NasError(f"dataset.path: {root} holds a single class ('{classes[0]}'); a classifier needs at least 2")
    return files, labels, tuple(classes)


def decode_files(files: list[str], spec: DatasetSpec) -> tuple[np.ndarray, list[int], list[str]]:
    """Decode and resize in parallel with tf.data; returns images, the kept indices and the
    corrupt files (skipped, or an error with spec.on_corrupt == "error")."""
    tf = import_tensorflow()
    size, channels = spec.image_size, _channels(spec)

    def load(path: Any) -> Any:
        image = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
        return _resize_uint8(tf, image, spec)

    # deterministic order keeps element i = files[i]; a failing element raises at its place
    # and the iterator goes on with the next one, so each corrupt file can be named.
    ds = tf.data.Dataset.from_tensor_slices(files).map(load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    out = np.empty((len(files), size, size, channels), np.uint8)
    kept: list[int] = []
    skipped: list[str] = []
    iterator = iter(ds.prefetch(tf.data.AUTOTUNE))
    for i, path in enumerate(files):
        try:
            out[len(kept)] = next(iterator).numpy()
            kept.append(i)
        except tf.errors.InvalidArgumentError as exc:
            reason = exc.message.strip().splitlines()[0][:200]
            if spec.on_corrupt == "error":
                raise NasError(f"dataset: {path} is not a readable image ({reason})") from None
            skipped.append(path)
    return out[: len(kept)], kept, skipped


def read_folder(root: Path, spec: DatasetSpec) -> Images:
    files, labels, classes = list_folder(root)
    x, kept, skipped = decode_files(files, spec)
    y = np.asarray(labels, np.int32)[kept]
    return Images(x, y, classes, skipped)


def _labels(y: np.ndarray, where: str, classes: list[str] | None) -> tuple[np.ndarray, tuple[str, ...]]:
    if y.ndim != 1:
        raise NasError(f"{where}: labels must be one integer per image, got shape {list(y.shape)}")
    if not np.issubdtype(y.dtype, np.integer):
        if np.issubdtype(y.dtype, np.floating) and np.all(np.mod(y, 1) == 0):
            y = y.astype(np.int64)
        else:
            raise NasError(f"{where}: labels must be integers 0..K-1, got {y.dtype}")
    if len(y) and y.min() < 0:
        raise NasError(f"{where}: label {int(y.min())} is negative (labels are class indices 0..K-1)")
    count = int(y.max()) + 1 if len(y) else 0
    if classes is not None:
        if count > len(classes):
            raise NasError(
                f"{where}: label {count - 1} is out of range for the {len(classes)} classes in dataset.classes"
            )
        count = len(classes)
    if count < 2:
        only = int(y.max()) if len(y) else "-"
        raise NasError(f"{where}: all labels are {only}; a classifier needs at least 2 classes")
    names = tuple(classes) if classes is not None else tuple(str(i) for i in range(count))
    return y.astype(np.int32), names


def to_uint8_images(x: np.ndarray, spec: DatasetSpec, where: str) -> np.ndarray:
    """NHW or NHWC arrays (uint8 0..255, or floats in 0..1) to uint8 NHWC at the image size."""
    if x.ndim == 3:
        x = x[..., np.newaxis]
    if x.ndim != 4 or x.shape[-1] not in (1, 3, 4):
        raise NasError(f"{where}: images must have shape (N, H, W) or (N, H, W, C), C 1, 3 or 4; got {list(x.shape)}")
    if np.issubdtype(x.dtype, np.floating):
        if x.size and (np.nanmin(x) < 0 or np.nanmax(x) > 1 or np.isnan(x).any()):
            raise NasError(f"{where}: float images must hold values in [0, 1]")
        x = np.round(x * 255).astype(np.uint8)
    elif x.dtype != np.uint8:
        raise NasError(f"{where}: images must be uint8 (0..255) or floats in [0, 1], got {x.dtype}")
    tf = import_tensorflow()
    out = [_resize_uint8(tf, tf.convert_to_tensor(x[i : i + 1024]), spec).numpy() for i in range(0, len(x), 1024)]
    return np.concatenate(out) if out else np.empty((0, spec.image_size, spec.image_size, _channels(spec)), np.uint8)


def read_npz(path: Path, spec: DatasetSpec) -> Images:
    where = f"dataset: {path}"
    try:
        with np.load(path, allow_pickle=False) as arrays:
            missing = [k for k in ("x", "y") if k not in arrays.files]
            if missing:
                raise NasError(f"{where}: no array named {' or '.join(missing)} (found: {', '.join(arrays.files)})")
            x, y = arrays["x"], arrays["y"]
    except (OSError, ValueError, EOFError, NotImplementedError, zipfile.BadZipFile, zlib.error) as exc:
        # A damaged zip raises zipfile's, zlib's or NumPy's own errors (as builtin.py's reader).
        raise NasError(f"{where}: cannot read as .npz ({type(exc).__name__}: {exc})") from None
    if len(x) != len(y):
        raise NasError(f"{where}: x holds {len(x)} images but y holds {len(y)} labels")
    labels, names = _labels(np.asarray(y), where, spec.classes)
    return Images(to_uint8_images(np.asarray(x), spec, where), labels, names)


def _resize_uint8(tf: Any, image: Any, spec: DatasetSpec) -> Any:
    channels = _channels(spec)
    if image.shape[-1] == 4:
        image = image[..., :3]
    if image.shape[-1] is not None and image.shape[-1] != channels:
        image = tf.image.grayscale_to_rgb(image) if channels == 3 else tf.image.rgb_to_grayscale(image)
    image = tf.image.resize(image, (spec.image_size, spec.image_size), method="bilinear", antialias=True)
    return tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)


def read_tfrecord(path: Path, spec: DatasetSpec) -> Images:
    tf = import_tensorflow()
    files = sorted(str(p) for p in path.glob("*.tfrecord*")) if path.is_dir() else [str(path)]
    if not files:
        raise NasError(f"dataset.path: no *.tfrecord files in {path}")
    t = spec.tfrecord
    features = {
        t.image_feature: tf.io.FixedLenFeature([], tf.string),
        t.label_feature: tf.io.FixedLenFeature([], tf.int64 if t.label_type == "int64" else tf.string),
    }

    def parse(record: Any) -> Any:
        example = tf.io.parse_single_example(record, features)
        raw = example[t.image_feature]
        if t.image_type == "encoded":
            image = tf.io.decode_image(raw, channels=_channels(spec), expand_animations=False)
        else:
            image = tf.reshape(tf.io.decode_raw(raw, tf.uint8), t.raw_shape)
        return _resize_uint8(tf, image, spec), example[t.label_feature]

    images: list[np.ndarray] = []
    labels: list[Any] = []
    for file in files:
        ds = tf.data.TFRecordDataset(file).map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        try:
            for image, label in ds.batch(256):
                images.append(image.numpy())
                labels += list(label.numpy())
        except tf.errors.InvalidArgumentError as exc:
            reason = exc.message.strip().splitlines()[0][:200]
            raise NasError(f"dataset: {file}: {reason}") from None
        except tf.errors.DataLossError as exc:
            raise NasError(f"dataset: {file} is not a valid TFRecord file ({exc.message.strip()[:120]})") from None
    if not labels:
        raise NasError(f"dataset: {path} holds no records")
    if t.label_type == "string":
        names = sorted({bytes(v).decode() for v in labels})
        if len(names) < 2:
            raise NasError(f"dataset: {path}: a single class ('{names[0]}'); a classifier needs at least 2")
        index = {n: i for i, n in enumerate(names)}
        y, classes = np.asarray([index[bytes(v).decode()] for v in labels], np.int32), tuple(names)
    else:
        y, classes = _labels(np.asarray(labels), f"dataset: {path}", spec.classes)
    return Images(np.concatenate(images), y, classes)


def read_source(path: Path, spec: DatasetSpec) -> Images:
    if not path.exists():
        raise NasError(f"dataset.path: {path} does not exist")
    if spec.source == "folder":
        return read_folder(path, spec)
    if spec.source == "npz":
        return read_npz(path, spec)
    return read_tfrecord(path, spec)

"""Datasets: read once (decoded, resized, split), kept as uint8, served through tf.data.

A test set (a built-in's official one, dataset.test_path or dataset.test_fraction) is kept
apart in x_test/y_test: the search trains and validates on the training data only.

A user's data is decoded once per machine: the split arrays are stored in a cache folder
keyed by the dataset settings and the files' sizes and times, so resumed searches and every
worker of a pool load them instead of decoding again. Small data sets are then held in
memory; ones larger than a share of RAM are read from the cache files (memory-mapped).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nas.errors import NasError
from nas.search.data.builtin import Found, locate, read_builtin
from nas.search.data.sources import Images, list_folder, read_source, to_uint8_images
from nas.search.runtime import import_tensorflow
from nas.search.space import BUILTIN_SETS, DatasetSpec

log = logging.getLogger("nas")

CACHE_ENV = "NAS_CACHE_DIR"
# "auto" keeps a data set in memory up to this share of the machine's RAM.
MEMORY_SHARE = 0.25


@dataclass(frozen=True)
class Dataset:
    x_train: np.ndarray  # uint8 NHWC (0..255); the pipeline scales to [0, 1] floats
    y_train: np.ndarray  # int32 class indices
    x_val: np.ndarray
    y_val: np.ndarray
    class_names: tuple[str, ...]
    info: dict[str, Any] = field(default_factory=dict)  # source, skipped files, cache, decode rate
    # The test set: read only after the search (final scoring), never by training, validation,
    # the sampler or screening. None where the data set has none.
    x_test: np.ndarray | None = None
    y_test: np.ndarray | None = None

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def channels(self) -> int:
        return int(self.x_train.shape[-1])

    def summary(self) -> dict[str, Any]:
        def counts(y: np.ndarray) -> dict[str, int]:
            known = y[(y >= 0) & (y < self.num_classes)]  # Python callers may pass any labels
            found = np.bincount(known, minlength=self.num_classes)
            return {name: int(n) for name, n in zip(self.class_names, found, strict=True)}

        return {
            "train": len(self.y_train),
            "validation": len(self.y_val),
            "classes": list(self.class_names),
            "train_per_class": counts(self.y_train),
            "validation_per_class": counts(self.y_val),
            "shape": list(self.x_train.shape[1:]),
            **({"test": len(self.y_test)} if self.y_test is not None else {}),
            **self.info,
        }


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "nas" / "datasets")


def _split(x: np.ndarray, y: np.ndarray, spec: DatasetSpec) -> tuple[np.ndarray, ...]:
    """Stratified and seeded where every class has two images; plain seeded otherwise."""
    # scikit-learn takes about 2 s to import: commands and processes that never load data (the
    # CLI's start, a pool's parent) must not pay for it, so it is imported where it is used.
    from sklearn.model_selection import train_test_split

    stratify = y if np.bincount(y).min(initial=2) >= 2 else None
    if spec.subset is not None and spec.subset < len(y):
        x, _, y, _ = train_test_split(x, y, train_size=spec.subset, stratify=stratify, random_state=spec.seed)
        stratify = y if np.bincount(y).min(initial=2) >= 2 else None
    out: tuple[np.ndarray, ...] = tuple(
        train_test_split(x, y, test_size=spec.validation_fraction, stratify=stratify, random_state=spec.seed)
    )
    return out


def _hold_out_test(images: Images, spec: DatasetSpec) -> tuple[Images, Images]:
    """dataset.test_fraction of the images, stratified and seeded like the validation split,
    taken before it: (what stays for training and validation, the test set)."""
    from sklearn.model_selection import train_test_split

    stratify = images.y if np.bincount(images.y).min(initial=2) >= 2 else None
    try:
        x, x_test, y, y_test = train_test_split(
            images.x, images.y, test_size=spec.test_fraction, stratify=stratify, random_state=spec.seed
        )
    except ValueError as exc:  # too few images for a stratified test set of that size
        raise NasError(f"dataset.test_fraction: {spec.test_fraction} of {len(images.y)} images: {exc}") from None
    return Images(x, y, images.class_names, images.skipped), Images(x_test, y_test, images.class_names)


def _digits(spec: DatasetSpec) -> Dataset:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = np.round(digits.images * (255 / 16)).astype(np.uint8)[..., np.newaxis]
    y = digits.target.astype(np.int32)
    classes = tuple(str(n) for n in digits.target_names)
    test = None
    if spec.test_fraction is not None:
        kept, test = _hold_out_test(Images(x, y, classes), spec)
        x, y = kept.x, kept.y
    x_train, x_val, y_train, y_val = _split(x, y, spec)
    resize = spec.model_copy(update={"channels": 1})
    x_train, x_val = to_uint8_images(x_train, resize, "digits"), to_uint8_images(x_val, resize, "digits")
    x_test = None if test is None else to_uint8_images(test.x, resize, "digits")
    y_test = None if test is None else test.y
    return Dataset(x_train, y_train, x_val, y_val, classes, {"source": "digits"}, x_test, y_test)


def _stamp(path: Path) -> list[Any]:
    """What changes when the data changes: sizes and modification times of its files."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    stats = [p.stat() for p in files]
    return [len(files), sum(s.st_size for s in stats), max((s.st_mtime_ns for s in stats), default=0)]


def _cache_key(spec: DatasetSpec, found: Found | None) -> str:
    settings = spec.model_dump(mode="json", exclude={"augmentation", "cache"})
    for key in ("test_path", "test_fraction"):  # unset, they leave the keys of earlier entries as they were
        if settings[key] is None:
            del settings[key]
    stamps = [_stamp(Path(p)) for p in (spec.path, spec.validation_path, spec.test_path) if p and Path(p).exists()]
    if found is not None:  # a built-in: where its files were found, and their stamps
        stamps = [[str(p), *_stamp(p)] for p in found.files]
    text = json.dumps({"settings": settings, "files": stamps, "format": 1}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _test_set(spec: DatasetSpec, train: Images) -> tuple[Images, Images | None]:
    """The training images less a held-out test set, and that test set (None without one)."""
    if spec.test_fraction is not None:
        return _hold_out_test(train, spec)
    if not spec.test_path:
        return train, None
    if not Path(spec.test_path).exists():
        raise NasError(f"dataset.test_path: {spec.test_path} does not exist")
    test = read_source(Path(spec.test_path), spec)
    if test.class_names != train.class_names:
        raise NasError(
            f"dataset.test_path: its classes {list(test.class_names)} differ from "
            f"dataset.path's {list(train.class_names)}"
        )
    return train, test


def _decode(spec: DatasetSpec, found: Found | None) -> tuple[dict[str, np.ndarray], tuple[str, ...], dict[str, Any]]:
    started = time.perf_counter()
    test: Images | None
    if found is not None:
        train, test = read_builtin(spec, found)
        read = len(train.y) + len(test.y)
    else:
        assert spec.path is not None
        train, test = _test_set(spec, read_source(Path(spec.path), spec))
        read = len(train.y) + (len(test.y) if test is not None else 0)
    skipped = list(train.skipped) + (test.skipped if test is not None else [])
    if spec.validation_path:
        val = read_source(Path(spec.validation_path), spec)
        skipped += val.skipped
        if val.class_names != train.class_names:
            raise NasError(
                f"dataset.validation_path: its classes {list(val.class_names)} differ from "
                f"dataset.path's {list(train.class_names)}"
            )
        x_train, y_train = train.x, train.y
        if spec.subset is not None and spec.subset < len(y_train):
            x_train, _, y_train, _ = _split(x_train, y_train, spec.model_copy(update={"validation_fraction": 0.5}))
        arrays = {"x_train": x_train, "y_train": y_train, "x_val": val.x, "y_val": val.y}
    else:
        if len(train.y) < 4:
            raise NasError(f"dataset.path: {spec.path} holds {len(train.y)} readable images; too few to split")
        x_train, x_val, y_train, y_val = _split(train.x, train.y, spec)
        arrays = {"x_train": x_train, "y_train": y_train, "x_val": x_val, "y_val": y_val}
    if test is not None:
        arrays.update(x_test=test.x, y_test=test.y)
    seconds = time.perf_counter() - started
    images = read + (len(arrays["y_val"]) if spec.validation_path else 0)
    info = {
        "source": spec.source,
        "path": str(found.place) if found is not None else spec.path,
        "skipped": len(skipped),
        "skipped_examples": skipped[:5],
        "decode_images_per_s": round(images / seconds, 1) if seconds > 0 else None,
    }
    return arrays, train.class_names, info


def _save(folder: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    """Write the cache entry atomically: a worker racing us finds a whole entry or none."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=folder.name + ".tmp-"))
    for name, array in arrays.items():
        np.save(tmp / f"{name}.npy", array)
    (tmp / "meta.json").write_text(json.dumps(meta))
    try:
        os.replace(tmp, folder)
    except OSError:  # another process stored the same entry first
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()


def _fits_in_memory(folder: Path) -> bool:
    size = sum(p.stat().st_size for p in folder.glob("*.npy"))
    try:
        ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return True
    return size <= MEMORY_SHARE * ram


def _from_files(spec: DatasetSpec, warn: Callable[[str], None]) -> Dataset:
    found = locate(spec) if spec.source in BUILTIN_SETS else None
    folder = cache_dir() / _cache_key(spec, found)
    decoded: dict[str, np.ndarray] | None = None
    if not (folder / "meta.json").exists():
        arrays, classes, info = _decode(spec, found)
        if info["skipped"]:
            examples = ", ".join(info["skipped_examples"])
            warn(f"Warning: skipped {info['skipped']} unreadable image(s), e.g. {examples} (dataset.on_corrupt: skip)")
        try:
            _save(folder, arrays, {"classes": list(classes), "info": info})
        except OSError as exc:
            log.warning("could not cache the decoded data set in %s: %s", folder, exc)
            return _dataset(arrays, classes, info)
        decoded = arrays
    meta = json.loads((folder / "meta.json").read_text())
    in_memory = spec.cache == "memory" or (spec.cache == "auto" and _fits_in_memory(folder))
    if in_memory and decoded is not None:
        arrays = decoded  # just decoded: no need to read back what was written
    else:
        arrays = {
            k: np.load(folder / f"{k}.npy", mmap_mode=None if in_memory else "r")
            for k in ("x_train", "y_train", "x_val", "y_val", "x_test", "y_test")
            if (folder / f"{k}.npy").exists()  # entries of data without a test set have none
        }
    for k in ("y_train", "y_val", "y_test"):
        if k in arrays:
            arrays[k] = np.asarray(arrays[k])
    info = {**meta["info"], "cache": "memory" if in_memory else "disk", "cache_dir": str(folder)}
    return _dataset(arrays, tuple(meta["classes"]), info)


def _dataset(arrays: dict[str, np.ndarray], classes: tuple[str, ...], info: dict[str, Any]) -> Dataset:
    train_val = (arrays["x_train"], arrays["y_train"], arrays["x_val"], arrays["y_val"])
    return Dataset(*train_val, classes, info, arrays.get("x_test"), arrays.get("y_test"))


def check_source(spec: DatasetSpec) -> None:
    """The checks that need no decoding (paths, class folders, where a built-in's files are),
    for a parent that does not load the data itself before the database is touched."""
    if spec.source in BUILTIN_SETS:
        locate(spec)
        return
    for key, value in (("path", spec.path), ("validation_path", spec.validation_path), ("test_path", spec.test_path)):
        if value is None:
            continue
        if not Path(value).exists():
            raise NasError(f"dataset.{key}: {value} does not exist")
        if spec.source == "folder":
            list_folder(Path(value))


def load_dataset(spec: DatasetSpec, warn: Callable[[str], None] = log.warning) -> Dataset:
    """The space's data set, split (seeded) and resized to its image size."""
    if spec.source == "digits":
        return _digits(spec)
    return _from_files(spec, warn)


def pipeline(x: np.ndarray, y: np.ndarray, batch_size: int, *, shuffle_seed: int | None) -> Any:
    """Shuffled (when seeded) batches of [0, 1] float images, prefetched. Arrays in memory are
    sliced by tf.data; memory-mapped ones are gathered batch by batch from the file."""

    tf = import_tensorflow()
    if isinstance(x, np.memmap):
        ds = tf.data.Dataset.range(len(y))
        if shuffle_seed is not None:
            ds = ds.shuffle(len(y), seed=shuffle_seed, reshuffle_each_iteration=True)

        def gather(index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            order = np.sort(index)  # sequential reads; the order inside a batch does not matter
            return np.asarray(x[order]), y[order]

        def read(index: Any) -> Any:
            images, labels = tf.numpy_function(gather, [index], (tf.uint8, tf.int32))
            return tf.ensure_shape(images, [None, *x.shape[1:]]), tf.ensure_shape(labels, [None])

        ds = ds.batch(batch_size).map(read, num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        if shuffle_seed is not None:
            ds = ds.shuffle(len(y), seed=shuffle_seed, reshuffle_each_iteration=True)
        ds = ds.batch(batch_size)
    ds = ds.map(lambda images, labels: (tf.cast(images, tf.float32) / 255.0, labels))
    return ds.prefetch(tf.data.AUTOTUNE)


def delivery_rate(data: Dataset, batch_size: int, seconds: float = 1.0) -> float:
    """Images per second the training pipeline delivers on this machine (no model)."""
    batches = 0
    images = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for x, _ in pipeline(data.x_train, data.y_train, batch_size, shuffle_seed=batches):
            images += int(x.shape[0])
            batches += 1
            if time.perf_counter() - started >= seconds:
                break
    return images / (time.perf_counter() - started)

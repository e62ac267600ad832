"""Keras' data sets by name (fashion_mnist, mnist, cifar10, cifar100), read from the files
`keras.datasets` keeps in its cache folder, from a folder the space names, or from Debian's
packages: never downloaded, because a search must not depend on the network. The official
test split comes along, kept apart from the training data the search splits."""

from __future__ import annotations

import io
import os
import pickle
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nas.errors import NasError
from nas.search.data.idx import IMAGES_MAGIC, LABELS_MAGIC, read_idx
from nas.search.data.sources import Images, to_uint8_images
from nas.search.space import BUILTIN_SETS, DatasetSpec

DEBIAN_ROOT = Path("/usr/share/datasets")
IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


@dataclass(frozen=True)
class Layout:
    keras: tuple[str, ...]  # folders under <Keras home>/datasets that keras.datasets fills
    debian: str | None  # folder under /usr/share/datasets of a Debian package
    npz: str | None = None  # one file holding x_train, y_train, x_test, y_test
    idx: bool = False  # the four original IDX files
    cifar: str | None = None  # the folder inside the original tarball
    tarball: str | None = None  # the original tarball's name
    get: str = ""


def _keras_get(name: str) -> str:
    return f"Keras' download: python -c 'import keras; keras.datasets.{name}.load_data()' (fills its cache folder)"


LAYOUTS = {
    "fashion_mnist": Layout(
        ("fashion-mnist",),
        "fashion-mnist",
        idx=True,
        get=f"apt-get install dataset-fashion-mnist (Debian), or {_keras_get('fashion_mnist')}",
    ),
    # Debian has no MNIST package today; its folder is looked in should one follow the
    # naming of dataset-fashion-mnist.
    "mnist": Layout((".",), "mnist", npz="mnist.npz", idx=True, get=_keras_get("mnist")),
    "cifar10": Layout(
        ("cifar-10-batches-py-target", "."),  # Keras 3 extracts into a *-target folder; Keras 2 did not
        None,
        cifar="cifar-10-batches-py",
        tarball="cifar-10-python.tar.gz",
        get=_keras_get("cifar10"),
    ),
    "cifar100": Layout(
        ("cifar-100-python-target", "."),
        None,
        cifar="cifar-100-python",
        tarball="cifar-100-python.tar.gz",
        get=_keras_get("cifar100"),
    ),
}
CIFAR_FILES = {
    "cifar-10-batches-py": ([f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], b"labels"),
    "cifar-100-python": (["train"], ["test"], b"fine_labels"),
}


Split = tuple[np.ndarray, np.ndarray, str]  # images, labels, the file to name in an error


@dataclass(frozen=True)
class Found:
    kind: str  # idx, npz, cifar (a folder of batches) or tar
    place: Path  # the folder, or the npz or tar file
    files: tuple[Path, ...]  # what is read: their sizes and times key the decoded cache


def keras_home() -> Path:
    """What Keras 3 uses: KERAS_HOME, else ~/.keras (/tmp/.keras when home is read-only)."""
    if "KERAS_HOME" in os.environ:
        return Path(os.environ["KERAS_HOME"]).expanduser()
    home = Path("~").expanduser()
    return (home if os.access(home, os.W_OK) else Path("/tmp")) / ".keras"


def _idx_file(folder: Path, name: str) -> Path | None:
    return next((p for p in (folder / f"{name}.gz", folder / name) if p.is_file()), None)


def _find_idx(folder: Path) -> Found | None:
    files = {name: _idx_file(folder, name) for name in IDX_FILES}
    if not any(files.values()):
        return None
    missing = [f"{name}.gz" for name, path in files.items() if path is None]
    if missing:
        raise NasError(f"dataset: {folder} holds only part of the IDX files: {', '.join(missing)} missing")
    return Found("idx", folder, tuple(p for p in files.values() if p is not None))


def _find_cifar(folder: Path, layout: Layout) -> Found | None:
    assert layout.cifar is not None and layout.tarball is not None
    train, test, _ = CIFAR_FILES[layout.cifar]
    for batches in (folder / layout.cifar, folder):
        present = [name for name in train + test if (batches / name).is_file()]
        if present:
            missing = [name for name in train + test if name not in present]
            if missing:
                raise NasError(f"dataset: {batches} holds only part of {layout.cifar}: {', '.join(missing)} missing")
            return Found("cifar", batches, tuple(batches / name for name in train + test))
    for name in (layout.tarball, f"{layout.cifar}.tar.gz", f"{layout.cifar}-target_archive"):
        if (folder / name).is_file():
            return Found("tar", folder / name, (folder / name,))
    return None


def _find_in(folder: Path, layout: Layout) -> Found | None:
    if not folder.is_dir():
        return None
    if layout.npz and (folder / layout.npz).is_file():
        return Found("npz", folder / layout.npz, (folder / layout.npz,))
    if layout.idx:
        return _find_idx(folder)
    return _find_cifar(folder, layout)


def places(spec: DatasetSpec) -> list[Path]:
    """Where a data set is looked for, in order: only dataset.path when the space names one."""
    if spec.path:
        return [Path(spec.path)]
    layout = LAYOUTS[spec.source]
    datasets = keras_home() / "datasets"
    found = [datasets / sub if sub != "." else datasets for sub in layout.keras]
    return found + ([DEBIAN_ROOT / layout.debian] if layout.debian else [])


def locate(spec: DatasetSpec) -> Found:
    """The data set's files, without reading them; a NasError that says where nas looked and
    how to get them when there are none."""
    layout = LAYOUTS[spec.source]
    looked = places(spec)
    for folder in looked:
        found = _find_in(folder, layout)
        if found is not None:
            return found
    where = ", ".join(str(p) for p in looked)
    hint = "" if spec.path else " (Keras' cache folder: $KERAS_HOME/datasets, else ~/.keras/datasets)"
    raise NasError(f"dataset: {spec.source} not found in {where}{hint}; get it with {layout.get}")


PICKLED_ARRAYS = frozenset(
    {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
    }
)


class _ArraysOnly(pickle.Unpickler):
    """CIFAR's batches are pickled dicts of NumPy arrays and lists: nothing else is rebuilt, so
    a tampered file cannot run code."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in PICKLED_ARRAYS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to rebuild {module}.{name}")


def _cifar_batch(raw: bytes, where: str, label_key: bytes) -> tuple[np.ndarray, np.ndarray]:
    try:
        batch = _ArraysOnly(io.BytesIO(raw), encoding="bytes").load()
        data, labels = np.asarray(batch[b"data"], np.uint8), np.asarray(batch[label_key])
        images = data.reshape(len(data), 3, 32, 32).transpose(0, 2, 3, 1)
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise NasError(f"dataset: {where} is not a readable CIFAR batch ({type(exc).__name__}: {exc})") from None
    if len(images) != len(labels):
        raise NasError(f"dataset: {where} holds {len(images)} images but {len(labels)} labels")
    return images, labels


def _read_cifar(found: Found, cifar: str) -> tuple[Split, Split]:
    train, test, label_key = CIFAR_FILES[cifar]
    raws: dict[str, bytes] = {}
    if found.kind == "cifar":
        for name in train + test:
            try:
                raws[name] = (found.place / name).read_bytes()
            except OSError as exc:
                raise NasError(f"dataset: {found.place / name} is not readable ({exc})") from None
    else:
        try:
            with tarfile.open(found.place, "r:*") as archive:
                for member in archive:
                    parent, _, name = member.name.rpartition("/")
                    if parent.endswith(cifar) and name in train + test and member.isfile():
                        handle = archive.extractfile(member)
                        raws[name] = handle.read() if handle else b""
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
            raise NasError(f"dataset: {found.place} is not a readable tarball ({exc})") from None
        missing = [name for name in train + test if name not in raws]
        if missing:
            raise NasError(f"dataset: {found.place} lacks {cifar}/{', '.join(missing)}")

    def split(names: list[str]) -> Split:
        parts = [_cifar_batch(raws[name], f"{found.place}/{name}", label_key) for name in names]
        return np.concatenate([x for x, _ in parts]), np.concatenate([y for _, y in parts]), f"{found.place}/{names[0]}"

    return split(train), split(test)


def _read_idx_pair(images: Path, labels: Path) -> Split:
    x, y = read_idx(images, IMAGES_MAGIC), read_idx(labels, LABELS_MAGIC)
    if len(x) != len(y):
        raise NasError(f"dataset: {images} holds {len(x)} images but {labels} holds {len(y)} labels")
    return x, y, str(labels)


def _read_npz(path: Path) -> tuple[Split, Split]:
    try:
        with np.load(path, allow_pickle=False) as arrays:
            split = {k: np.asarray(arrays[k]) for k in ("x_train", "y_train", "x_test", "y_test")}
    except KeyError as exc:
        raise NasError(f"dataset: {path} has no array {exc}") from None
    except Exception as exc:  # a damaged zip raises zipfile's, zlib's or NumPy's own errors
        raise NasError(f"dataset: {path} is not a readable .npz ({type(exc).__name__}: {exc})") from None
    for part in ("train", "test"):
        if len(split[f"x_{part}"]) != len(split[f"y_{part}"]):
            raise NasError(
                f"dataset: {path}: x_{part} holds {len(split[f'x_{part}'])} images "
                f"but y_{part} holds {len(split[f'y_{part}'])} labels"
            )
    return (split["x_train"], split["y_train"], str(path)), (split["x_test"], split["y_test"], str(path))


def read_builtin(spec: DatasetSpec, found: Found) -> tuple[Images, Images]:
    """The official training and test splits, resized like every other source's images."""
    layout = LAYOUTS[spec.source]
    splits: tuple[Split, Split]
    if found.kind == "idx":
        f = dict(zip(IDX_FILES, found.files, strict=True))
        splits = (
            _read_idx_pair(f["train-images-idx3-ubyte"], f["train-labels-idx1-ubyte"]),
            _read_idx_pair(f["t10k-images-idx3-ubyte"], f["t10k-labels-idx1-ubyte"]),
        )
    elif found.kind == "npz":
        splits = _read_npz(found.place)
    else:
        assert layout.cifar is not None
        splits = _read_cifar(found, layout.cifar)
    classes = tuple(spec.classes or BUILTIN_SETS[spec.source].classes)
    out = []
    for x, y, where in splits:
        labels = np.asarray(y).reshape(-1)
        if len(labels) and (labels.min() < 0 or labels.max() >= len(classes)):
            bad = int(labels.max() if labels.max() >= len(classes) else labels.min())
            raise NasError(f"dataset: {where}: label {bad} is out of range for {spec.source}'s {len(classes)} classes")
        out.append(Images(to_uint8_images(np.asarray(x), spec, f"dataset: {where}"), labels.astype(np.int32), classes))
    return out[0], out[1]

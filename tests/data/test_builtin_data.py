"""Keras' data sets by name, from the files the tests write in Keras' cache layout, a Debian
layout or a folder the space names; every damaged-file case; and the test set kept apart."""

from __future__ import annotations

import gzip
import io
import os
import pickle
import struct
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from nas.errors import NasError
from nas.search.data import check_source, load_dataset
from nas.search.space import DatasetSpec

from ..helpers import REPO, run_cli

FASHION = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture(autouse=True)
def _private_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))


def _images(count: int, size: int = 28, channels: int | None = None, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Images that name their own index (pixel [0, 0]) and class (pixel [0, 1]): splits can be
    traced back to the images written."""
    rng = np.random.default_rng(seed)
    shape = (count, size, size) if channels is None else (count, size, size, channels)
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    index = np.arange(count).reshape(-1, *[1] * (x.ndim - 3))
    x[:, 0, 0], x[:, 0, 1] = index, index % 10 * 20
    return x, (np.arange(count) % 10).astype(np.uint8)


def _idx_bytes(array: np.ndarray, magic: int) -> bytes:
    return struct.pack(f">I{array.ndim}I", magic, *array.shape) + array.astype(np.uint8).tobytes()


def _write_idx_set(folder: Path, *, train: int = 40, test: int = 20, gz: bool = True) -> dict[str, np.ndarray]:
    """The four original (Fashion-)MNIST files, a few dozen images of 28x28."""
    folder.mkdir(parents=True, exist_ok=True)
    (x_train, y_train), (x_test, y_test) = _images(train), _images(test, seed=1)
    arrays = {FASHION[0]: x_train, FASHION[1]: y_train, FASHION[2]: x_test, FASHION[3]: y_test}
    for name, array in arrays.items():
        data = _idx_bytes(array, 2051 if array.ndim == 3 else 2049)
        (folder / (f"{name}.gz" if gz else name)).write_bytes(gzip.compress(data) if gz else data)
    return arrays


def _spec(**fields: Any) -> DatasetSpec:
    return DatasetSpec.model_validate({"image_size": 28, "validation_fraction": 0.25, **fields})


def _cache_entries(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "cache").iterdir()) if (tmp_path / "cache").exists() else []


def test_fashion_mnist_from_the_keras_cache(tmp_path: Path) -> None:
    written = _write_idx_set(tmp_path / "keras" / "datasets" / "fashion-mnist")
    data = load_dataset(_spec(source="fashion_mnist"))
    assert data.class_names[:2] == ("T-shirt/top", "Trouser") and data.class_names[-1] == "Ankle boot"
    assert (len(data.y_train), len(data.y_val)) == (30, 10) and data.x_train.shape[1:] == (28, 28, 1)
    assert data.summary()["validation_per_class"] == dict.fromkeys(data.class_names, 1)
    # The official test split, untouched; the training images only in training and validation.
    assert data.x_test is not None and data.y_test is not None
    assert np.array_equal(data.x_test[..., 0], written[FASHION[2]]) and np.array_equal(data.y_test, written[FASHION[3]])
    seen = np.sort(np.concatenate([data.x_train[:, 0, 0, 0], data.x_val[:, 0, 0, 0]]))
    assert np.array_equal(seen, np.arange(40))
    summary = data.summary()
    assert summary["test"] == 20 and summary["source"] == "fashion_mnist"
    assert summary["path"] == str(tmp_path / "keras" / "datasets" / "fashion-mnist")
    again = load_dataset(_spec(source="fashion_mnist", cache="disk"))  # the decoded cache holds the test set too
    assert isinstance(again.x_test, np.memmap) and np.array_equal(again.x_test, data.x_test)
    assert len(_cache_entries(tmp_path)) == 1


def test_debian_style_folder_named_by_path(tmp_path: Path) -> None:
    folder = tmp_path / "datasets" / "fashion-mnist"
    _write_idx_set(folder, gz=False)  # plain IDX files read as well as gzip ones
    spec = _spec(source="fashion_mnist", path=str(folder), image_size=16, channels=3)
    check_source(spec)
    data = load_dataset(spec)
    assert data.x_train.shape[1:] == (16, 16, 3) and data.x_test is not None and data.x_test.shape == (20, 16, 16, 3)


def test_mnist_from_the_keras_npz_and_from_idx_files(tmp_path: Path) -> None:
    (x_train, y_train), (x_test, y_test) = _images(40), _images(20, seed=1)
    datasets = tmp_path / "keras" / "datasets"
    datasets.mkdir(parents=True)
    np.savez(datasets / "mnist.npz", x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)
    # A subset of the training data; the test set whole.
    data = load_dataset(_spec(source="mnist", subset=20, validation_fraction=0.5))
    assert data.class_names == tuple("0123456789") and len(data.y_train) + len(data.y_val) == 20
    assert data.y_test is not None and np.array_equal(data.y_test, y_test)
    _write_idx_set(tmp_path / "originals")
    assert load_dataset(_spec(source="mnist", path=str(tmp_path / "originals"))).summary()["test"] == 20


def _cifar_batch(x: np.ndarray, y: np.ndarray, label_key: bytes) -> bytes:
    data = x.transpose(0, 3, 1, 2).reshape(len(x), -1)  # CIFAR stores planes: R, then G, then B
    return pickle.dumps({b"batch_label": b"b", label_key: [int(v) for v in y], b"data": data})


def test_cifar10_in_keras_3_layout_and_cifar100_from_its_tarball(tmp_path: Path) -> None:
    folder = tmp_path / "keras" / "datasets" / "cifar-10-batches-py-target" / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    parts = [_images(10, 32, 3, seed=i) for i in range(6)]
    for i, (x, y) in enumerate(parts[:5], start=1):
        (folder / f"data_batch_{i}").write_bytes(_cifar_batch(x, y, b"labels"))
    (folder / "test_batch").write_bytes(_cifar_batch(*parts[5], b"labels"))
    data = load_dataset(_spec(source="cifar10", image_size=32))
    assert data.x_test is not None and data.y_test is not None and data.class_names[0] == "airplane"
    assert (len(data.y_train) + len(data.y_val), len(data.y_test)) == (50, 10)
    assert np.array_equal(data.x_test, parts[5][0]) and np.array_equal(data.y_test, parts[5][1])

    tarball = tmp_path / "downloads" / "cifar-100-python.tar.gz"
    tarball.parent.mkdir()
    x, y = _images(40, 32, 3)
    with tarfile.open(tarball, "w:gz") as archive:
        for name, (images, labels) in {"train": (x, y * 9), "test": (x[:20], y[:20] * 11)}.items():
            raw = _cifar_batch(images, labels, b"fine_labels")
            info = tarfile.TarInfo(f"cifar-100-python/{name}")
            info.size = len(raw)
            archive.addfile(info, io.BytesIO(raw))
    hundred = load_dataset(_spec(source="cifar100", path=str(tarball.parent), image_size=32, validation_fraction=0.5))
    assert len(hundred.class_names) == 100 and hundred.class_names[99] == "worm"
    assert hundred.y_test is not None and sorted(set(hundred.y_test)) == [0, 11, 22, 33, 44, 55, 66, 77, 88, 99]


def test_a_pickle_that_rebuilds_anything_but_arrays_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (folder / name).write_bytes(pickle.dumps({b"data": os.getcwd}))  # a global outside NumPy's arrays
    with pytest.raises(NasError, match=r"data_batch_1 is not a readable CIFAR batch .*refusing to rebuild"):
        load_dataset(_spec(source="cifar10", path=str(tmp_path), image_size=32))


def _truncate_gzip(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-200])


def _truncate_data(path: Path) -> None:
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-28]))


def _wrong_magic(path: Path) -> None:
    raw = bytearray(gzip.decompress(path.read_bytes()))
    raw[:4] = struct.pack(">I", 2049)  # a labels header on an images file
    path.write_bytes(gzip.compress(bytes(raw)))


def _one_label_short(path: Path) -> None:
    labels = gzip.decompress(path.read_bytes())[8:]
    path.write_bytes(gzip.compress(_idx_bytes(np.frombuffer(labels[:-1], np.uint8), 2049)))


def _not_gzip(path: Path) -> None:
    path.write_bytes(b"\x1f\x8b" + b"\x00" * 50)


@pytest.mark.parametrize(
    ("damage", "file", "message"),
    [
        (_truncate_gzip, FASHION[0], "is truncated (the gzip stream ends early)"),
        (_truncate_data, FASHION[2], "is truncated: 15652 bytes of data for 20x28x28 images (15680 bytes)"),
        (_wrong_magic, FASHION[0], "has IDX magic number 2049, not 2051 (IDX images)"),
        (_one_label_short, FASHION[1], "holds 40 images but"),
        (_not_gzip, FASHION[3], "is not a readable file"),
    ],
)
def test_damaged_idx_files_are_one_error_naming_the_file(tmp_path: Path, damage: Any, file: str, message: str) -> None:
    folder = tmp_path / "fashion"
    _write_idx_set(folder)
    damage(folder / f"{file}.gz")
    with pytest.raises(NasError) as info:
        load_dataset(_spec(source="fashion_mnist", path=str(folder)))
    text = str(info.value)
    assert message in text and str(folder / f"{file}.gz") in text and "\n" not in text, text
    assert _cache_entries(tmp_path) == []  # nothing stored


def test_a_missing_data_set_says_where_nas_looked_and_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(NasError) as info:
        check_source(_spec(source="mnist"))
    text = str(info.value)
    assert f"in {tmp_path / 'keras' / 'datasets'}, /usr/share/datasets/mnist" in text
    assert "keras.datasets.mnist.load_data()" in text and "\n" not in text
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NasError, match=f"fashion_mnist not found in {empty};.*apt-get install dataset-fashion-mnist"):
        load_dataset(_spec(source="fashion_mnist", path=str(empty)))
    cifar = str(tmp_path / "keras" / "datasets" / "cifar-10-batches-py-target")
    with pytest.raises(NasError, match=f"cifar10 not found in {cifar}, "):
        load_dataset(_spec(source="cifar10", image_size=32))
    _write_idx_set(tmp_path / "keras" / "datasets" / "fashion-mnist")
    (tmp_path / "keras" / "datasets" / "fashion-mnist" / f"{FASHION[3]}.gz").unlink()
    with pytest.raises(NasError, match=f"fashion-mnist holds only part of the IDX files: {FASHION[3]}.gz missing"):
        load_dataset(_spec(source="fashion_mnist"))
    assert _cache_entries(tmp_path) == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"source": "fashion_mnist", "test_fraction": 0.1}, "test_fraction: fashion_mnist takes none"),
        ({"source": "cifar10", "validation_path": "v"}, "validation_path: cifar10 takes none"),
        ({"source": "mnist", "classes": ["a", "b"]}, "classes: mnist has 10 classes, not 2"),
        ({"source": "npz", "path": "a", "test_path": "b", "test_fraction": 0.2}, "not both"),
        ({"source": "digits", "test_path": "b"}, "the built-in digits take no path"),
        ({"source": "npz", "path": "a", "test_fraction": 1.0}, "test_fraction"),
    ],
)
def test_test_set_settings_are_checked(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DatasetSpec.model_validate(fields)


def test_keras_sets_know_their_shape_without_files() -> None:
    assert (_spec(source="fashion_mnist").channels, _spec(source="cifar100").channels) == (1, 3)
    assert len(_spec(source="cifar100").classes or []) == 100
    spec = _spec(source="fashion_mnist", channels=3, classes=[f"c{i}" for i in range(10)])
    assert spec.channels == 3 and DatasetSpec.model_validate(spec.model_dump()) == spec


def test_test_fraction_is_held_out_before_the_validation_split(tmp_path: Path) -> None:
    x, y = _images(100, 16)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    spec = _spec(source="npz", path=str(tmp_path / "d.npz"), image_size=16, test_fraction=0.2, seed=5)
    data = load_dataset(spec)
    assert data.y_test is not None and data.x_test is not None
    assert (len(data.y_train), len(data.y_val), len(data.y_test)) == (60, 20, 20)
    assert np.bincount(data.y_test).tolist() == [2] * 10  # stratified
    ids = [set(a[:, 0, 0, 0].tolist()) for a in (data.x_train, data.x_val, data.x_test)]
    assert set.union(*ids) == set(range(100)) and sum(map(len, ids)) == 100  # disjoint
    assert load_dataset(spec.model_copy(update={"cache": "memory"})).x_test.tolist() == data.x_test.tolist()
    other = load_dataset(spec.model_copy(update={"seed": 6}))
    assert other.x_test is not None and set(other.x_test[:, 0, 0, 0].tolist()) != ids[2]
    without = load_dataset(spec.model_copy(update={"test_fraction": None}))
    assert without.x_test is None and "test" not in without.summary()


def test_test_path_reads_a_second_set_of_the_same_kind(tmp_path: Path) -> None:
    (x, y), (xt, yt) = _images(40, 16), _images(20, 16, seed=1)
    np.savez(tmp_path / "train.npz", x=x, y=y)
    np.savez(tmp_path / "test.npz", x=xt, y=yt)
    spec = _spec(source="npz", path=str(tmp_path / "train.npz"), test_path=str(tmp_path / "test.npz"), image_size=16)
    check_source(spec)
    data = load_dataset(spec)
    assert (len(data.y_train) + len(data.y_val), data.summary()["test"]) == (40, 20)
    assert data.x_test is not None and np.array_equal(data.x_test[..., 0], xt)
    np.savez(tmp_path / "test.npz", x=xt, y=yt % 3)
    with pytest.raises(NasError, match=r"dataset\.test_path: its classes \['0', '1', '2'\] differ"):
        load_dataset(spec)
    missing = spec.model_copy(update={"test_path": str(tmp_path / "nowhere.npz")})
    with pytest.raises(NasError, match=r"dataset\.test_path: .*nowhere\.npz does not exist"):
        check_source(missing)


def test_digits_with_a_test_fraction() -> None:
    data = load_dataset(DatasetSpec(test_fraction=0.1))
    assert data.y_test is not None and len(data.y_test) == 180 and len(data.y_train) + len(data.y_val) == 1617
    assert load_dataset(DatasetSpec()).x_test is None


def test_a_missing_keras_set_in_a_space_file_is_exit_2_and_nothing_written(workdir: Path) -> None:
    space = yaml.safe_load((REPO / "spaces" / "tiny.yaml").read_text())
    space["dataset"] = {"source": "mnist", "image_size": 16}
    (workdir / "m.yaml").write_text(yaml.safe_dump(space))
    result = run_cli("search", "m.yaml", "--trials", "1", cwd=workdir)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: dataset: mnist not found in ") and "load_data()" in lines[0]
    assert not (workdir / "nas.db").exists()


@pytest.mark.slow
def test_the_real_fashion_mnist_of_debian() -> None:
    """The package CI installs (apt-get install dataset-fashion-mnist): 60,000 + 10,000."""
    if not DEBIAN_FASHION.is_dir():
        reason = f"{DEBIAN_FASHION} is absent (apt-get install dataset-fashion-mnist)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI=true: .ci/run installs it, so this test must run there", pytrace=False)
        pytest.skip(reason)
    data = load_dataset(_spec(source="fashion_mnist", validation_fraction=0.1))
    assert data.summary()["path"] == str(DEBIAN_FASHION)  # KERAS_HOME is an empty folder here
    assert data.x_test is not None and data.y_test is not None
    assert (len(data.y_train) + len(data.y_val), data.x_test.shape, data.x_train.shape[1:]) == (
        60000,
        (10000, 28, 28, 1),
        (28, 28, 1),
    )
    per_class = np.bincount(np.concatenate([data.y_train, data.y_val]), minlength=10)
    assert per_class.tolist() == [6000] * 10 and np.bincount(data.y_test).tolist() == [1000] * 10

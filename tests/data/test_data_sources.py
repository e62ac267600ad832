"""Bring-your-own data: image folders, .npz arrays and TFRecords the tests write from digits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from PIL import Image

from nas.search import runtime

tf = runtime.import_tensorflow()

from nas.errors import NasError
from nas.search.data import Dataset, load_dataset, pipeline
from nas.search.space import DatasetSpec

from ..helpers import REPO, run_cli


def _digits(classes: int = 3, per_class: int = 12) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    d = load_digits()
    keep = np.concatenate([np.flatnonzero(d.target == c)[:per_class] for c in range(classes)])
    x = np.round(d.images[keep] * (255 / 16)).astype(np.uint8)
    return x, d.target[keep].astype(np.int64)


def _write_folder(root: Path, classes: int = 3, per_class: int = 12) -> Path:
    """Class folders of mixed formats, sizes and channels, as real collections are."""
    x, y = _digits(classes, per_class)
    formats = ["png", "jpg", "bmp", "gif"]
    for i, (image, label) in enumerate(zip(x, y, strict=True)):
        folder = root / f"class_{label}"
        folder.mkdir(parents=True, exist_ok=True)
        picture = Image.fromarray(image).resize((8 + 8 * (i % 3), 8 + 8 * (i % 3)))
        if i % 2:
            picture = picture.convert("RGB")
        picture.save(folder / f"{i}.{formats[i % len(formats)]}")
    return root


def _spec(**fields: Any) -> DatasetSpec:
    return DatasetSpec.model_validate({"image_size": 16, "validation_fraction": 0.25, **fields})


@pytest.fixture(autouse=True)
def _private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAS_CACHE_DIR", str(tmp_path / "cache"))


def test_folder_source_decodes_mixed_images(tmp_path: Path) -> None:
    root = _write_folder(tmp_path / "images")
    data = load_dataset(_spec(source="folder", path=str(root)))
    assert data.class_names == ("class_0", "class_1", "class_2")
    assert data.x_train.shape[1:] == (16, 16, 3) and data.x_train.dtype == np.uint8
    assert len(data.y_train) + len(data.y_val) == 36
    summary = data.summary()
    assert summary["validation_per_class"] == {"class_0": 3, "class_1": 3, "class_2": 3}
    assert summary["skipped"] == 0 and summary["cache"] == "memory"
    gray = load_dataset(_spec(source="folder", path=str(root), channels=1))
    assert gray.x_train.shape[1:] == (16, 16, 1)


def test_split_is_deterministic_for_a_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _write_folder(tmp_path / "images")
    first = load_dataset(_spec(source="folder", path=str(root), seed=3))
    monkeypatch.setenv("NAS_CACHE_DIR", str(tmp_path / "other-cache"))  # decode again, not a cache hit
    again = load_dataset(_spec(source="folder", path=str(root), seed=3))
    other = load_dataset(_spec(source="folder", path=str(root), seed=4))
    assert np.array_equal(first.x_val, again.x_val) and np.array_equal(first.y_train, again.y_train)
    assert not np.array_equal(first.x_val, other.x_val)


def test_decoded_data_is_cached_and_invalidated_when_files_change(tmp_path: Path) -> None:
    root = _write_folder(tmp_path / "images")
    spec = _spec(source="folder", path=str(root))
    first = load_dataset(spec)
    entries = list((tmp_path / "cache").iterdir())
    assert len(entries) == 1 and (entries[0] / "meta.json").exists()
    assert np.array_equal(load_dataset(spec).x_train, first.x_train)
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(root / "class_0" / "new.png")
    assert len(load_dataset(spec).y_train) + len(load_dataset(spec).y_val) == 37
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_disk_cache_serves_the_same_batches(tmp_path: Path) -> None:
    root = _write_folder(tmp_path / "images")
    memory = load_dataset(_spec(source="folder", path=str(root), cache="memory"))
    disk = load_dataset(_spec(source="folder", path=str(root), cache="disk"))
    assert isinstance(disk.x_train, np.memmap) and not isinstance(memory.x_train, np.memmap)
    ours = [(x.numpy(), y.numpy()) for x, y in pipeline(disk.x_train, disk.y_train, 8, shuffle_seed=None)]
    theirs = [(x.numpy(), y.numpy()) for x, y in pipeline(memory.x_train, memory.y_train, 8, shuffle_seed=None)]
    assert len(ours) == len(theirs)
    for (a, la), (b, lb) in zip(ours, theirs, strict=True):
        assert a.dtype == np.float32 and np.array_equal(a, b) and np.array_equal(la, lb)
    shuffled = np.concatenate([y.numpy() for _, y in pipeline(disk.x_train, disk.y_train, 8, shuffle_seed=1)])
    assert sorted(shuffled) == sorted(disk.y_train)


def test_corrupt_image_is_skipped_with_a_count_or_is_an_error(tmp_path: Path) -> None:
    root = _write_folder(tmp_path / "images")
    bad = root / "class_1" / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n this is not a PNG")
    warnings: list[str] = []
    data = load_dataset(_spec(source="folder", path=str(root)), warn=warnings.append)
    assert data.summary()["skipped"] == 1 and len(data.y_train) + len(data.y_val) == 36
    assert len(warnings) == 1 and "skipped 1 unreadable image" in warnings[0] and str(bad) in warnings[0]
    with pytest.raises(NasError, match=f"{bad} is not a readable image"):
        load_dataset(_spec(source="folder", path=str(root), on_corrupt="error"))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda root: root.mkdir(), "holds no images in class sub-folders"),
        (lambda root: _write_folder(root, classes=1), "holds a single class ('class_0')"),
        (lambda root: None, "does not exist"),
    ],
)
def test_bad_folders(tmp_path: Path, make: Any, message: str) -> None:
    root = tmp_path / "images"
    make(root)
    with pytest.raises(NasError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_dataset(_spec(source="folder", path=str(root)))


def test_npz_source(tmp_path: Path) -> None:
    x, y = _digits()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    data = load_dataset(_spec(source="npz", path=str(tmp_path / "d.npz"), classes=["zero", "one", "two"]))
    assert data.class_names == ("zero", "one", "two") and data.x_train.shape[1:] == (16, 16, 3)
    floats = load_dataset(_spec(source="npz", path=str(tmp_path / "d.npz"), channels=1))
    assert floats.class_names == ("0", "1", "2") and floats.x_train.shape[1:] == (16, 16, 1)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        (lambda x, y: {"x": x, "y": y[:-1]}, "x holds 36 images but y holds 35 labels"),
        (lambda x, y: {"x": x, "y": y - 1}, "label -1 is negative"),
        (lambda x, y: {"x": x, "y": y + 5}, "label 7 is out of range for the 3 classes"),
        (lambda x, y: {"images": x, "y": y}, "no array named x"),
        (lambda x, y: {"x": x.astype(np.float32), "y": y}, "float images must hold values in"),
        (lambda x, y: {"x": x, "y": np.zeros_like(y)}, "needs at least 2 classes"),
    ],
)
def test_bad_npz(tmp_path: Path, arrays: Any, message: str) -> None:
    x, y = _digits()
    path = tmp_path / "d.npz"
    np.savez(path, **arrays(x, y))
    with pytest.raises(NasError, match=message) as info:
        load_dataset(_spec(source="npz", path=str(path), classes=["a", "b", "c"] if "range" in message else None))
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:100] + b"\x5a" * 4000,  # starts like a zip, then garbage
        lambda data: data[: len(data) // 2],  # cut short
        lambda data: data[:-30],  # the end of the zip's directory cut off
        lambda data: data[:80] + bytes(b ^ 0xFF for b in data[80:400]) + data[400:],  # an array's bytes flipped
    ],
    ids=["garbage", "half", "no-directory-end", "flipped"],
)
def test_damaged_npz_is_one_error_naming_the_file(tmp_path: Path, damage: Any) -> None:
    x, y = _digits()
    path = tmp_path / "d.npz"
    np.savez_compressed(path, x=x, y=y)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(NasError, match=r"cannot read as \.npz") as info:
        load_dataset(_spec(source="npz", path=str(path)))
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_search_on_a_damaged_npz_exits_2_and_writes_nothing(workdir: Path) -> None:
    x, y = _digits()
    data = workdir / "d.npz"
    np.savez(data, x=x, y=y)
    data.write_bytes(data.read_bytes()[:100] + b"\x00" * 1000)
    space = _folder_space(workdir, data, source="npz")
    result = run_cli("search", str(space), "--trials", "1", cwd=workdir)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    expected = f"Error: dataset: {data.resolve()}: cannot read as .npz"
    assert len(lines) == 1 and lines[0].startswith(expected), result.stderr
    assert not (workdir / "nas.db").exists()


def _write_tfrecord(path: Path, *, label_key: str = "label", string_labels: bool = False, raw: bool = False) -> None:
    x, y = _digits()
    with tf.io.TFRecordWriter(str(path)) as writer:
        for image, label in zip(x, y, strict=True):
            pixels = image[..., np.newaxis]
            data = pixels.tobytes() if raw else tf.io.encode_png(pixels).numpy()
            if string_labels:
                value = tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"digit-{label}".encode()]))
            else:
                value = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))
            feature = {"img": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])), label_key: value}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())


def test_tfrecord_sources(tmp_path: Path) -> None:
    _write_tfrecord(tmp_path / "a.tfrecord")
    data = load_dataset(_spec(source="tfrecord", path=str(tmp_path / "a.tfrecord"), tfrecord={"image_feature": "img"}))
    assert data.class_names == ("0", "1", "2") and len(data.y_train) + len(data.y_val) == 36
    _write_tfrecord(tmp_path / "s.tfrecord", string_labels=True)
    strings = {"image_feature": "img", "label_type": "string"}
    named = load_dataset(_spec(source="tfrecord", path=str(tmp_path / "s.tfrecord"), tfrecord=strings))
    assert named.class_names == ("digit-0", "digit-1", "digit-2")
    _write_tfrecord(tmp_path / "r.tfrecord", raw=True)
    spec = {"image_feature": "img", "image_type": "raw", "raw_shape": [8, 8, 1]}
    raw = load_dataset(_spec(source="tfrecord", path=str(tmp_path / "r.tfrecord"), channels=1, tfrecord=spec))
    assert raw.x_train.shape[1:] == (16, 16, 1)


def test_tfrecord_missing_feature_names_file_and_feature(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    _write_tfrecord(path, label_key="class")
    with pytest.raises(NasError) as info:
        load_dataset(_spec(source="tfrecord", path=str(path), tfrecord={"image_feature": "img"}))
    assert str(path) in str(info.value) and "label" in str(info.value)


def test_explicit_validation_source(tmp_path: Path) -> None:
    train = _write_folder(tmp_path / "train")
    val = _write_folder(tmp_path / "val", per_class=4)
    data = load_dataset(_spec(source="folder", path=str(train), validation_path=str(val)))
    assert (len(data.y_train), len(data.y_val)) == (36, 12)
    other = _write_folder(tmp_path / "val2", classes=2, per_class=4)
    with pytest.raises(NasError, match=r"dataset\.validation_path: its classes"):
        load_dataset(_spec(source="folder", path=str(train), validation_path=str(other)))


def _folder_space(folder: Path, images: Path, **dataset: Any) -> Path:
    space = yaml.safe_load((REPO / "spaces" / "tiny.yaml").read_text())
    space["name"] = "own"
    space["dataset"] = {
        "source": "folder",
        "path": str(images.relative_to(folder)),
        "image_size": 16,
        "validation_fraction": 0.25,
        "augmentation": {"flip": "horizontal", "rotation": 0.05, "crop": 0.1, "contrast": 0.1},
        **dataset,
    }
    path = folder / "own.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


@pytest.mark.slow
def test_search_on_an_image_folder(workdir: Path) -> None:
    images = _write_folder(workdir / "images")
    space = _folder_space(workdir, images)
    # From another folder: the data path is relative to the space file.
    elsewhere = workdir / "run"
    elsewhere.mkdir()
    storage = f"sqlite:///{workdir / 'nas.db'}"
    result = run_cli("search", str(space), "--trials", "2", "--storage", storage, cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    import optuna

    study = optuna.load_study(study_name="own", storage=f"sqlite:///{workdir / 'nas.db'}")
    dataset = study.user_attrs["dataset"]
    assert dataset["classes"] == ["class_0", "class_1", "class_2"] and dataset["source"] == "folder"
    assert dataset["train"] == 27 and dataset["validation_per_class"] == {"class_0": 3, "class_1": 3, "class_2": 3}
    assert study.user_attrs["pipeline"]["delivery_images_per_s"] > 0
    trial = study.trials[0]
    assert trial.state.name == "COMPLETE" and trial.user_attrs["train_images_per_s"] > 0
    assert "input_bound" in trial.user_attrs
    json.dumps(trial.user_attrs)  # all plain data


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dataset", "message"),
    [
        ({"path": None}, "dataset.path: required for source folder"),
        ({"path": "nowhere"}, "dataset.path: "),
        ({"on_corrupt": "error", "corrupt": True}, "is not a readable image"),
        ({"source": "digits"}, "dataset.path: the built-in digits take no path"),
        ({"tfrecord": {"image_type": "raw"}}, "dataset.tfrecord.raw_shape: required when image_type is raw"),
        ({"augmentation": {"flip": "sideways"}}, "dataset.augmentation.flip: 'sideways'"),
    ],
)
def test_bad_dataset_in_a_space_file(workdir: Path, dataset: dict[str, Any], message: str) -> None:
    images = _write_folder(workdir / "images")
    if dataset.pop("corrupt", False):
        (images / "class_0" / "x.png").write_bytes(b"junk")
    space = _folder_space(workdir, images, **dataset)
    if dataset.get("path", "") is None:
        text = yaml.safe_load(space.read_text())
        del text["dataset"]["path"]
        space.write_text(yaml.safe_dump(text))
    result = run_cli("search", str(space), "--trials", "1", cwd=workdir)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.stderr
    assert not (workdir / "nas.db").exists()  # nothing written for bad data


def test_dataset_objects_from_python_keep_working() -> None:
    x, y = _digits()
    labels = y.astype(np.int32)
    data = Dataset(x[:24, ..., None], labels[:24], x[24:, ..., None], labels[24:], ("a", "b", "c"))
    assert data.summary()["train_per_class"] == {"a": 12, "b": 12, "c": 0}

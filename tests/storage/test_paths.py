"""Names that become paths stay one plain name under their root (storage/paths.py), and the
weight store writes and deletes only inside its artifact folder."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from nas.errors import NasError
from nas.storage import (
    contained,
    open_storage,
    own_folder,
    resolve_storage_url,
    safe_name,
    trial_number,
)
from nas.storage.models import Weights
from nas.storage.paths import NAME_PATTERN
from nas.storage.weights import WeightStore

GOOD = ["tiny", "a", "Z9", "exp.v2", "run_1-b", "ok..x", "x" * 100]
BAD = [
    "",
    ".",
    "..",
    "../evil",
    "../../etc",
    "/etc",
    "/tmp/x",
    "a/b",
    "a\\b",
    "a\x00b",
    "x" * 101,
    ".hidden",
    "-flag",
    "_x",
    "name\n",
    " name",
    "na me",
    "caf\u00e9",
    "C:x",
]


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name", GOOD)
def test_safe_names_pass_unchanged(name: str) -> None:
    assert safe_name(name, "study") == name


@pytest.mark.parametrize("name", BAD)
def test_unsafe_names_are_refused_in_one_line_naming_the_value(name: str) -> None:
    with pytest.raises(NasError) as info:
        safe_name(name, "study")
    text = str(info.value)
    assert "\n" not in text and "\x00" not in text
    assert text.startswith("study ") and "cannot be a file name" in text and "starting with a letter" in text
    assert repr(name)[:50] in text  # the value as Python writes it, so a NUL or newline shows


def test_a_very_long_name_is_shortened_in_the_message() -> None:
    with pytest.raises(NasError) as info:
        safe_name("x" * 10_000, "study")
    assert len(str(info.value)) < 200


@pytest.mark.parametrize("value", [None, 3, b"tiny", ["tiny"]])
def test_only_strings_are_names(value: object) -> None:
    with pytest.raises(NasError):
        safe_name(value, "study")


def test_the_rule_is_the_space_name_rule() -> None:
    from nas.search.space.spec import SpaceSpec

    patterns = [getattr(m, "pattern", None) for m in SpaceSpec.model_fields["name"].metadata]
    assert f"^{NAME_PATTERN}$" in patterns


@pytest.mark.parametrize("value", [0, 1, 12345])
def test_trial_numbers(value: int) -> None:
    assert trial_number(value) == value


@pytest.mark.parametrize("value", [-1, True, "3", 1.0, None])
def test_bad_trial_numbers(value: object) -> None:
    with pytest.raises(NasError, match="trial number"):
        trial_number(value)


def test_contained_joins_under_the_root(tmp_path: Path) -> None:
    assert contained(tmp_path, "study", "trial-0.keras") == tmp_path / "study" / "trial-0.keras"


@pytest.mark.parametrize("name", ["..", "../x", "/abs", "a/b", "a\\b", "a\x00b", "."])
def test_contained_refuses_what_is_not_one_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(NasError):
        contained(tmp_path, name)


def test_a_linked_root_is_allowed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    folder = own_folder(tmp_path / "link", "study")
    assert folder == tmp_path / "link" / "study"
    assert (real / "study").is_dir()


def test_a_link_inside_pointing_out_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "study").symlink_to(outside)
    with pytest.raises(NasError, match="not inside"):
        contained(root, "study", "trial-0.keras")
    with pytest.raises(NasError, match="not inside"):
        own_folder(root, "study")
    (root / "up").symlink_to("..")
    with pytest.raises(NasError, match="not inside"):
        contained(root, "up", "trial-0.keras")


def test_a_link_to_the_root_itself_is_refused(tmp_path: Path) -> None:
    (tmp_path / "self").symlink_to(tmp_path)
    with pytest.raises(NasError, match="not inside"):
        contained(tmp_path, "self")


def test_names_differing_only_in_case(tmp_path: Path) -> None:
    """Both are valid names; where the filesystem tells them apart (Linux) they get two
    folders, where it does not (macOS, Windows) the second is refused."""
    assert safe_name("Foo", "study") == "Foo" and safe_name("foo", "study") == "foo"
    (tmp_path / "Probe").mkdir()
    ignores_case = (tmp_path / "probe").exists()
    upper = own_folder(tmp_path, "Foo")
    if ignores_case:
        with pytest.raises(NasError, match="cannot share it"):
            own_folder(tmp_path, "foo")
    else:
        assert not upper.samefile(own_folder(tmp_path, "foo"))
    assert own_folder(tmp_path, "Foo") == upper  # the same name again is the same folder


def test_one_folder_under_two_names_is_refused(tmp_path: Path) -> None:
    """What a case-insensitive filesystem does to `Foo` and `foo`, made here with a link."""
    own_folder(tmp_path, "Foo")
    (tmp_path / "foo").symlink_to(tmp_path / "Foo")
    with pytest.raises(NasError, match="'foo' and 'Foo' cannot share it"):
        own_folder(tmp_path, "foo")


def _store(tmp_path: Path, root: Path) -> WeightStore:
    url = resolve_storage_url(f"sqlite:///{tmp_path / 'nas.db'}")
    return WeightStore(open_storage(url).engine, root)


def _model(tmp_path: Path) -> Path:
    source = tmp_path / "model.keras"
    source.write_bytes(b"weights")
    return source


def test_the_store_saves_inside_a_linked_root(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "artifacts").symlink_to(real)
    stored = _store(tmp_path, tmp_path / "artifacts").save("exp", 3, _model(tmp_path))
    assert stored.path == tmp_path / "artifacts" / "exp" / "trial-3.keras"
    assert (real / "exp" / "trial-3.keras").read_bytes() == b"weights"


@pytest.mark.parametrize(("study", "trial"), [("..", 0), ("../evil", 0), ("/tmp/evil", 0), ("exp", -1)])
def test_the_store_refuses_unsafe_names_before_writing(tmp_path: Path, study: str, trial: int) -> None:
    root = tmp_path / "work" / "artifacts"
    store, source = _store(tmp_path, root), _model(tmp_path)
    before = _files(tmp_path)
    with pytest.raises(NasError):
        store.save(study, trial, source)
    assert _files(tmp_path) == before
    assert store.all(study) == []


def test_the_store_refuses_a_study_folder_linked_out(tmp_path: Path) -> None:
    root, outside = tmp_path / "artifacts", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "exp").symlink_to(outside)
    with pytest.raises(NasError, match="not inside"):
        _store(tmp_path, root).save("exp", 0, _model(tmp_path))
    assert list(outside.iterdir()) == []


def test_retention_deletes_only_the_store_s_own_files(tmp_path: Path) -> None:
    """A row of a shared database may name any path on this host; retention deletes only
    root/study/trial-N.keras and leaves such a row listed."""
    root = tmp_path / "artifacts"
    store = _store(tmp_path, root)
    kept = store.save("exp", 0, _model(tmp_path))
    dropped = store.save("exp", 1, _model(tmp_path))
    precious = tmp_path / "thesis.tex"
    precious.write_text("years of work")
    with Session(store.engine) as session, session.begin():
        session.add(
            Weights(study="exp", trial=2, host=socket.gethostname(), path=str(precious), bytes=1, sha256="0" * 64)
        )
    assert store.retain("exp", {0}) == [1]
    assert precious.read_text() == "years of work"
    assert kept.path.is_file() and not dropped.path.exists()
    rows = {w.trial: w for w in store.all("exp")}
    assert rows[1].deleted is not None and rows[2].deleted is None


def test_retention_refuses_an_unsafe_study(tmp_path: Path) -> None:
    with pytest.raises(NasError):
        _store(tmp_path, tmp_path / "artifacts").retain("../evil", set())


def test_search_options_refuse_an_unsafe_study_name() -> None:
    from nas.search.engine import SearchOptions

    url = resolve_storage_url("sqlite:///unused.db")
    with pytest.raises(NasError, match=re.escape("study '../evil' cannot be a file name")):
        SearchOptions(storage=url, study_name="../evil", trials=1, sampler="tpe", seed=0)


def test_a_refused_name_adds_no_row(tmp_path: Path) -> None:
    """Nothing is written to the database either: the row is checked before the session."""
    store = _store(tmp_path, tmp_path / "artifacts")
    with pytest.raises(NasError):
        store.save("../evil", 0, _model(tmp_path))
    with Session(store.engine) as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Weights)) == 0


@pytest.mark.parametrize("visible", ["0", "GPU-8d2c6a1e-0c4b", "MIG-GPU-8d2c6a1e/1/0", "../../x"])
def test_a_device_lock_is_one_file_name(monkeypatch: pytest.MonkeyPatch, visible: str) -> None:
    """The lock file is named after CUDA_VISIBLE_DEVICES, which holds slashes for a MIG device."""
    from nas.search.hardware import lock_name

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert safe_name(lock_name({"kind": "gpu"}), "lock") == lock_name({"kind": "gpu"})

"""Data paths that travel with a study. A space file's data paths are made absolute when it is
read (space/loading.py), so the study's stored space names the first machine's folders. Those
inside the space file's folder are also stored relative to the artifacts folder
(StudyAttr.DATA_PATHS): a study copied to another folder or machine with its data and artifacts
in the same places beside each other finds its data from the artifacts folder it is given.

`nas train`, `nas export` and `nas worker` read the data from there where a stored path is
missing here; a resumed `nas search` (and its supernet) takes the space file's new absolute
paths for the stored ones when they lie where the study's relative paths say (`matches_moved`).
The stored fingerprint keeps the paths it was made with."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import optuna

from nas.search.records import StudyAttr
from nas.search.space import SearchSpace, space_from_dict

KEYS = ("path", "validation_path", "test_path")  # dataset's paths (space/loading.py makes them absolute)


def travelling_paths(space: SearchSpace, root: Path) -> dict[str, str]:
    """The dataset's paths inside the space file's folder, relative to the artifacts folder
    `root`; none for a preset or a mapping (no file to be beside)."""
    source = Path(space.source)
    if not source.is_file():
        return {}
    base = source.resolve().parent
    found = {}
    for key in KEYS:
        value = getattr(space.spec.dataset, key)
        if value and Path(value).is_absolute() and Path(value).resolve().is_relative_to(base):
            found[key] = Path(os.path.relpath(Path(value).resolve(), root.resolve())).as_posix()
    return found


def store_travelling_paths(study: optuna.Study, space: SearchSpace, root: Path) -> None:
    """Keep them on the study (emptied when the space now has none: Optuna deletes no attribute)."""
    paths = travelling_paths(space, root)
    if paths or StudyAttr.DATA_PATHS in study.user_attrs:
        study.set_user_attr(StudyAttr.DATA_PATHS, paths)


def located(space: SearchSpace, study: optuna.Study, root: Path) -> SearchSpace:
    """The study's space with each stored data path that is missing here replaced by the one
    found from the artifacts folder `root`, where there is one."""
    relative: dict[str, str] = study.user_attrs.get(StudyAttr.DATA_PATHS) or {}
    document = space.document
    if not relative or document is None:
        return space
    dataset = dict(document.get("dataset") or {})
    moved = {}
    for key, path in relative.items():
        stored = dataset.get(key)
        if isinstance(stored, str) and not Path(stored).exists():
            here = Path(os.path.normpath(root / path))
            if here.exists():
                moved[key] = str(here)
    if not moved:
        return space
    return space_from_dict({**document, "dataset": {**dataset, **moved}}, space.source)


def matches_moved(space: SearchSpace, stored: dict[str, Any], study: optuna.Study, root: Path | None) -> bool:
    """Whether the fingerprint `stored` is this space's, or was until the project (space file,
    data and artifacts folder, kept beside each other) moved: the space's data paths, relative
    to the artifacts folder `root`, are those the study keeps, and with its absolute ones in
    place of the stored ones the fingerprints match."""
    if space.matches(stored):
        return True
    relative: dict[str, str] = study.user_attrs.get(StudyAttr.DATA_PATHS) or {}
    if root is None or not relative or travelling_paths(space, root) != relative:
        return False
    here = json.loads(space.fingerprint()).get("dataset", {})
    dataset = dict(stored.get("dataset", {}))
    # Only the paths the fingerprint holds (test_path is not in it: it may change anyway).
    dataset.update({key: here.get(key) for key in relative if key in dataset})
    return space.matches({**stored, "dataset": dataset})

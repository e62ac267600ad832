"""Trained weights of finished trials, kept only while they may still be wanted.

Files live in an artifact folder (one sub-folder per study); the database holds a row per
file with its host, path, size and hash. Our own table rather than Optuna's artifact API:
Optuna records artifacts in trial attributes, which cannot change once a trial is finished,
so a deleted file would stay listed forever.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from nas.errors import NasError

from .critical import guarded
from .models import Weights
from .paths import contained, own_folder, safe_name, trial_number
from .urls import StorageURL

ENV_ARTIFACTS = "NAS_ARTIFACTS"


def default_artifact_root(url: StorageURL, override: str | None = None) -> Path:
    """--artifacts, else $NAS_ARTIFACTS, else `nas-artifacts` beside a SQLite file (or in the
    current folder for a server database)."""
    chosen = override or os.environ.get(ENV_ARTIFACTS)
    if chosen:
        return Path(chosen).expanduser().resolve()
    database = url.url.database if url.url.get_backend_name() == "sqlite" else None
    if database and database != ":memory:":
        return Path(database).expanduser().resolve().parent / "nas-artifacts"
    return Path.cwd() / "nas-artifacts"


def check_artifact_root(url: StorageURL, override: str | None = None) -> Path:
    """The artifact folder (`default_artifact_root`) if it is a folder nas may write in or can
    become one, NasError otherwise; creates nothing. A search calls it before it touches the
    database, so a folder it cannot use leaves no study behind."""
    root = default_artifact_root(url, override)
    existing = root
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent  # the nearest entry that exists: mkdir would make the rest
    try:
        is_dir, writable = existing.is_dir(), os.access(existing, os.W_OK | os.X_OK)
    except OSError as exc:
        raise NasError(f"artifact folder {root}: cannot use it ({exc.strerror or exc})") from None
    problem = None if is_dir else "is not a folder" if existing == root else f"{existing} is not a folder"
    if problem is None and existing != root and not writable:  # (an existing root's study folders may be)
        problem = f"cannot be created: no permission to write in {existing}"
    if problem is not None:
        raise NasError(f"artifact folder {root}: {problem} (choose another with {{artifacts}})")
    return root


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks (exported SavedModels can be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class StoredWeights:
    study: str
    trial: int
    host: str
    path: Path
    bytes: int
    sha256: str
    deleted: dt.datetime | None

    @property
    def available(self) -> bool:
        return self.deleted is None and self.path.is_file()


def _stored(row: Weights) -> StoredWeights:
    return StoredWeights(row.study, row.trial, row.host, Path(row.path), row.bytes, row.sha256, row.deleted)


class WeightStore:
    def __init__(self, engine: sa.Engine, root: Path) -> None:
        self.engine = engine
        self.root = root

    @guarded
    def save(self, study: str, trial: int, source: Path) -> StoredWeights:
        """Move a saved `.keras` file into the store (atomically) and record it."""
        name = f"trial-{trial_number(trial)}.keras"  # checked before the folder is made
        folder = self.folder(study)
        target = contained(folder, name)
        partial = contained(folder, target.with_suffix(".partial").name)
        shutil.copyfile(source, partial)
        os.replace(partial, target)
        stored = StoredWeights(
            study, trial, socket.gethostname(), target, target.stat().st_size, sha256_file(target), None
        )
        with Session(self.engine) as session, session.begin():
            # A re-run of the same trial number (a retried save) replaces the old row.
            session.execute(sa.delete(Weights).where(Weights.study == study, Weights.trial == trial))
            session.add(
                Weights(
                    study=study,
                    trial=trial,
                    host=stored.host,
                    path=str(target),
                    bytes=stored.bytes,
                    sha256=stored.sha256,
                )
            )
        return stored

    def save_model(self, study: str, trial: int, model: Any) -> StoredWeights:
        """Save a Keras model as `.keras` and move it into the store (`save`)."""
        with TemporaryDirectory(prefix="nas-weights-") as tmp:
            path = Path(tmp) / "model.keras"
            model.save(path)
            return self.save(study, trial, path)

    def folder(self, study: str) -> Path:
        """The study's folder, created; a search calls it before its first trial, so a name
        that cannot be a folder (a study made by plain Optuna) stops it before any training."""
        return own_folder(self.root, safe_name(study, "study"))

    @guarded
    def get(self, study: str, trial: int) -> StoredWeights | None:
        with Session(self.engine) as session:
            row = session.scalar(sa.select(Weights).where(Weights.study == study, Weights.trial == trial))
            return _stored(row) if row else None

    @guarded
    def all(self, study: str) -> list[StoredWeights]:
        with Session(self.engine) as session:
            rows = session.scalars(sa.select(Weights).where(Weights.study == study).order_by(Weights.trial))
            return [_stored(r) for r in rows]

    @guarded
    def retain(self, study: str, keep: set[int]) -> list[int]:
        """Delete the files of every trial of `study` not in `keep`; returns their numbers.

        Only files on this host are deleted (another machine's are its own to delete), and only
        this study's files in this store: a row of a shared database may name any path. Safe
        to run from several workers at once."""
        host = socket.gethostname()
        folder = self.folder(study).resolve()
        with Session(self.engine) as session, session.begin():
            rows = session.scalars(
                sa.select(Weights).where(
                    Weights.study == study, Weights.deleted.is_(None), Weights.trial.not_in(keep), Weights.host == host
                )
            ).all()
            deleted = []
            for row in rows:
                path = Path(row.path)
                if path.resolve() != folder / f"trial-{row.trial}.keras":
                    continue  # left alone and listed, not ours to delete (or kept under another root)
                path.unlink(missing_ok=True)
                row.deleted = dt.datetime.now(dt.UTC).replace(tzinfo=None)
                deleted.append(row.trial)
            return deleted

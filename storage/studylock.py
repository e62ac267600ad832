"""A lock held by one worker of a study at a time, on whatever database the study lives in.

Workers take it around "count finished and running trials, then ask for a new one", so that
two workers can never both start the last trial of the budget (Optuna's MaxTrialsCallback
overshoots by up to one trial per worker). Each database already has the primitive:
PostgreSQL advisory locks and MySQL/MariaDB GET_LOCK belong to a connection and vanish with
it; for SQLite, which only works on one machine, an flock on a file beside the database is
released by the kernel when its process dies. A killed worker therefore never leaves it held.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator

import sqlalchemy
from sqlalchemy import text

from nas.errors import NasError

from .urls import StorageURL

# How long a worker waits for the lock before giving up with an error; the lock is held
# for one ask() (milliseconds to a second), so this only trips when something is wrong.
LOCK_TIMEOUT_S = 120

_local = threading.Lock()  # in-memory SQLite: one process only


def _key(study_name: str) -> bytes:
    return hashlib.sha256(f"nas-study:{study_name}".encode()).digest()


@contextlib.contextmanager
def _file_lock(path: str) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the flock


@contextlib.contextmanager
def _postgres_lock(engine: sqlalchemy.Engine, key: int) -> Iterator[None]:
    with engine.connect() as con:
        con.execute(text(f"SET lock_timeout = '{LOCK_TIMEOUT_S}s'"))
        con.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
        con.commit()
        try:
            yield
        finally:
            con.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            con.commit()


@contextlib.contextmanager
def _mysql_lock(engine: sqlalchemy.Engine, name: str) -> Iterator[None]:
    with engine.connect() as con:
        got = con.execute(text("SELECT GET_LOCK(:n, :t)"), {"n": name, "t": LOCK_TIMEOUT_S}).scalar()
        if got != 1:
            raise NasError(f"could not take the study lock '{name}' within {LOCK_TIMEOUT_S} s")
        try:
            yield
        finally:
            con.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": name})


@contextlib.contextmanager
def study_lock(url: StorageURL, engine: sqlalchemy.Engine, study_name: str) -> Iterator[None]:
    """Hold the study's lock for the duration of the block (across processes and machines)."""
    key = _key(study_name)
    backend = url.url.get_backend_name()
    if backend == "postgresql":
        with _postgres_lock(engine, int.from_bytes(key[:8], "big", signed=True)):
            yield
    elif backend == "mysql":
        with _mysql_lock(engine, "nas:" + key.hex()[:40]):  # names are limited to 64 characters
            yield
    elif url.sqlite_path is not None:
        with _file_lock(f"{url.sqlite_path}.{key.hex()[:12]}.lock"):
            yield
    else:
        with _local:
            yield

"""The device profile: the device-wide figures (the reference baseline, the matmul peak) in a
SQLite file of their own, named by NAS_DEVICE_PROFILE, so a new database starts from them
instead of measuring them again. The file holds the measurement cache's table alone; its rows
are keyed by the device fingerprint like the cache's, so it serves devices of the same kind
and software stack (on a shared home folder, every such machine)."""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
import sqlalchemy.exc

from nas.errors import NasError

from .cache import MeasurementCache
from .engine import SQLITE_BUSY_TIMEOUT_S, begin_immediate
from .models import Base, Measurement

ENV_VAR = "NAS_DEVICE_PROFILE"
PROFILE_VERSION = 1  # SQLite's user_version of the file


def open_device_profile() -> MeasurementCache | None:
    """The profile that $NAS_DEVICE_PROFILE names (created on first use), or None when unset.
    Opening it writes to it, so a file this process cannot write is told here, not mid-trial."""
    value = os.environ.get(ENV_VAR, "").strip()
    if not value:
        return None

    def refuse(reason: str) -> NasError:
        return NasError(f"{ENV_VAR}={value}: cannot use it as the device profile ({reason})")

    try:
        path = Path(value).expanduser()
        if path.parent.exists() and not path.parent.is_dir():
            raise refuse(f"{path.parent} is not a folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        url = sa.engine.URL.create("sqlite", database=str(path))  # a '?' in the path is no query
        engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        begin_immediate(engine)
        with engine.begin() as connection:  # BEGIN IMMEDIATE: one process creates the table
            Base.metadata.tables[Measurement.__tablename__].create(connection, checkfirst=True)
            connection.exec_driver_sql(f"PRAGMA user_version = {PROFILE_VERSION}")
    except (OSError, RuntimeError, sqlalchemy.exc.SQLAlchemyError) as exc:  # RuntimeError: ~nosuchuser
        reason = getattr(exc, "strerror", None) or str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise refuse(reason) from None
    return MeasurementCache(engine)

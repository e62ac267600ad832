"""The device profile: this machine's device-wide figures (the reference baseline, the matmul
peak) in a SQLite file of their own, named by NAS_DEVICE_PROFILE, so a new database starts
from them instead of measuring them again. The file holds the measurement cache's table
alone; its rows are keyed by device like the cache's, so a profile copied to another machine
just misses."""

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


def open_device_profile() -> MeasurementCache | None:
    """The profile that $NAS_DEVICE_PROFILE names (created on first use), or None when unset."""
    value = os.environ.get(ENV_VAR, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        begin_immediate(engine)
        with engine.begin() as connection:  # BEGIN IMMEDIATE: one process creates the table
            Base.metadata.tables[Measurement.__tablename__].create(connection, checkfirst=True)
    except (OSError, sqlalchemy.exc.SQLAlchemyError) as exc:
        reason = getattr(exc, "strerror", None) or str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise NasError(f"{ENV_VAR}={value}: cannot use it as the device profile ({reason})") from None
    return MeasurementCache(engine)

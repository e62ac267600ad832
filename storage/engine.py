"""Open the Optuna RDB storage with engine settings that survive concurrent workers."""

from __future__ import annotations

import sqlite3
from typing import Any

import optuna
import sqlalchemy
import sqlalchemy.exc
from sqlalchemy import event

from nas.errors import NasError

from .critical import guard_methods
from .models import Base
from .urls import StorageURL

# A worker records a heartbeat for its running trial this often (seconds); a RUNNING trial
# whose heartbeat is older than the grace period belongs to a dead worker.
HEARTBEAT_INTERVAL_S = 10
GRACE_PERIOD_S = 60
# SQLite busy timeout: writers wait for each other instead of failing "database is locked".
SQLITE_BUSY_TIMEOUT_S = 60


class GuardedRDBStorage(optuna.storages.RDBStorage):
    """Optuna's RDB storage whose calls a stop-now (second Ctrl-C, SIGTERM) waits for: cut
    inside SQLAlchemy, a write can leave a transaction holding SQLite's lock (critical.py)."""


guard_methods(GuardedRDBStorage)


def _engine_kwargs(url: StorageURL) -> dict[str, Any]:
    if url.is_sqlite:
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    # Servers drop idle connections (and restart); check each one before use and recycle
    # them well before typical idle timeouts.
    return {"pool_pre_ping": True, "pool_recycle": 300}


def _prepare_sqlite(url: StorageURL, create: bool) -> None:
    path = url.sqlite_path
    if path is None:
        return
    try:
        exists, folder_exists = path.exists(), path.parent.exists()
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise NasError(f"storage '{url}': cannot use {path} as a database file ({reason})") from None
    if not exists:
        if not create:
            raise NasError(f"no database at {path} (run `nas search` first, or pass {{storage}} / set NAS_STORAGE)")
        if not folder_exists:
            raise NasError(f"storage '{url}': folder {path.parent} does not exist")
    try:
        with sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_S) as con:
            # WAL lets readers (nas status, dashboards) run beside a writing search; the
            # setting is stored in the file, so setting it once here covers every process.
            con.execute("PRAGMA journal_mode=WAL")
    except sqlite3.DatabaseError as exc:
        raise NasError(f"storage '{url}': cannot open {path} as a SQLite database ({exc})") from None


def begin_immediate(engine: sqlalchemy.Engine) -> None:
    """Start every SQLite transaction with BEGIN IMMEDIATE (SQLAlchemy's documented recipe).

    A default (deferred) transaction that reads and then writes must upgrade its lock; when
    another process wrote meanwhile, SQLite fails it at once with "database is locked" and
    the busy timeout does not help. Taking the write lock at BEGIN makes writers queue
    through the busy timeout instead, which is what several workers on one file need.
    """

    @event.listens_for(engine, "connect")
    def _no_implicit_begin(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.isolation_level = None  # let the "begin" hook below emit BEGIN

    @event.listens_for(engine, "begin")
    def _immediate(connection: sqlalchemy.Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    engine.dispose()  # connections opened before the hooks existed must not be reused


def widen_weight_sizes(engine: sqlalchemy.Engine) -> None:
    """Databases made before weight sizes were 64-bit hold them in a 32-bit INTEGER on
    PostgreSQL and MySQL (a 2 GiB model would not fit); widen the column once. SQLite's
    INTEGER is already 64-bit."""
    if engine.dialect.name not in ("postgresql", "mysql", "mariadb"):
        return
    columns = {c["name"]: c["type"] for c in sqlalchemy.inspect(engine).get_columns("nas_weights")}
    if isinstance(columns.get("bytes"), sqlalchemy.BigInteger):
        return
    statement = (
        "ALTER TABLE nas_weights ALTER COLUMN bytes TYPE BIGINT"
        if engine.dialect.name == "postgresql"
        else "ALTER TABLE nas_weights MODIFY bytes BIGINT NOT NULL"
    )
    with engine.begin() as connection:
        connection.exec_driver_sql(statement)


def open_storage(
    url: StorageURL,
    *,
    create: bool = True,
    heartbeat_interval: int | None = HEARTBEAT_INTERVAL_S,
    grace_period: int = GRACE_PERIOD_S,
) -> optuna.storages.RDBStorage:
    """Open (and with `create`, initialise) the storage; user-facing failures raise NasError.

    Creating the schema here, once, before any worker starts avoids the race seen when
    several processes open a new SQLite file at the same time.
    """
    if url.is_sqlite:
        _prepare_sqlite(url, create)
    try:
        storage = GuardedRDBStorage(
            url.raw,
            engine_kwargs=_engine_kwargs(url),
            heartbeat_interval=heartbeat_interval,
            grace_period=grace_period,
            skip_table_creation=not create,
        )
        if url.is_sqlite:
            begin_immediate(storage.engine)
        if create:
            Base.metadata.create_all(storage.engine)  # our tables, in the same first step
            widen_weight_sizes(storage.engine)
        return storage
    except (sqlalchemy.exc.SQLAlchemyError, RuntimeError, optuna.exceptions.StorageInternalError) as exc:
        # Optuna wraps SQLAlchemy's error (the connection's reason is in its cause).
        cause = exc.__cause__ if isinstance(exc, optuna.exceptions.StorageInternalError) and exc.__cause__ else exc
        reason = str(getattr(cause, "orig", None) or cause).strip().splitlines()[0]
        if url.url.password:
            reason = reason.replace(url.url.password, "***")
        raise NasError(f"cannot open storage '{url}': {reason}") from None

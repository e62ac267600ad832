"""Storage URLs: where the default comes from, what is accepted, how passwords are hidden."""

from __future__ import annotations

import importlib.util
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy.exc
from sqlalchemy.engine import URL, make_url

from nas.errors import NasError
from nas.extras import install_hint

ENV_VAR = "NAS_STORAGE"
DEFAULT_URL = "sqlite:///nas.db"

# Backend -> the module its default or named driver needs, so a missing driver is reported as
# an install hint instead of SQLAlchemy's NoSuchModuleError traceback.
_DRIVERS: dict[str, dict[str | None, tuple[str, str]]] = {
    "sqlite": {None: ("sqlite3", "the Python build's sqlite3"), "pysqlite": ("sqlite3", "sqlite3")},
    "postgresql": {
        None: ("psycopg2", "pip install psycopg2-binary, or use postgresql+psycopg://"),
        "psycopg": ("psycopg", install_hint("postgres")),
        "psycopg2": ("psycopg2", "pip install psycopg2-binary"),
    },
    "mysql": {
        None: ("MySQLdb", "pip install mysqlclient, or use mysql+pymysql://"),
        "pymysql": ("pymysql", install_hint("mysql")),
        "mysqldb": ("MySQLdb", "pip install mysqlclient"),
    },
}


@dataclass(frozen=True)
class StorageURL:
    """A validated storage URL; `masked` is the only form that may be printed or logged."""

    url: URL

    @property
    def raw(self) -> str:
        return self.url.render_as_string(hide_password=False)

    @property
    def masked(self) -> str:
        return self.url.render_as_string(hide_password=True)

    @property
    def is_sqlite(self) -> bool:
        return self.url.get_backend_name() == "sqlite"

    @property
    def sqlite_path(self) -> Path | None:
        """The database file of a SQLite URL; None for in-memory or other backends."""
        if not self.is_sqlite or not self.url.database or self.url.database == ":memory:":
            return None
        return Path(self.url.database)

    def __str__(self) -> str:
        return self.masked


def default_storage_url() -> str:
    return os.environ.get(ENV_VAR) or DEFAULT_URL


def resolve_storage_url(value: str | None) -> StorageURL:
    """Parse and check `value` (or the default); raise NasError with a one-line reason."""
    text = value if value else default_storage_url()
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes of another encoding in argv: SQLAlchemy 2.1 fails quoting them
        raise NasError("storage URL: it holds bytes that are not UTF-8 text") from None
    try:
        url = make_url(text)
    except (sqlalchemy.exc.ArgumentError, ValueError):
        # make_url's message repeats the URL, password included; say it in our own words.
        shown = text.split("@")[-1] if "@" in text else text
        raise NasError(
            f"storage URL '...{shown}' is not a database URL "
            "(expected e.g. sqlite:///nas.db or postgresql+psycopg://user@host/db)"
        ) from None
    backend = url.get_backend_name()
    masked = url.render_as_string(hide_password=True)
    if "\0" in (url.database or ""):  # `%00` too: every file and socket call would raise ValueError
        raise NasError(f"storage URL '{masked}': the database name holds a NUL character")
    if backend not in _DRIVERS:
        raise NasError(f"storage URL '{masked}': unsupported database '{backend}' (use sqlite, postgresql or mysql)")
    drivers = _DRIVERS[backend]
    driver = url.drivername.partition("+")[2] or None
    _check_dialect(url, masked)
    module, hint = drivers.get(driver, (str(driver), f"install the '{driver}' driver"))
    if importlib.util.find_spec(module) is None:
        raise NasError(f"storage URL '{masked}': driver '{module}' is not installed ({hint})")
    return StorageURL(url)


def _check_dialect(url: URL, masked: str) -> None:
    """What SQLAlchemy would reject only when the database is opened (after a worker imported
    TensorFlow, or a SQLite file was created): an unknown driver, a query argument of the
    wrong type (`?timeout=abc`). No module of the driver is imported and nothing connects."""
    driver = url.drivername.partition("+")[2]
    try:
        dialect = url.get_dialect()
    except (sqlalchemy.exc.NoSuchModuleError, ImportError, AttributeError):  # sqlite+json: a module, no dialect
        raise NasError(f"storage URL '{masked}': unknown driver '{driver}' for {url.get_backend_name()}") from None
    if dialect.is_async:
        raise NasError(f"storage URL '{masked}': '{driver}' is an asyncio driver; nas needs a synchronous one")
    try:
        with warnings.catch_warnings():  # of ignored query arguments: SQLAlchemy says it again on connecting
            warnings.simplefilter("ignore")
            dialect().create_connect_args(url)
    except (ValueError, TypeError, sqlalchemy.exc.ArgumentError) as exc:  # ArgumentError: sqlite://host
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        reason = reason.replace(url.password, "***") if url.password else reason
        raise NasError(f"storage URL '{masked}': {reason}") from None

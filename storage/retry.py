"""Retrying the writes that must not be lost when SQLite reports "database is locked".

The busy timeout makes a writer wait for another, and every SQLite transaction starts
IMMEDIATE (engine.py), so this should not happen; but a finished trial's result is too
expensive to lose to a lock that outlived the timeout, so its tell() is tried again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import optuna
import sqlalchemy.exc

log = logging.getLogger("nas")

P = ParamSpec("P")
T = TypeVar("T")

ATTEMPTS = 5


def _is_lock_error(exc: BaseException) -> bool:
    # Optuna wraps SQLAlchemy's error in StorageInternalError; the reason is in the cause.
    for error in (exc, exc.__cause__):
        text = str(error).lower()
        if "database is locked" in text or "database table is locked" in text:
            return True
    return False


def with_lock_retries(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    for attempt in range(ATTEMPTS):
        try:
            return fn(*args, **kwargs)
        except (sqlalchemy.exc.OperationalError, optuna.exceptions.StorageInternalError) as exc:
            if not _is_lock_error(exc) or attempt == ATTEMPTS - 1:
                raise
            log.warning("database locked (attempt %d of %d); retrying", attempt + 1, ATTEMPTS)
            time.sleep(0.5 * 2**attempt)
    raise AssertionError("unreachable")

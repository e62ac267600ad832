"""Storage calls (and training steps) that a stop-now (a second Ctrl-C, SIGTERM) must not cut
in the middle of.

A KeyboardInterrupt raised inside SQLAlchemy can leave a transaction open on a connection
that never goes back to the pool. On SQLite that transaction keeps the write lock, so the
stopped trial's own bookkeeping (failing it, queueing it again) then waits out the busy
timeout and fails: seen as a search that took minutes to stop after a second Ctrl-C.
The signal handler asks `active()` and, inside a section, `hold`s its stop; the outermost
section raises it on the way out, once the storage call has finished.

Python runs signal handlers in the main thread only, so only its sections count: a storage
call from another thread (the heartbeat) is never interrupted and needs no section.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_depth = 0
_held: Callable[[], None] | None = None
# A stop-now that was raised but not yet handled. Python swallows an exception raised in a
# finalizer ("Exception ignored in ... __del__"): a signal handled while TensorFlow's garbage
# collection ran lost its stop, and the search went on to its end (seen in CI). `checkpoint`
# raises it again at the next safe point until the loop has handled it.
_pending = False


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def active() -> bool:
    """True while the main thread is inside a section (the signal handler runs there)."""
    return _depth > 0


def holding() -> bool:
    """True while a stop waits for the outermost section to end."""
    return _held is not None


def hold(stop: Callable[[], None]) -> None:
    """Run `stop` (which raises) when the outermost section ends instead of now."""
    global _held
    _held = stop


def demand_stop() -> None:
    """A stop-now was raised: `checkpoint` raises it again until `stop_handled`."""
    global _pending
    _pending = True


def stop_handled() -> None:
    global _pending
    _pending = False


def checkpoint() -> None:
    """Raise a stop-now that was raised before and swallowed; a safe point of the main thread
    (a trial's phase, a training batch) calls it."""
    if _pending and _on_main_thread() and not _depth:
        raise KeyboardInterrupt


@contextlib.contextmanager
def section() -> Iterator[None]:
    global _depth, _held
    if not _on_main_thread():
        yield
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth and _held is not None:
            stop, _held = _held, None
            stop()


def guarded(function: F) -> F:
    """`function` run inside a section."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        with section():
            return function(*args, **kwargs)

    return run  # type: ignore[return-value]


def guard_methods(cls: type) -> None:
    """Run every public method `cls` has (an Optuna storage's, inherited) inside a section.

    Meant for a subclass made for it: Optuna's caching wrapper and isinstance checks see the
    storage they expect, and it pickles by name as its base does."""
    for name, member in inspect.getmembers(cls, inspect.isfunction):
        if not name.startswith("_"):
            setattr(cls, name, guarded(member))

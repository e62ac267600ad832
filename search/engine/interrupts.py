"""Ctrl-C and SIGTERM during a search: when they stop it, and what may not be cut short."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from nas.search.engine.events import SearchEvents
from nas.storage import critical


class Interrupts:
    """Ctrl-C twice over: the first lets the running trial finish and starts no new one, the
    second stops now. SIGTERM stops now. While `deferred`, stopping waits for the block's end,
    so a trial is never left between ask() and the point where an interrupt is handled."""

    def __init__(self, events: SearchEvents) -> None:
        self.events = events
        self.draining = False
        # Set once a stop-now has been raised: an error a trial ends with after that is the
        # stop on its way out (a finally block or TensorFlow turned the KeyboardInterrupt
        # into another exception), not the trial's own failure.
        self.stopped_now = False
        self._previous: list[Any] = []

    def _stop_now(self) -> None:
        # Inside a section (a storage call, a training batch) the stop waits for its end; a
        # second stop while it waits does not (a database that stopped answering must not make the search unstoppable).
        if critical.active() and not critical.holding():
            critical.hold(self._raise_stop)
            self.events.message(
                "Stopping now: waiting for the database call or training batch under way (Ctrl-C again: stop at once)."
            )
        else:
            self._raise_stop()

    def _raise_stop(self) -> None:
        self.stopped_now = True
        critical.demand_stop()
        raise KeyboardInterrupt

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.draining:
            self._stop_now()
            return
        self.draining = True
        self.events.message("Stopping: the running trial will finish, no new one starts (Ctrl-C again: stop now).")

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self._stop_now()

    def deferred(self) -> contextlib.AbstractContextManager[None]:
        """A block a stop-now waits for, as it waits for every storage call."""
        return critical.section()

    def __enter__(self) -> Interrupts:
        # Python delivers signals to the main thread only: a loop in another thread (the
        # tabulated benchmark's simulated workers) takes none, and its process stops it.
        if threading.current_thread() is threading.main_thread():
            self._previous = [
                signal.signal(signal.SIGINT, self._on_sigint),
                signal.signal(signal.SIGTERM, self._on_sigterm),
            ]
        return self

    def __exit__(self, *exc: object) -> None:
        critical.stop_handled()
        if self._previous:
            signal.signal(signal.SIGINT, self._previous[0])
            signal.signal(signal.SIGTERM, self._previous[1])


@contextlib.contextmanager
def no_interrupts() -> Iterator[None]:
    """Let the bookkeeping after an interrupt finish even if Ctrl-C is pressed again."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN), signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])

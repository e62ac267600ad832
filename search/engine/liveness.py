"""Who runs a trial (host, pid, process start) and whether that process still lives.

A trial left RUNNING by a killed process must be recognised at the next start. On the same
host, a dead pid (or a pid reused by another process, told apart by its start time) is
proof at once; trials from other hosts are judged by their heartbeat instead.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import asdict, dataclass
from typing import Any

import optuna

log = logging.getLogger("nas")


def _process_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (clock ticks since boot), None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            # Field 22; the command name (field 2) may hold spaces, so split after its ')'.
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@dataclass(frozen=True)
class WorkerIdentity:
    host: str
    pid: int
    start: str | None

    @classmethod
    def current(cls) -> WorkerIdentity:
        return cls(socket.gethostname(), os.getpid(), _process_start(os.getpid()))

    @classmethod
    def from_attr(cls, value: Any) -> WorkerIdentity | None:
        try:
            return cls(str(value["host"]), int(value["pid"]), value.get("start"))
        except (TypeError, KeyError, ValueError):
            return None

    def to_attr(self) -> dict[str, Any]:
        return asdict(self)

    def is_gone(self) -> bool:
        """True only when certain: same host and the process no longer exists."""
        if self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return self.start is not None and _process_start(self.pid) != self.start


class Heartbeat:
    """Record the running trial's heartbeat in Optuna's RDB table from a background thread.

    Optuna only does this inside study.optimize(); we drive trials with ask/tell, so we keep
    the same table up to date ourselves and stale-trial detection works for every worker.
    """

    def __init__(self, storage: optuna.storages.RDBStorage, trial_id: int, interval: float) -> None:
        self._storage = storage
        self._trial_id = trial_id
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-{trial_id}", daemon=True)
        self.failures = 0

    def _beat(self) -> None:
        failing = False
        while True:
            try:
                self._storage.record_heartbeat(self._trial_id)
                if failing:
                    log.warning("Heartbeat of trial id %s recorded again", self._trial_id)
                failing = False
            except Exception as exc:  # a lost connection must not kill the trial; retry next beat
                self.failures += 1
                if not failing:  # once per outage: the trial goes on, but others may soon call it lost
                    log.warning(
                        "Warning: heartbeat of trial id %s not recorded (%s); if this lasts, other workers "
                        "will take the trial for lost and run it again",
                        self._trial_id,
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    )
                failing = True
            if self._stop.wait(self._interval):
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

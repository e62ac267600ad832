"""A cross-process reader/writer lock per device, so two trials never time each other.

Training takes the lock shared (many trainers may share a GPU); measuring takes it
exclusive, so no trial of this machine trains on the device while another one times it.
A second "turnstile" lock gives a waiting measurement priority over new trainers, which
would otherwise keep the shared lock held forever. fcntl.flock is released by the kernel
when a process dies, so a killed worker cannot leave the device locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

ENV_VAR = "NAS_LOCK_DIR"


def lock_dir() -> Path:
    folder = Path(os.environ.get(ENV_VAR) or Path(tempfile.gettempdir()) / f"nas-locks-{os.getuid()}")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class DeviceLock:
    def __init__(self, name: str, folder: Path | None = None) -> None:
        folder = folder or lock_dir()
        self.main = folder / f"{name}.lock"
        self.turnstile = folder / f"{name}.turnstile"

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Held while measuring: waits for running trainers, keeps new ones out."""
        with _flock(self.turnstile, fcntl.LOCK_EX), _flock(self.main, fcntl.LOCK_EX):
            yield

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        """Held while training: passes the turnstile, so it waits behind a queued measurement."""
        with _flock(self.turnstile, fcntl.LOCK_EX):
            pass
        with _flock(self.main, fcntl.LOCK_SH):
            yield

"""Simulated time for a replay (benchmarks/replay.py): asynchronous workers are threads under
one clock, and only the worker whose clock is earliest runs, so a trial asked while others run
sees them RUNNING, a rung reads only what was there at its moment, and a seed replays exactly."""

from __future__ import annotations

import threading
from collections.abc import Callable

from benchmarks import table as tables
from nas.search.space import SearchSpace


class SimClock:
    """Simulated time for workers that are threads: a worker that spends time waits until no
    other worker is earlier, so exactly one runs at a time, always the earliest (ties go to
    the lower index), and a replay is deterministic."""

    def __init__(self, workers: int) -> None:
        self.cond = threading.Condition()
        self.times = {w: 0.0 for w in range(workers)}
        self.local = threading.local()

    @property
    def worker(self) -> int:
        return int(self.local.worker)

    def now(self) -> float:
        return self.times[self.worker]

    def _turn(self) -> int:
        return min(self.times, key=lambda w: (self.times[w], w))

    def enter(self, worker: int) -> None:
        self.local.worker = worker
        with self.cond:
            self.cond.wait_for(lambda: self._turn() == worker)

    def advance(self, seconds: float) -> None:
        me = self.worker
        with self.cond:
            self.times[me] += seconds
            self.cond.notify_all()
            self.cond.wait_for(lambda: self._turn() == me)

    def leave(self) -> None:
        with self.cond:
            del self.times[self.worker]
            self.cond.notify_all()


class ClockedEvaluation(tables.TableEvaluation):
    """The table's evaluation charging each worker's own simulated clock."""

    def __init__(self, table: tables.Table, space: SearchSpace, clock: SimClock) -> None:
        super().__init__(table, space)
        self.sim = clock

    def charge(self, seconds: float) -> None:
        super().charge(seconds)
        self.sim.advance(seconds)


def run_workers(workers: int, body: Callable[[int], None]) -> None:
    """Run `body(index)` in one thread per worker; the first error is raised here."""
    errors: list[BaseException] = []

    def guarded(index: int) -> None:
        try:
            body(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(w,), daemon=True) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]

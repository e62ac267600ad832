"""The pool parent's own decisions, with real processes: Ctrl-C goes to the workers first as
SIGINT (let the running trial finish), the second time as its own signal, SIGTERM (stop now),
since two SIGINTs could reach a worker busy inside one long TensorFlow call together and
Python would see one; a recycled worker is replaced only while budget is left."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nas.search.engine import SearchOptions
from nas.search.workers import PoolView, WorkerPool, plan_workers
from nas.storage import resolve_storage_url

# A stand-in worker: it says which signals reach it, in order, and ends on the stop-now one.
_WORKER = """
import signal, sys, time
def seen(signum, frame):
    print(signal.Signals(signum).name, flush=True)
    if signum == signal.SIGTERM:
        sys.exit(0)
signal.signal(signal.SIGINT, seen)
signal.signal(signal.SIGTERM, seen)
print("ready", flush=True)
time.sleep(120)
"""


class _Quiet(PoolView):
    def __init__(self) -> None:
        self.messages: list[str] = []

    def message(self, text: str) -> None:
        self.messages.append(text)


def test_the_second_ctrl_c_reaches_workers_as_sigterm(tmp_path: Path) -> None:
    options = SearchOptions(resolve_storage_url(f"sqlite:///{tmp_path / 'x.db'}"), "s", 1, "random", 0)
    view = _Quiet()
    pool = WorkerPool(options, plan_workers(2, None, None, cpus=[0, 1]), view, recycle_after=None)
    workers = [subprocess.Popen([sys.executable, "-c", _WORKER], stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for slot, process in zip(pool.slots, workers, strict=True):
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
            slot.process = process  # type: ignore[assignment]
        pool._on_sigint(signal.SIGINT, None)
        for process in workers:  # the first is handled before the second is sent
            assert process.stdout is not None and process.stdout.readline().strip() == "SIGINT"
        pool._on_sigint(signal.SIGINT, None)
        for process in workers:
            assert process.stdout is not None and process.stdout.readline().strip() == "SIGTERM"
            assert process.wait(timeout=30) == 0
    finally:
        for process in workers:
            process.kill()
            process.wait()
    assert pool.stopping and view.messages[0].startswith("Stopping: running trials will finish")
    assert view.messages[1].startswith("Stopping now")


def test_a_recycled_worker_is_replaced_only_while_budget_is_left(tmp_path: Path) -> None:
    """A worker that exits to free its memory is replaced only when finished and running
    trials fall short of the budget: otherwise the fresh process would load TensorFlow only
    to find nothing to do."""
    import optuna

    url = f"sqlite:///{tmp_path / 'x.db'}"
    study = optuna.create_study(study_name="s", storage=url, directions=["maximize"])
    options = SearchOptions(resolve_storage_url(url), "s", 3, "random", 0)
    pool = WorkerPool(options, plan_workers(1, None, None, cpus=[0]), _Quiet(), recycle_after=1)
    pool.study = study
    started: list[int] = []
    pool._start = lambda slot: started.append(slot.placement.index)  # type: ignore[method-assign]
    (slot,) = pool.slots

    def recycle() -> None:
        slot.process = subprocess.Popen([sys.executable, "-c", "pass"])  # type: ignore[assignment]
        slot.process.wait()
        slot.outcome = {"stopped_by": "recycle"}
        pool._finished_process(slot)

    study.add_trial(optuna.trial.create_trial(value=1.0))
    recycle()  # 1 finished of 3: a fresh worker takes over
    assert started == [0]
    study.add_trial(optuna.trial.create_trial(value=1.0))
    study.ask()  # 2 finished and 1 running: the budget is taken
    recycle()
    assert started == [0] and slot.process is None


def test_without_the_cache_workers_get_no_device_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAS_DEVICE_PROFILE", str(tmp_path / "device.db"))
    url = resolve_storage_url(f"sqlite:///{tmp_path / 'x.db'}")
    for cache in (True, False):
        options = SearchOptions(url, "s", 3, "random", 0, cache=cache)
        (slot,) = (
            pool := WorkerPool(options, plan_workers(1, None, None, cpus=[0]), _Quiet(), recycle_after=None)
        ).slots
        env = pool.worker_env(slot)
        assert env["NAS_STORAGE"] == url.raw
        assert ("NAS_DEVICE_PROFILE" in env) is cache, cache

"""Failures that used to pass unnoticed now say so: a heartbeat that cannot be recorded, other
hosts' trials that cannot be checked, a warm-up that never settles, and --recycle-after
where it cannot apply."""

from __future__ import annotations

import itertools
import logging
import socket
import threading
from pathlib import Path

import optuna
import pytest

from nas.search.engine import recovery
from nas.search.engine.liveness import Heartbeat
from nas.search.hardware import timing

from ..helpers import run_cli


class _FlakyStorage:
    """record_heartbeat fails `failures` times, then works."""

    def __init__(self, failures: int) -> None:
        self.failures, self.calls, self.recorded = failures, 0, threading.Event()

    def record_heartbeat(self, trial_id: int) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("server closed the connection")
        self.recorded.set()


def test_a_heartbeat_that_cannot_be_recorded_warns_once_per_outage(caplog: pytest.LogCaptureFixture) -> None:
    storage = _FlakyStorage(failures=3)
    with caplog.at_level(logging.WARNING, logger="nas"):
        beat = Heartbeat(storage, 7, interval=0.01)  # type: ignore[arg-type]
        with beat:
            assert storage.recorded.wait(10)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert beat.failures == 3
    assert warnings[0].startswith("Warning: heartbeat of trial id 7 not recorded (server closed the connection)")
    assert warnings[1:] == ["Heartbeat of trial id 7 recorded again"]


def _running_trial(study: optuna.Study, host: str) -> None:
    trial = study.ask()
    trial.set_user_attr("worker", {"host": host, "pid": 1, "start": None})


def test_trials_of_other_hosts_that_cannot_be_checked_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    study = optuna.create_study(storage="sqlite:///:memory:")
    monkeypatch.setattr(recovery, "stale_trial_ids", lambda _: None)  # the storage cannot tell
    _running_trial(study, socket.gethostname())  # pid 1 lives: judged here without a heartbeat
    assert recovery.recover_orphans(study, 60.0) == []
    _running_trial(study, "another-host")
    (line,) = recovery.recover_orphans(study, 60.0)
    assert line.startswith("Warning: cannot read trial heartbeats") and "(1)" in line
    monkeypatch.setattr(recovery, "stale_trial_ids", lambda _: set())  # the storage can tell: nothing to say
    assert recovery.recover_orphans(study, 60.0) == []


def test_a_warm_up_that_never_settles_is_recorded_and_untrustworthy(monkeypatch: pytest.MonkeyPatch) -> None:
    seconds = itertools.cycle([0.001, 0.002])  # every call twice or half the last: never within 10%
    times, settled = timing.warm_up(lambda calls: next(seconds) * calls, 0.05)  # measure.warmup_seconds
    assert settled is False and 0.05 <= sum(times) < 0.06
    monkeypatch.setattr(timing, "WARMUP_MAX_SECONDS", 0.03)  # the default limit, when none is given
    times, settled = timing.warm_up(lambda calls: next(seconds) * calls)
    assert settled is False and 0.03 <= sum(times) < 0.04
    times, settled = timing.warm_up(lambda calls: 0.001 * calls)
    assert settled is True and len(times) == timing.WARMUP_MIN_CALLS

    # Steady rounds after an unsettled warm-up: only the warm-up makes the figure untrustworthy.
    monkeypatch.setattr(timing, "timed_forward", lambda m, b, j: lambda calls: 0.001 * calls)
    monkeypatch.setattr(timing, "warm_up", lambda run, limit=None: ([0.001, 0.002, 0.001], False))
    figure = timing.measure_throughput(None, 8, rounds=3, round_seconds=0.001)  # type: ignore[arg-type]
    assert figure.spread == 0 and figure.warmup_settled is False and figure.trustworthy is False
    assert figure.to_dict()["warmup_settled"] is False
    latency = timing.measure_latency(None, seconds=0.001)  # type: ignore[arg-type]
    assert latency.spread == 0 and latency.warmup_settled is False and latency.trustworthy is False


def test_recycle_after_without_pool_workers_is_an_error(workdir: Path) -> None:
    result = run_cli("search", "tiny", "--recycle-after", "5", cwd=workdir)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "Error: --recycle-after applies to pool workers: add --workers N (or --gpus)"
    assert not (workdir / "nas.db").exists()


def test_worker_seeds_stay_in_numpys_range() -> None:
    """A standalone `nas worker` seeds with its pid as index: large pids used to overflow."""
    from nas.search.engine.samplers import worker_sampler

    for name in ("tpe", "random", "nsga2"):
        sampler = worker_sampler(name, 2**32 - 1, 4_194_304, 10_000)
        study = optuna.create_study(sampler=sampler)
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)

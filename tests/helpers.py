"""Helpers every test module shares: the real `nas` CLI in a subprocess or in this process,
and the local database servers."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from optuna.study import StudyDirection
    from optuna.trial import FrozenTrial

REPO = Path(__file__).resolve().parents[1]
# search/hardware/lock.py's folder of device locks; conftest gives each test its own.
LOCK_DIR_ENV = "NAS_LOCK_DIR"


# A test space's measuring, as cheap as the protocol allows (the tiny preset's settings):
# the defaults (20 s warm-up cap, 15 baseline rounds, 1 s each of latency and matmul peak)
# are for figures worth keeping.
QUICK_MEASURE = {
    "batch_sizes": [32],
    "rounds": 3,
    "round_seconds": 0.05,
    "warmup_seconds": 2.0,
    "latency_seconds": 0.2,
    "baseline_rounds": 5,
    "peak_seconds": 0.2,
}


def nas_env(**extra: str) -> dict[str, str]:
    """This process's environment for a `nas` subprocess, with the test's own lock folder: a
    shared one would make its timings wait on, and delay, every other `nas` on the machine."""
    env = {k: v for k, v in os.environ.items() if k != "NAS_STORAGE"}
    env.update(extra)
    assert env.get(LOCK_DIR_ENV), f"{LOCK_DIR_ENV} is unset: tests/conftest.py sets it for every test"
    return env


def usable_cpus(count: int) -> list[int]:
    """The first `count` cores this test may run on (its affinity: a cpuset or taskset may
    allow fewer than the machine has, and numbers them as it likes); skips with fewer."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < count:
        pytest.skip(f"needs {count} cores, this process may use {len(cores)} ({cores})")
    return cores[:count]


def _pinned(cpus: Collection[int] | None) -> Callable[[], None] | None:
    """A Popen preexec_fn that starts the child on exactly these cores (None: as this one)."""
    return None if cpus is None else lambda: os.sched_setaffinity(0, cpus)


def run_nas(
    *args: str,
    cwd: Path,
    timeout: float = 600,
    env: dict[str, str] | None = None,
    cpus: Collection[int] | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nas", *args],
        cwd=cwd,
        env=env or nas_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_pinned(cpus),
    )


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The `nas` command in this process: for error paths, which need no fresh process and
    would otherwise pay for a Python and TensorFlow start each. Same result as run_nas."""
    from nas.search.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_cwd, saved_storage = sys.argv, os.getcwd(), os.environ.pop("NAS_STORAGE", None)
    saved_sigint = signal.getsignal(signal.SIGINT)  # main() leaves one for the interpreter's exit
    sys.argv = ["nas", *args]
    code = 0
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved_argv
        signal.signal(signal.SIGINT, saved_sigint)
        os.chdir(saved_cwd)
        if saved_storage is not None:
            os.environ["NAS_STORAGE"] = saved_storage
    return subprocess.CompletedProcess(["nas", *args], code, out.getvalue(), err.getvalue())


def start_nas(*args: str, cwd: Path, cpus: Collection[int] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nas", *args],
        cwd=cwd,
        env=nas_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_pinned(cpus),
    )


class StderrLines:
    """A running process's stderr, collected as it comes, so a test can wait for a line (a
    state it can observe) instead of sleeping."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert process.stderr is not None
        self._thread = threading.Thread(target=self._read, args=(process.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.append(line)

    def wait_for(self, text: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            if not self._thread.is_alive() and not any(text in line for line in self.lines):
                raise AssertionError(f"the process ended before '{text}' appeared in:\n{''.join(self.lines)}")
            time.sleep(0.1)
        raise AssertionError(f"'{text}' never appeared in:\n{''.join(self.lines)}")

    def text(self) -> str:
        self._thread.join(timeout=30)
        return "".join(self.lines)


def kill_nas_at(text: str, *args: str, cwd: Path) -> str:
    """Start `nas ARGS`, `kill -9` it once `text` appears on its stderr (a state it has
    reached, not a time), and return what it printed."""
    process = start_nas(*args, cwd=cwd)
    lines = StderrLines(process)
    try:
        lines.wait_for(text)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    return lines.text()


# The servers the `server` tests use, as docs/development.md and .ci/run state: PostgreSQL and MariaDB
# (the mysql backend), each with a database `test` its user may create tables in.
SERVERS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/test?connect_timeout=3",
    "mysql": "mysql+pymysql://root@127.0.0.1:3306/test?connect_timeout=3",
}


def server_url(kind: str) -> str:
    """The local database server's URL; outside CI a missing server skips (saying why), in CI
    (CI=true) it fails, because these tests must run there."""
    import sqlalchemy

    url = SERVERS[kind]
    try:
        sqlalchemy.create_engine(url).connect().close()
    except sqlalchemy.exc.OperationalError as exc:
        reason = f"no {kind} server answers at {url.split('@')[1]}: {str(exc).splitlines()[0]}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: the CI machine must run it, see .ci/run)", pytrace=False)
        pytest.skip(reason)
    return url


def brute_force_front(trials: Sequence[FrozenTrial], directions: Sequence[StudyDirection]) -> set[int]:
    """Numbers of the finished trials that no other finished trial dominates, by comparing
    every pair: a check on fronts that owes nothing to Optuna's or nas' own code."""
    signs = [1.0 if d.name == "MAXIMIZE" else -1.0 for d in directions]
    done = [t for t in trials if t.state.name == "COMPLETE"]
    points = {t.number: [s * v for s, v in zip(signs, t.values, strict=True)] for t in done}

    def dominates(a: list[float], b: list[float]) -> bool:
        return all(x >= y for x, y in zip(a, b, strict=True)) and a != b

    return {n for n, p in points.items() if not any(dominates(q, p) for q in points.values())}


def brute_force_noise_front(
    trials: Sequence[FrozenTrial], directions: Sequence[StudyDirection], names: Sequence[str]
) -> set[int]:
    """The noise-aware front by its definition, pair by pair: a trial is dropped only when
    another is at least as good in every objective in the worst case for it (throughput: the
    other's interval low end against this one's high end; one shared measurement counts as
    exact) and better in one."""

    def interval(t: FrozenTrial) -> tuple[float, float] | None:
        first = next(iter(t.user_attrs.get("hardware", {}).get("throughput", {}).values()), {})
        return (first["low"], first["high"]) if first.get("low") is not None else None

    def dominates(a: FrozenTrial, b: FrozenTrial) -> bool:
        at_least, better = True, False
        for name, direction, x, y in zip(names, directions, a.values, b.values, strict=True):
            lo_hi_a, lo_hi_b = interval(a), interval(b)
            shared = lo_hi_a == lo_hi_b and x == y
            if name == "throughput" and lo_hi_a and lo_hi_b and not shared:
                x, y = lo_hi_a[0], lo_hi_b[1]  # worst case for a, best case for b (maximised)
            if direction.name == "MINIMIZE":
                x, y = -x, -y
            at_least &= x >= y
            better |= x > y
        return at_least and better

    done = [t for t in trials if t.state.name == "COMPLETE"]
    return {b.number for b in done if not any(dominates(a, b) for a in done)}


def finished_trial(accuracy: float, throughput: float, **user_attrs: Any) -> FrozenTrial:
    """A COMPLETE trial of an (accuracy, throughput) study, made by hand, to add to a study."""
    from optuna.distributions import FloatDistribution
    from optuna.trial import TrialState, create_trial

    return create_trial(
        state=TrialState.COMPLETE,
        values=[accuracy, throughput],
        params={"x": accuracy},
        distributions={"x": FloatDistribution(0, 1)},
        user_attrs=user_attrs,
    )


def drop_study(url: str, name: str) -> None:
    import optuna

    with contextlib.suppress(KeyError):
        optuna.delete_study(study_name=name, storage=url)


def benchmark_module(name: str) -> ModuleType:
    """benchmarks/NAME.py loaded as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while a class is made
    spec.loader.exec_module(module)
    return module

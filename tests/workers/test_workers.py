"""Worker pools through the real CLI: real processes, real SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from ..helpers import REPO, StderrLines, drop_study, run_cli, run_nas, server_url, start_nas, usable_cpus


def _study(storage: str, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=storage)


def _states(study: optuna.Study) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        out[t.state.name] = out.get(t.state.name, 0) + 1
    return out


def _cheap_space(folder: Path) -> Path:
    """The tiny preset with a parameter limit no candidate meets: every trial is screened
    right after building its network (well under a second), so hundreds of real trials
    exercise the storage, the budget and the workers rather than the CPU."""
    space = yaml.safe_load((REPO / "spaces" / "tiny.yaml").read_text())
    space["name"] = "cheap"
    space["constraints"] = {"max_params": 100}
    path = folder / "cheap.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


def _wait_for_running(storage: str, name: str, phase: str, timeout: float = 300) -> optuna.trial.FrozenTrial:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for t in _study(storage, name).get_trials(states=(TrialState.RUNNING,)):
                if phase in t.user_attrs.get("durations", {}) and "worker" in t.user_attrs:
                    return t
        except (KeyError, optuna.exceptions.StorageInternalError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"no trial of {name} reached {phase}")


@pytest.mark.slow
def test_two_workers_finish_exactly_the_budget(workdir: Path) -> None:
    a, b = usable_cpus(2)  # the search runs on two known cores, whatever this machine has
    result = run_nas("search", "tiny", "--workers", "2", "--trials", "6", cwd=workdir, cpus=(a, b))
    assert result.returncode == 0, result.stderr
    assert f"Starting 2 workers: CPU, cpu {a}, 1 threads; CPU, cpu {b}, 1 threads" in result.stderr
    study = _study("sqlite:///nas.db", "tiny")
    assert _states(study) == {"COMPLETE": 6}
    workers = [t.user_attrs["worker"] for t in study.trials]
    assert {w["index"] for w in workers} == {0, 1}
    # Disjoint cores, and TensorFlow's pools sized to them.
    assert {w["index"]: tuple(w["cpus"]) for w in workers} == {0: (a,), 1: (b,)}
    assert all(w["intra_op_threads"] == 1 for w in workers)
    # Each worker seeds its own sampler: two workers never start from the same proposal.
    first = {w["index"]: t.params for w, t in reversed(list(zip(workers, study.trials, strict=True)))}
    assert first[0] != first[1]
    # The Pareto front is printed once, by the parent.
    assert result.stdout.count("Pareto front of 'tiny'") == 1
    # The parent (no TensorFlow) had a child confirm the front: every member has a figure.
    assert "Confirming the throughput of" in result.stderr
    confirmed = study.user_attrs["confirmed"]["trials"]
    assert {t.number for t in study.best_trials} <= {int(n) for n in confirmed}


@pytest.mark.slow
def test_a_pool_on_gpus_tensorflow_cannot_see_stops_before_any_trial(workdir: Path) -> None:
    """--gpus on a machine (or a TensorFlow build) without those GPUs: exit 2 with the likely
    cause and the install hint, before the study gets a trial, never a search on the CPU."""
    from nas.search import runtime

    if runtime.import_tensorflow().config.list_physical_devices("GPU"):
        pytest.skip("TensorFlow sees a GPU here: the refusal needs a machine where it sees none")
    args = ["--gpus", "0,1", "--workers", "4", "--workers-per-gpu", "2", "--trials", "8"]
    result = run_nas("search", "tiny", *args, cwd=workdir, cpus=usable_cpus(2))
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert lines[-1].startswith("Error: --gpus 0,1: TensorFlow sees 0 of 2 GPU(s) ("), result.stderr
    assert lines[-1].endswith("pip install -e '.[gpu]' installs TensorFlow's CUDA libraries"), result.stderr
    assert not (workdir / "nas.db").exists() or not _study("sqlite:///nas.db", "tiny").trials


@pytest.mark.slow
def test_kill_9_of_one_worker_mid_trial(workdir: Path) -> None:
    storage = "sqlite:///nas.db"
    parent = start_nas("search", "tiny", "--workers", "2", "--trials", "4", cwd=workdir)
    lines = StderrLines(parent)
    victim = _wait_for_running(storage, "tiny", "measure")
    pid = victim.user_attrs["worker"]["pid"]
    os.kill(pid, signal.SIGKILL)
    parent.wait(timeout=600)
    stderr = lines.text()
    assert parent.returncode == 0, stderr
    assert f"(pid {pid}) ended with signal 9" in stderr
    study = _study(storage, "tiny")
    killed = study.trials[victim.number]
    assert killed.state == TrialState.FAIL
    assert f"worker process {pid}" in killed.user_attrs["fail_reason"]
    retried = [t for t in study.trials if t.user_attrs.get("retry_of") == victim.number]
    assert len(retried) == 1 and retried[0].state == TrialState.COMPLETE
    assert retried[0].params == victim.params
    assert _states(study) == {"COMPLETE": 4, "FAIL": 1}


@pytest.mark.slow
def test_four_workers_recycle_on_one_new_sqlite_file(workdir: Path) -> None:
    """Four workers start at once on a SQLite file none of them created (the schema race) and
    each process is replaced after 3 trials: 14 trials need at least 5 processes, and the
    budget is still met exactly."""
    storage, name = "sqlite:///fresh.db", "cheap"
    space = _cheap_space(workdir)
    result = run_nas(
        "search", str(space), "--study", name, "--storage", storage, "--workers", "4", "--trials", "14",
        "--recycle-after", "3", cwd=workdir,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "locked" not in result.stderr and "Traceback" not in result.stderr
    study = _study(storage, name)
    assert _states(study) == {"PRUNED": 14}  # screened: finished without objectives
    per_worker: dict[int, int] = {}
    per_process: dict[int, int] = {}
    for t in study.trials:
        worker = t.user_attrs["worker"]
        per_worker[worker["index"]] = per_worker.get(worker["index"], 0) + 1
        per_process[worker["pid"]] = per_process.get(worker["pid"], 0) + 1
        assert t.user_attrs["screened"] == "static"
    assert sorted(per_worker) == [0, 1, 2, 3], per_worker
    # Recycled: no process ran more than 3 trials, so more processes than workers ran.
    assert max(per_process.values()) <= 3 and len(per_process) >= 5, per_process


# Many workers on PostgreSQL: tests/workers/test_load.py (8 workers, workers killed throughout).


@pytest.mark.slow
@pytest.mark.server
def test_workers_on_mariadb(workdir: Path) -> None:
    url = server_url("mysql")
    name = f"nas-test-{uuid.uuid4().hex[:8]}"
    space = _cheap_space(workdir)
    try:
        result = run_nas(
            "search", str(space), "--study", name, "--storage", url, "--workers", "2", "--trials", "20", cwd=workdir
        )
        assert result.returncode == 0, result.stderr[-3000:]
        assert _states(_study(url, name)) == {"PRUNED": 20}
    finally:
        drop_study(url, name)


@pytest.mark.slow
def test_sigint_to_the_parent_lets_running_trials_finish(workdir: Path) -> None:
    storage = "sqlite:///nas.db"
    parent = start_nas("search", "tiny", "--workers", "2", "--trials", "30", cwd=workdir)
    lines = StderrLines(parent)
    running = _wait_for_running(storage, "tiny", "build")
    parent.send_signal(signal.SIGINT)
    parent.wait(timeout=300)
    stderr = lines.text()
    assert parent.returncode == 130, stderr
    assert "Stopping: running trials will finish" in stderr
    assert "none left running" in stderr
    study = _study(storage, "tiny")
    states = _states(study)
    assert "RUNNING" not in states and "WAITING" not in states and "FAIL" not in states, states
    assert study.trials[running.number].state == TrialState.COMPLETE  # it was allowed to finish
    assert states["COMPLETE"] < 30


@pytest.mark.slow
def test_second_sigint_stops_now_and_requeues(workdir: Path) -> None:
    storage = "sqlite:///nas.db"
    parent = start_nas("search", "tiny", "--workers", "2", "--trials", "30", cwd=workdir)
    lines = StderrLines(parent)
    _wait_for_running(storage, "tiny", "build")
    parent.send_signal(signal.SIGINT)
    lines.wait_for("Stopping: running trials will finish")
    parent.send_signal(signal.SIGINT)  # forwarded as stop-now (SIGTERM): it cannot merge with the first
    parent.wait(timeout=300)
    stderr = lines.text()
    assert parent.returncode == 130, stderr
    assert "Run the same command again to resume" in stderr
    study = _study(storage, "tiny")
    assert not study.get_trials(states=(TrialState.RUNNING,))
    stopped = study.get_trials(states=(TrialState.FAIL,))
    reasons = {t.number: t.user_attrs.get("fail_reason") for t in stopped}
    assert reasons and all(str(r).startswith("interrupted") for r in reasons.values()), (reasons, stderr)
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert sorted(t.user_attrs["retry_of"] for t in queued) == sorted(t.number for t in stopped)


@pytest.mark.slow
def test_nas_worker_joins_a_study_and_finishes_its_budget(workdir: Path) -> None:
    # --timeout 0 prepares the study (budget 2) and starts nothing; a worker then runs it.
    prepared = run_cli("search", "tiny", "--trials", "2", "--timeout", "0", cwd=workdir)
    assert prepared.returncode == 0, prepared.stderr
    assert _states(_study("sqlite:///nas.db", "tiny")) == {}
    joined = run_cli("worker", "--study", "tiny", cwd=workdir)
    assert joined.returncode == 0, joined.stderr
    assert _states(_study("sqlite:///nas.db", "tiny")) == {"COMPLETE": 2}
    again = run_cli("worker", "--study", "tiny", cwd=workdir)
    assert again.returncode == 0 and "Budget complete: 2 of 2" in again.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["worker", "--study", "nope"], "study 'nope' not found"),
        (["search", "tiny", "--gpus", "0,x"], "--gpus '0,x': expected GPU indices"),
        (["search", "tiny", "--gpus", "0,0"], "a GPU is listed twice"),
        (["search", "tiny", "--workers-per-gpu", "2"], "--workers-per-gpu needs --gpus"),
        (["search", "tiny", "--gpus", "0", "--workers", "3"], "--workers 3 is more than 1 GPU(s)"),
    ],
)
def test_bad_worker_options(workdir: Path, args: list[str], message: str) -> None:
    if args[0] == "worker":
        assert run_cli("search", "tiny", "--timeout", "0", cwd=workdir).returncode == 0
    result = run_cli(*args, cwd=workdir)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.stderr


def test_worker_masks_the_password_of_its_storage(workdir: Path) -> None:
    result = run_cli(
        "worker", "--study", "x", "--storage", "postgresql+psycopg://u:hunter2@127.0.0.1:1/db", cwd=workdir
    )
    assert result.returncode == 2
    assert "hunter2" not in result.stderr + result.stdout and "***" in result.stderr

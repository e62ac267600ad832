"""Multi-objective ASHA: rungs, the ranking, the decision, and whole searches that stop
trials early (their stored decisions recomputed from the rungs the database holds)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import time
import uuid
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from nas.search.engine.early_stopping import decide, rank, rung_epochs
from nas.search.space import EarlyStoppingSpec

from ..helpers import REPO, StderrLines, drop_study, run_cli, run_nas, server_url, start_nas


def test_rungs_sit_at_min_epochs_times_powers_of_eta_below_the_last_epoch() -> None:
    asha = EarlyStoppingSpec(method="asha", min_epochs=1, eta=3)
    assert rung_epochs(asha, 10) == [1, 3, 9]
    assert rung_epochs(asha, 9) == [1, 3]
    assert rung_epochs(asha, 1) == []
    assert rung_epochs(EarlyStoppingSpec(method="asha", min_epochs=2, eta=2), 20) == [2, 4, 8, 16]
    assert rung_epochs(EarlyStoppingSpec(method="none"), 10) == []


def test_rank_puts_fronts_first_and_spread_out_points_before_crowded_ones() -> None:
    points = [
        [0.9, 100.0],  # 0: front, an end
        [0.5, 500.0],  # 1: front, an end
        [0.7, 300.0],  # 2: front, middle, far from its neighbours
        [0.71, 290.0],  # 3: front, middle, next to 2
        [0.6, 200.0],  # 4: dominated by 2 and 3
        [0.1, 50.0],  # 5: dominated by everyone
    ]
    order = rank(points)
    assert set(order[:4]) == {0, 1, 2, 3} and order[4:] == [4, 5]
    assert set(order[:2]) == {0, 1}  # ends first: infinite crowding distance


def test_rank_never_puts_a_dominated_point_before_its_dominator() -> None:
    rng = random.Random(7)
    for _ in range(50):
        points = [[rng.choice([0.1, 0.2, 0.3, rng.random()]), rng.random()] for _ in range(rng.randint(1, 25))]
        order = rank(points)
        assert sorted(order) == list(range(len(points)))
        where = {i: k for k, i in enumerate(order)}
        for a, pa in enumerate(points):
            for b, pb in enumerate(points):
                if all(x >= y for x, y in zip(pa, pb, strict=True)) and pa != pb:
                    assert where[a] < where[b], (points, a, b)


def test_the_first_trials_at_a_rung_continue_then_only_the_best_third() -> None:
    others = {0: [0.9, 900.0], 1: [0.8, 800.0]}
    worst = [0.1, 100.0]
    assert decide(3, 2, worst, others, rung=0, epoch=1).keep is False  # 3 points: 1 continues
    assert decide(3, 1, worst, {0: [0.9, 900.0]}, rung=0, epoch=1).keep is True  # 2 < eta: continues
    crowd = {n: [0.5 + n / 100, 500.0 - n] for n in range(5)}  # 5 others, all on one front
    best = decide(3, 9, [0.99, 999.0], crowd, rung=1, epoch=3)
    assert best.keep and best.position == 0 and best.competitors == 6 and best.kept == 2
    assert not decide(3, 9, [0.1, 10.0], crowd, rung=1, epoch=3).keep


def test_ties_go_to_the_earlier_trial_with_eta_2_and_3() -> None:
    same = [0.5, 500.0]
    # Three identical points: eta 3 keeps one, the earliest; the later trials stop.
    assert decide(3, 0, same, {1: same, 2: same}, rung=0, epoch=1).keep
    assert not decide(3, 2, same, {0: same, 1: same}, rung=0, epoch=1).keep
    # eta 2 keeps two of four identical points: trials 0 and 1.
    assert [decide(2, n, same, {m: same for m in range(4) if m != n}, rung=0, epoch=1).keep for n in range(4)] == [
        True,
        True,
        False,
        False,
    ]
    # A dominated trial stops, a front trial goes on, whatever their numbers.
    front = {0: [0.9, 100.0], 1: [0.5, 900.0], 2: [0.7, 500.0]}
    assert not decide(2, 3, [0.4, 90.0], front, rung=0, epoch=1).keep
    assert decide(2, 3, [0.95, 950.0], front, rung=0, epoch=1).keep


def _space(folder: Path, *, epochs: int, trials: int) -> Path:
    space = yaml.safe_load((REPO / "spaces" / "tiny.yaml").read_text())
    space["name"] = "asha"
    space["training"]["epochs"] = epochs
    space["search"] = {"sampler": "random", "trials": trials, "seed": 3,
                       "early_stopping": {"method": "asha", "min_epochs": 1, "eta": 2}}  # fmt: skip
    space["measure"] = {**space.get("measure", {}), "confirm": False}
    path = folder / "asha.yaml"
    path.write_text(yaml.safe_dump(space))
    return path


@pytest.fixture(scope="module")
def _asha_study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One search that stops trials early, run once for the module: 6 trials of 3 epochs."""
    folder = tmp_path_factory.mktemp("asha-study")
    result = run_cli("search", str(_space(folder, epochs=3, trials=6)), cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder, result.stderr


@pytest.fixture
def asha_study(_asha_study: tuple[Path, str], tmp_path: Path) -> Path:
    """A private copy of the module's early-stopping study (nas.db and its space file)."""
    for path in _asha_study[0].glob("*"):
        if path.is_file():
            shutil.copy2(path, tmp_path / path.name)
    return tmp_path


@pytest.mark.slow
def test_a_search_stops_trials_at_rungs_as_the_rungs_in_the_database_say(
    _asha_study: tuple[Path, str], asha_study: Path
) -> None:
    tmp_path, stderr = asha_study, _asha_study[1]
    study = optuna.load_study(study_name="asha", storage=f"sqlite:///{tmp_path / 'nas.db'}")
    trials = study.get_trials()
    stopped = [t for t in trials if t.user_attrs.get("early_stopped")]
    assert stopped, "no trial stopped early"  # with eta 2, the second trial at rung 0 is ranked
    assert {t.state.name for t in stopped} == {"PRUNED"} and all(t.values is None for t in stopped)
    assert len([t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]) == 6  # stopped ones count
    directions = {"accuracy": "maximize", "throughput": "maximize"}
    for t in trials:  # one worker: a trial's competitors at a rung are the earlier trials that reached it
        for rung, entry in (t.user_attrs.get("rungs") or {}).items():
            earlier = {
                o.number: [o.user_attrs["rungs"][rung][k] for k in directions]
                for o in trials
                if o.number < t.number and rung in (o.user_attrs.get("rungs") or {})
            }
            again = decide(2, t.number, [entry[k] for k in directions], earlier, int(rung), entry["epoch"])
            assert (again.keep, again.position, again.competitors) == (
                entry["keep"],
                entry["position"],
                entry["competitors"],
            )
            assert entry["epoch"] == [1, 2][int(rung)]
            assert entry["accuracy"] == t.user_attrs["history"]["val_accuracy"][entry["epoch"] - 1]
    for t in stopped:
        info = t.user_attrs["early_stopped"]
        assert t.user_attrs["rungs"][str(info["rung"])]["keep"] is False
        assert len(t.user_attrs["history"]["val_accuracy"]) == info["epoch"]  # trained no further
        assert "throughput" in t.user_attrs["known_objectives"]
    assert "stopped early at rung" in stderr

    status = run_cli("status", "--format", "json", cwd=tmp_path)
    (row,) = [r for r in json.loads(status.stdout)["studies"] if r["study"] == "asha"]
    assert row["stopped_early"] == len(stopped)


def _shared_rungs(folder: Path, storage: str, study: str) -> None:
    """Two pool workers on one database: a trial's competitors at a rung include trials the
    other worker ran, and every stored decision matches the rung's points that were there."""
    space = _space(folder, epochs=2, trials=8)  # one rung, shared by both workers
    result = run_nas("search", str(space), "--study", study, "--storage", storage, "--workers", "2", cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    trials = optuna.load_study(study_name=study, storage=storage).get_trials()
    assert len([t for t in trials if t.state.name in ("COMPLETE", "PRUNED")]) == 8
    worker = {t.number: t.user_attrs["worker"]["index"] for t in trials}
    assert set(worker.values()) == {0, 1}
    at_rung0 = {t.number for t in trials if "0" in (t.user_attrs.get("rungs") or {})}
    crossed = 0
    for t in trials:
        entry = (t.user_attrs.get("rungs") or {}).get("0")
        if entry is None:
            continue
        # Ranked against at least every earlier trial at the rung (those were stored first),
        # at most every trial that ever got there.
        assert 1 <= entry["competitors"] <= len(at_rung0)
        others = {n for n in at_rung0 if n != t.number and worker[n] != worker[t.number]}
        crossed += entry["competitors"] > 1 and bool(others)
    assert crossed >= 1  # some ranking saw the other worker's trials
    assert any(t.user_attrs.get("early_stopped") for t in trials)


@pytest.mark.slow
def test_two_workers_share_rungs_on_one_sqlite_file(tmp_path: Path) -> None:
    _shared_rungs(tmp_path, f"sqlite:///{tmp_path / 'shared.db'}", "asha")


@pytest.mark.slow
@pytest.mark.server
def test_two_workers_share_rungs_on_postgresql(tmp_path: Path) -> None:
    url = server_url("postgresql")
    name = f"nas-test-{uuid.uuid4().hex[:8]}"
    try:
        _shared_rungs(tmp_path, url, name)
    finally:
        drop_study(url, name)


@pytest.mark.slow
def test_resuming_a_study_with_stopped_trials_keeps_them_and_finishes_the_budget(asha_study: Path) -> None:
    tmp_path, space = asha_study, asha_study / "asha.yaml"
    storage = f"sqlite:///{tmp_path / 'nas.db'}"
    before = {
        t.number: (t.state.name, t.user_attrs.get("early_stopped"))
        for t in optuna.load_study(study_name="asha", storage=storage).trials
    }
    again = run_cli("search", str(space), "--trials", "9", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    after = optuna.load_study(study_name="asha", storage=storage).trials
    assert {t.number: (t.state.name, t.user_attrs.get("early_stopped")) for t in after[: len(before)]} == before
    assert len([t for t in after if t.state.name in ("COMPLETE", "PRUNED")]) == 9
    assert not [t for t in after if t.state.name == "RUNNING"]


@pytest.mark.slow
def test_ctrl_c_while_a_trial_is_between_rungs_leaves_nothing_running(tmp_path: Path) -> None:
    space = _space(tmp_path, epochs=6, trials=20)
    storage = f"sqlite:///{tmp_path / 'nas.db'}"
    process = start_nas("search", str(space), cwd=tmp_path)
    lines = StderrLines(process)
    deadline, victim = time.monotonic() + 300, None
    while victim is None and time.monotonic() < deadline:
        assert process.poll() is None, lines.text()
        with contextlib.suppress(KeyError, optuna.exceptions.StorageInternalError):
            running = optuna.load_study(study_name="asha", storage=storage).get_trials(states=(TrialState.RUNNING,))
            victim = next((t for t in running if t.user_attrs.get("rungs")), None)
        time.sleep(0.2)
    assert victim is not None, "no trial reached a rung"
    os.kill(process.pid, signal.SIGINT)
    # Two presses at once reach Python as one signal: the second goes once the first is handled.
    lines.wait_for("Stopping: the running trial will finish")
    os.kill(process.pid, signal.SIGINT)
    process.wait(timeout=120)
    stderr = lines.text()
    assert process.returncode == 130, stderr
    trials = optuna.load_study(study_name="asha", storage=storage).get_trials()
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    stopped = trials[victim.number]
    # Stopped by the second Ctrl-C, or by a rung or its last epoch just before it: never left running.
    assert stopped.state in (TrialState.FAIL, TrialState.PRUNED, TrialState.COMPLETE), stopped.state
    if stopped.state == TrialState.FAIL:
        assert stopped.user_attrs["fail_reason"].startswith("interrupted")
        assert [t.user_attrs["retry_of"] for t in trials if t.state == TrialState.WAITING] == [victim.number]

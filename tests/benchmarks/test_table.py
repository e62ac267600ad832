"""benchmarks/table.py: the benchmark's space is finite and large enough; a table build killed
with SIGKILL resumes without losing or repeating a configuration; a replay through the
engine's real trial code (TrialRunner, early stopping's rungs) with the table's evaluation
gets back the table's figures and charges its simulated clock what the build spent."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import optuna
import pytest
import yaml

from nas.search.engine.trial import TrialRunner
from nas.search.records import TrialAttr
from nas.search.space import load_space, space_from_dict

from .package import benchmark, command, environment

# 2 widths x 2 kernels x 2 learning rates: 8 configurations, 4 networks, about a second each.
MINI = """
name: table-mini
dataset: {source: digits, image_size: 8, subset: 200, validation_fraction: 0.3, seed: 0}
model:
  family: mobilenet_v2
  width_multiplier: {choice: [0.5, 1.0]}
  stem_filters: 8
  stem_stride: 1
  head_filters: 16
  dropout: 0.0
  stages:
    - {filters: 8, stride: 1, depth: 1, kernel: {choice: [3, 5]}, expansion: 1}
    - {filters: 16, stride: 2, depth: 1, kernel: 3, expansion: 2}
training: {epochs: 2, batch_size: 32, learning_rate: {choice: [0.005, 0.02]}}
objectives: {accuracy: maximize, throughput: maximize}
measure: {batch_sizes: [32], rounds: 3, round_seconds: 0.05, warmup_seconds: 2, baseline_rounds: 5, peak_seconds: 0.2}
search: {sampler: random, seed: 0}
"""


def _table() -> ModuleType:
    return benchmark("table")


def test_the_benchmark_space_is_finite_and_holds_at_least_500_configurations() -> None:
    table = _table()
    configs = load_space(str(table.SPACE)).configurations()
    assert len(configs) == 768
    assert len({table.config_key(c) for c in configs}) == 768
    shards = [table.shard_configs(load_space(str(table.SPACE)), (i, 3)) for i in range(3)]
    assert sorted(table.config_key(c) for s in shards for c in s) == sorted(table.config_key(c) for c in configs)


def _complete(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM trials WHERE state = 'COMPLETE'").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is still being made
        return 0


@pytest.fixture(scope="module")
def mini_table(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The mini space's table, built by a process killed with SIGKILL after its second trial
    and resumed in this one; what had finished before the kill is kept for the checks."""
    table = _table()
    root = tmp_path_factory.mktemp("table")
    space_file, work = root / "mini.yaml", root / "work"
    space_file.write_text(MINI)
    db = table.shard_path(work, (0, 1))
    proc = subprocess.Popen(
        command("table", "build", "--space", str(space_file), "--work", str(work)),
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 180
    while _complete(db) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, f"the build ended before it could be killed:\n{proc.communicate()[0]}"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    storage = optuna.storages.RDBStorage(f"sqlite:///{db}")
    before = {
        t.number: (t.params, t.values, t.user_attrs[TrialAttr.HISTORY])
        for t in optuna.load_study(study_name=table.STUDY, storage=storage).get_trials(
            states=(optuna.trial.TrialState.COMPLETE,)
        )
    }
    storage.engine.dispose()
    assert len(before) >= 2
    table.build((0, 1), work, space_path=space_file, quiet=True)
    out = root / "mini.json.gz"
    header = table.export(work, out, space_path=space_file)
    return {"space": space_file, "work": work, "db": db, "before": before, "header": header, "out": out}


@pytest.mark.slow
def test_a_killed_build_resumes_without_losing_or_repeating_configurations(mini_table: dict[str, Any]) -> None:
    table = _table()
    header = mini_table["header"]
    assert (header["configurations"], header["rows"], header["missing"]) == (8, 8, [])
    study = optuna.load_study(study_name=table.STUDY, storage=f"sqlite:///{mini_table['db']}")
    complete = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    keys = [table.config_key(t.params) for t in complete]
    assert len(keys) == len(set(keys)) == 8  # every configuration once: none lost, none run twice
    for number, (params, values, history) in mini_table["before"].items():
        t = study.trials[number]  # finished before the kill: kept as it was, not run again
        assert (t.params, t.values, t.user_attrs[TrialAttr.HISTORY]) == (params, values, history)
    rows = table.Table.load(mini_table["out"]).rows
    assert [r["params"] for r in rows] == load_space(str(mini_table["space"])).configurations()
    for row in rows:
        assert len(row["val_accuracy"]) == len(row["epoch_seconds"]) == 2
        assert row["accuracy"] == row["val_accuracy"][-1]
        assert row["throughput"]["low"] <= row["throughput"]["images_per_s"] <= row["throughput"]["high"]
        assert row["network_measure_seconds"] > 0 and all(s > 0 for s in row["epoch_seconds"])
    assert len({r["signature"] for r in rows}) == 4  # the learning rate does not change the network


def _replay(table: ModuleType, tab: Any, seed: int) -> tuple[list[optuna.trial.FrozenTrial], float, Any]:
    document = yaml.safe_load(MINI)
    document["search"]["early_stopping"] = {"method": "asha", "min_epochs": 1, "eta": 2}
    space = space_from_dict(document)
    evaluation = table.TableEvaluation(tab, space)
    runner = TrialRunner(space, evaluation, on_phase=lambda _: None)
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.TPESampler(seed=seed))
    for _ in range(12):
        trial = study.ask()
        outcome = runner.run(trial)
        if outcome.values is None:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, outcome.values)
    return study.trials, evaluation.clock, evaluation


@pytest.mark.slow
def test_a_replay_runs_the_engines_trial_code_against_the_table(mini_table: dict[str, Any]) -> None:
    table = _table()
    tab = table.Table.load(mini_table["out"])
    rows = tab.by_key()
    trials, clock, _ = _replay(table, tab, seed=3)
    charged, seen, stopped = 0.0, set(), 0
    for t in trials:
        row = rows[table.config_key(t.params)]
        rung = t.user_attrs[TrialAttr.RUNGS]["0"]  # every trial reaches the rung at epoch 1
        assert rung["accuracy"] == row["val_accuracy"][0] and rung["epoch"] == 1
        charged += row["durations"]["plan"] + row["durations"]["build"]
        charged += 0.0 if row["signature"] in seen else row["network_measure_seconds"]
        seen.add(row["signature"])
        if rung["keep"]:
            assert t.state == optuna.trial.TrialState.COMPLETE
            assert t.values == [row["accuracy"], row["throughput"]["images_per_s"]]
            charged += sum(row["epoch_seconds"]) + row["durations"]["deploy"]
        else:  # early stopping ended it at the rung: PRUNED, one epoch charged
            stopped += 1
            assert t.state == optuna.trial.TrialState.PRUNED
            assert t.user_attrs[TrialAttr.EARLY_STOPPED]["accuracy"] == row["val_accuracy"][0]
            charged += row["epoch_seconds"][0]
    assert stopped > 0  # the rungs did stop trials: 12 trials over 8 configurations at eta 2
    assert clock == pytest.approx(charged)
    again, clock_again, _ = _replay(table, tab, seed=3)  # a seed replays exactly
    assert [t.params for t in again] == [t.params for t in trials] and clock_again == clock


def _replay_module() -> ModuleType:
    return benchmark("replay")


def test_the_simulated_clock_runs_the_earliest_worker_alone_and_replays_exactly() -> None:

    def run_once() -> list[tuple[int, float]]:
        clock, log = benchmark("simclock").SimClock(3), []
        steps = {0: [5.0, 1.0, 1.0], 1: [2.0, 2.0, 2.0], 2: [0.5, 9.0]}

        def body(worker: int) -> None:
            clock.enter(worker)
            try:
                for seconds in steps[worker]:
                    log.append((worker, clock.now()))  # only the earliest worker gets here
                    clock.advance(seconds)
            finally:
                clock.leave()

        benchmark("simclock").run_workers(3, body)
        return log

    log = run_once()
    assert [t for _, t in log] == sorted(t for _, t in log)  # events in simulated-time order
    assert log[:4] == [(0, 0.0), (1, 0.0), (2, 0.0), (2, 0.5)]  # ties go to the lower index
    assert len(log) == 8 and run_once() == log


def test_the_paired_interval() -> None:
    replay = _replay_module()
    low, high = replay.bootstrap_interval([0.1, 0.12, 0.09, 0.11, 0.1] * 6)
    assert 0.09 < low < 0.104 < high < 0.12  # a steady gain of 0.104 on average: the interval excludes zero
    low, high = replay.bootstrap_interval([0.1, -0.1] * 15)
    assert low < 0 < high  # no difference on average: the interval holds zero


def test_each_tool_pays_the_overhead_its_newest_race_measured(tmp_path: Path) -> None:
    overheads = benchmark("overheads")

    def report(name: str, date: str, rows: dict[str, float]) -> Path:
        path = tmp_path / name
        body = {"commit": name[:4], "date": date, "rows": {k: {"overhead_s": v} for k, v in rows.items()}}
        path.write_text(json.dumps(body))
        return path

    # File names sort against the dates: the date decides, not the name.
    newer = report("a_race.json", "2026-12-04", {"nas": 0.3, "KerasTuner Hyperband": 3.2})
    older = report("b_race.json", "2026-12-01", {"nas": 1.2, "Optuna TPE": 0.2, "KerasTuner Hyperband": 5.2})
    assert overheads.overheads([newer, older]) == {"nas": 0.3, "KerasTuner Hyperband": 3.2, "Optuna TPE": 0.2}
    assert overheads.overhead_sources([newer, older])["Optuna TPE"]["file"] == "b_race.json"
    # Races stamped with their UTC time: a later one the same day wins over a date-only one.
    timed = report("0_race.json", "2026-12-04T19:10+00:00", {"nas": 0.6})
    assert overheads.overheads([timed, newer, older])["nas"] == 0.6


BUDGET_S = 20.0  # simulated seconds: every contender ends a few trials in it


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 3])
def test_every_contender_replays_on_the_table(mini_table: dict[str, Any], workers: int) -> None:
    """Each contender on a slice of a table (the mini space's), alone and with workers in
    parallel: figures from the table, ends inside the budget, the same again for a seed
    (the simulated clock's own test checks how workers interleave)."""
    table, replay = _table(), _replay_module()
    tab = table.Table.load(mini_table["out"])
    rows, cost = tab.by_key(), benchmark("overheads").overheads()
    for contender in replay.CONTENDERS:
        # Seed 0: KerasTuner reads a seed of 0 as none, so the replay must not hand it one.
        points = replay.replay(contender, tab, 0, workers, BUDGET_S, cost)
        assert points, contender.name
        assert all(0 < p.end_s <= BUDGET_S for p in points), contender.name
        figures = {(r["accuracy"], r["throughput"]["images_per_s"]) for r in rows.values()}
        assert {(p.accuracy, p.throughput) for p in points} <= figures, contender.name
        assert replay.replay(contender, tab, 0, workers, BUDGET_S, cost) == points, contender.name


def test_the_fast_gaussian_process_answers_as_sklearn_does_bit_for_bit() -> None:
    """The replay's fast predict for KerasTuner's GP (Matern 2.5, normalised y) must give
    sklearn's own answers, bit for bit, for one row and many, isotropic and per-feature
    length scales, after a refit; and anything else (a list, a non-finite row, too few
    features, another kernel, return_cov) must go to sklearn's own path."""
    import numpy as np
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, Matern

    gp_fast = benchmark("gp_fast")
    rng = np.random.default_rng(0)

    def fitted(kernel: Any, n: int) -> Any:
        # A smooth target without noise, so the fitted length scales are near 1 and every
        # training point counts (sin(3x) plus noise fitted 1e-5: a kernel of zeros, answers
        # that no arithmetic could change).
        x = rng.uniform(size=(n, 7))
        y = np.cos(2 * x).sum(axis=1)
        return GaussianProcessRegressor(kernel=kernel, normalize_y=True, alpha=1e-4, random_state=1).fit(x, y)

    gps = [fitted(Matern(nu=2.5), 30), fitted(Matern(length_scale=np.ones(7), nu=2.5), 40)]
    rows = [rng.uniform(size=(1, 7)) for _ in range(100)] + [rng.uniform(size=(5, 7))]
    for gp in gps:
        assert gp.kernel_(rows[0], gp.X_train_).max() > 0.1
    checked = [[gp.predict(r, return_std=True) for r in rows] for gp in gps]
    cov_checked = gps[0].predict(rows[-1], return_cov=True)
    with gp_fast.fast_predict():
        fast = [[gp.predict(r, return_std=True) for r in rows] for gp in gps]
        assert gps[0].predict(rows[0].tolist(), return_std=True)[0] == checked[0][0][0]  # a list: sklearn's path
        with pytest.raises(ValueError, match="NaN"):
            gps[0].predict(np.full((1, 7), np.nan), return_std=True)
        with pytest.raises(ValueError, match="features"):
            gps[0].predict(rng.uniform(size=(1, 6)), return_std=True)
        other = fitted(RBF(), 20)
        rbf = other.predict(rows[0], return_std=True)
        cov = gps[0].predict(rows[-1], return_cov=True)
        refit_x = rng.uniform(size=(25, 7))
        refit_y = np.cos(2 * refit_x).sum(axis=1)
        gps[0].fit(refit_x, refit_y)
        after = gps[0].predict(rows[1], return_std=True)
    assert "gp_fast" not in GaussianProcessRegressor.predict.__module__  # put back
    for mine, theirs in zip(fast, checked, strict=True):
        for (mean, std), (mean2, std2) in zip(mine, theirs, strict=True):
            assert mean.shape == mean2.shape and std.shape == std2.shape
            assert mean.tobytes() == mean2.tobytes() and std.tobytes() == std2.tobytes()
    assert [a.tobytes() for a in rbf] == [a.tobytes() for a in other.predict(rows[0], return_std=True)]
    assert [a.tobytes() for a in cov] == [a.tobytes() for a in cov_checked]
    assert [a.tobytes() for a in after] == [a.tobytes() for a in gps[0].predict(rows[1], return_std=True)]


def test_the_replay_runs_the_engines_own_loop_without_tensorflow() -> None:
    """nas' contenders in the replay are the engine's worker loop (run_worker) handed the
    table's evaluation: nothing of TensorFlow is loaded, and the study the loop fills is a
    nas study (its workers' identity, heartbeats and the space's records included)."""
    import subprocess
    import sys

    from .package import environment

    script = """
import sys
from benchmarks import replay, table
from benchmarks.overheads import overheads
points = replay.replay(replay.CONTENDERS[0], table.Table.load(), 0, 2, 60.0, overheads())
assert points and all(0 < p.end_s <= 60.0 for p in points), points
assert "tensorflow" not in sys.modules and "keras" not in sys.modules, "TensorFlow was loaded"
print(len(points))
"""
    result = subprocess.run([sys.executable, "-c", script], env=environment(), capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert int(result.stdout.strip().splitlines()[-1]) > 0


def test_the_replay_s_report_names_its_command_and_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from .test_results_map import runnable, stamp_problems

    replay, out = _replay_module(), tmp_path / "replay.json"
    monkeypatch.setattr(replay, "run", lambda *_: {"seeds": 2, "budget_s": 75.0, "workers": {}, "seconds": 0.0})
    contenders = "nas tpe,Optuna TPE"
    arguments = ["--seeds", "2", "--workers", "4", "--budget", "75", "--contenders", contenders, "--out", str(out)]
    monkeypatch.setattr(sys, "argv", ["replay", *arguments])
    replay.main()
    report = json.loads(out.read_text())
    assert report["command"] == (
        f"python -m benchmarks.replay --seeds 2 --workers 4 --budget 75 --jobs 1 --contenders '{contenders}'"
        f" --out {out}"
    )
    assert report["commit"] == benchmark("stamps").commit() and report["date"] and report["machine"]
    assert report["seeds"] == 2 and not stamp_problems(report, runnable())

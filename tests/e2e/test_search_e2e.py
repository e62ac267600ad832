"""End to end through the real CLI: search, resume, crash recovery, interrupts, readers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from ..helpers import StderrLines, brute_force_front, brute_force_noise_front, nas_env, run_cli, start_nas


def _study(folder: Path, name: str = "tiny") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{folder / 'nas.db'}")


def _states(study: optuna.Study) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        out[t.state.name] = out.get(t.state.name, 0) + 1
    return out


def _wait_for_running_trial(
    folder: Path, process: subprocess.Popen[str], *, after: int, phase: str
) -> optuna.trial.FrozenTrial:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        if (folder / "nas.db").exists():
            try:
                for t in _study(folder).get_trials(states=(TrialState.RUNNING,)):
                    if t.number >= after and phase in t.user_attrs.get("durations", {}):
                        return t
            except (KeyError, optuna.exceptions.StorageInternalError):
                pass
        time.sleep(0.5)
    raise AssertionError("no trial reached the phase in time")


def test_search_stores_trials_attributes_and_metric_names(
    finished_study: Path, finished_run: subprocess.CompletedProcess[str]
) -> None:
    study = _study(finished_study)
    assert study.metric_names == ["accuracy", "throughput"]
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MAXIMIZE"]
    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
    for t in trials:
        accuracy, throughput = t.values
        assert 0.0 < accuracy <= 1.0
        assert throughput > 0
        attrs = t.user_attrs
        assert attrs["params"] > 0 and attrs["flops"] > 0
        assert len(attrs["history"]["val_accuracy"]) == 3  # tiny trains 3 epochs
        assert attrs["history"]["val_accuracy"][-1] == accuracy
        hardware = attrs["hardware"]
        figure = hardware["throughput"]["32"]
        assert figure["images_per_s"] == throughput
        # Interleaved with the reference: the ratio times the device's stored baseline, inside its interval.
        assert figure["images_per_s"] == figure["relative"] * figure["baseline_images_per_s"]
        assert figure["low"] <= throughput <= figure["high"]
        assert 0 <= hardware["lock_wait_s"] <= hardware["seconds"]
        assert 0 < hardware["latency"]["p50_ms"] <= hardware["latency"]["p95_ms"]
        assert attrs["flops_per_s"] == attrs["flops"] * throughput
        assert 0 < attrs["peak_fraction"] < 1
        assert attrs["throughput_spread"] >= 0
        assert attrs["device"]["kind"] == "cpu" and attrs["device"]["tensorflow"].startswith("2.")
        phases = {"plan", "build", "measure", "train", "deploy", "total"}
        if "weights_skipped" in attrs:  # dominated by an earlier trial when it finished: never saved
            assert set(attrs["durations"]) == phases and "weights_bytes" not in attrs
            assert t.number > 0 and attrs["weights_skipped"].endswith("dominated it when it finished")
        else:
            assert set(attrs["durations"]) == phases | {"save"}
            assert attrs["weights_bytes"] > 0
        assert "rungs" not in attrs and "early_stopped" not in attrs  # early stopping is off by default
        assert attrs["worker"]["pid"] > 0
        assert set(t.params) == {
            "width_multiplier",
            "stage0.kernel",
            "stage0.expansion",
            "stage0.se",
            "stage1.depth",
            "learning_rate",
        }
    assert study.user_attrs["budget"] == 3
    assert study.user_attrs["dataset"]["train"] + study.user_attrs["dataset"]["validation"] == 400
    assert "Pareto front of 'tiny'" in finished_run.stdout
    assert "trial 2:" in finished_run.stderr
    assert "Confirming the throughput of" in finished_run.stderr
    # No TensorFlow start-up noise reaches the terminal.
    for noise in ("cuda", "oneDNN", "absl", "ExperimentalWarning", "cpu_feature_guard"):
        assert noise not in finished_run.stderr + finished_run.stdout


@pytest.mark.slow
def test_rerun_reports_budget_complete(finished_study: Path) -> None:
    result = run_cli("search", "tiny", "--trials", "3", cwd=finished_study)
    assert result.returncode == 0, result.stderr
    assert "Budget complete: 3 of 3 trials finished." in result.stderr
    assert len(_study(finished_study).trials) == 3


@pytest.mark.slow
def test_resume_after_simulated_crash(finished_study: Path) -> None:
    # A worker that asked for a trial, sampled it, recorded itself and died without a word.
    crash = (
        "import os, optuna\n"
        "from nas.search.space import load_space\n"
        "from nas.search.engine import WorkerIdentity\n"
        "study = optuna.load_study(study_name='tiny', storage='sqlite:///nas.db')\n"
        "trial = study.ask()\n"
        "load_space('tiny').sample(trial, num_classes=10, channels=1)\n"
        "trial.set_user_attr('worker', WorkerIdentity.current().to_attr())\n"
        "os._exit(9)\n"
    )
    subprocess.run([sys.executable, "-c", crash], cwd=finished_study, env=nas_env(), check=False, timeout=120)
    before = {t.number: t.values for t in _study(finished_study).get_trials(states=(TrialState.COMPLETE,))}
    orphan = _study(finished_study).get_trials(states=(TrialState.RUNNING,))
    assert len(orphan) == 1

    result = run_cli("search", "tiny", "--trials", "4", cwd=finished_study)
    assert result.returncode == 0, result.stderr
    assert f"trial {orphan[0].number} was left running" in result.stderr

    study = _study(finished_study)
    failed = study.trials[orphan[0].number]
    assert failed.state == TrialState.FAIL
    assert "ended while the trial was running" in failed.user_attrs["fail_reason"]
    retried = [t for t in study.trials if t.user_attrs.get("retry_of") == orphan[0].number]
    assert len(retried) == 1 and retried[0].state == TrialState.COMPLETE
    assert retried[0].params == orphan[0].params
    assert _states(study) == {"COMPLETE": 4, "FAIL": 1}
    # No finished trial was lost or changed.
    assert {n: v for n, v in ((t.number, t.values) for t in study.trials) if n in before} == before


@pytest.mark.slow
def test_kill_9_mid_trial_then_resume(finished_study: Path) -> None:
    process = start_nas("search", "tiny", "--trials", "5", cwd=finished_study)
    victim = _wait_for_running_trial(finished_study, process, after=4, phase="measure")
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    assert _study(finished_study).trials[victim.number].state == TrialState.RUNNING  # the zombie

    result = run_cli("search", "tiny", "--trials", "5", cwd=finished_study)
    assert result.returncode == 0, result.stderr
    study = _study(finished_study)
    killed = study.trials[victim.number]
    assert killed.state == TrialState.FAIL
    assert f"worker process {process.pid}" in killed.user_attrs["fail_reason"]
    retried = [t for t in study.trials if t.user_attrs.get("retry_of") == victim.number]
    assert len(retried) == 1 and retried[0].state == TrialState.COMPLETE
    assert retried[0].params == victim.params
    assert _states(study) == {"COMPLETE": 5, "FAIL": 1}


@pytest.mark.slow
def test_first_ctrl_c_lets_the_running_trial_finish(finished_study: Path) -> None:
    process = start_nas("search", "tiny", "--trials", "5", cwd=finished_study)
    running = _wait_for_running_trial(finished_study, process, after=3, phase="build")
    os.kill(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    assert "Stopping: the running trial will finish" in stderr
    assert "Stopped: 4 of 5 trials finished and saved, none left running" in stderr
    study = _study(finished_study)
    assert study.trials[running.number].state == TrialState.COMPLETE
    assert _states(study) == {"COMPLETE": 4}


@pytest.mark.slow
def test_second_ctrl_c_fails_and_requeues_the_running_trial(finished_study: Path) -> None:
    process = start_nas("search", "tiny", "--trials", "4", cwd=finished_study)
    lines = StderrLines(process)
    victim = _wait_for_running_trial(finished_study, process, after=3, phase="build")
    os.kill(process.pid, signal.SIGINT)
    # Two presses at once reach Python as one signal: the second goes once the first is handled.
    lines.wait_for("Stopping: the running trial will finish")
    os.kill(process.pid, signal.SIGINT)
    process.wait(timeout=120)
    stderr = lines.text()
    assert process.returncode == 130, stderr
    assert "Run the same command again to resume" in stderr
    study = _study(finished_study)
    assert not study.get_trials(states=(TrialState.RUNNING,))
    stopped = study.trials[victim.number]
    assert stopped.state == TrialState.FAIL
    assert stopped.user_attrs["fail_reason"].startswith("interrupted")
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert len(waiting) == 1 and waiting[0].user_attrs["retry_of"] == victim.number
    assert _states(study)["COMPLETE"] == 3

    result = run_cli("search", "tiny", "--trials", "4", cwd=finished_study)
    assert result.returncode == 0, result.stderr
    study = _study(finished_study)
    assert _states(study) == {"COMPLETE": 4, "FAIL": 1}
    assert study.trials[-1].params == victim.params


@pytest.mark.slow
def test_pareto_formats_agree_with_optuna(finished_study: Path) -> None:
    ours = run_cli("pareto", "tiny", "--format", "json", cwd=finished_study)
    assert ours.returncode == 0, ours.stderr
    records = json.loads(ours.stdout)
    assert records and {"trial", "accuracy", "throughput", "params", "flops", "parameters"} <= set(records[0])
    accuracies = [r["accuracy"] for r in records]
    assert accuracies == sorted(accuracies, reverse=True)

    strict = {r["trial"] for r in records if r["on_front"]}
    study = _study(finished_study)
    # What `optuna best-trials` prints (tests/e2e/test_ecosystem.py runs that CLI on this study).
    assert {t.number for t in study.best_trials} == strict
    assert strict == brute_force_front(study.trials, study.directions)
    assert {r["trial"] for r in records} == brute_force_noise_front(study.trials, study.directions, study.metric_names)
    for r in records:  # every front member's interval holds its figure; the search confirmed them all
        assert r["throughput_low"] <= r["throughput"] <= r["throughput_high"]
        assert r["confirmed_low"] <= r["confirmed_throughput"] <= r["confirmed_high"]
    confirmed = study.user_attrs["confirmed"]
    assert confirmed["rounds"] == 3 * 3 and set(confirmed["trials"]) == {str(r["trial"]) for r in records}
    assert {r["trial"]: [r["accuracy"], r["throughput"]] for r in records} == {
        r["trial"]: study.trials[r["trial"]].values for r in records
    }

    csv_out = run_cli("pareto", "tiny", "--format", "csv", cwd=finished_study)
    header, *rows = csv_out.stdout.strip().splitlines()
    assert header.startswith("trial,accuracy,throughput,params,flops") and len(rows) == len(records)

    table = run_cli("pareto", "tiny", cwd=finished_study)
    assert "Pareto front of 'tiny'" in table.stdout and "img/s" in table.stdout and " ±" in table.stdout
    assert "FLOPs" not in table.stdout and "…" not in table.stdout  # compact: tests/cli/test_tables.py
    wide = run_cli("pareto", "tiny", "--wide", cwd=finished_study)
    assert "95% interval" in wide.stdout and "FLOPs" in wide.stdout and "latency p50/p95" in wide.stdout

    # Confirming again replaces the figures: measured later, the same trials.
    again = run_cli("pareto", "tiny", "--confirm", "--format", "json", cwd=finished_study)
    assert again.returncode == 0, again.stderr
    assert "Confirming the throughput of" in again.stderr
    later = _study(finished_study).user_attrs["confirmed"]
    assert later["measured_at"] >= confirmed["measured_at"] and set(later["trials"]) == set(confirmed["trials"])

    status = run_cli("status", cwd=finished_study)
    assert status.returncode == 0 and "tiny" in status.stdout


@pytest.mark.slow
def test_second_study_reuses_measurements_of_the_first(finished_study: Path) -> None:
    def hits() -> int:
        status = run_cli("status", cwd=finished_study)
        match = re.search(r"Measurement cache: (\d+) measurements, (\d+) hits", status.stdout)
        assert match, status.stdout
        return int(match.group(2))

    before = hits()
    # Same space and seed: the new study's first candidate is the first study's first one.
    result = run_cli("search", "tiny", "--study", "tiny-again", "--trials", "1", cwd=finished_study)
    assert result.returncode == 0, result.stderr
    first = _study(finished_study).trials[0]
    again = _study(finished_study, "tiny-again").trials[0]
    assert again.params == first.params
    assert again.user_attrs["hardware"]["cached"] == {"throughput@32": True, "latency": True}
    assert again.values[1] == first.values[1]  # the same measured throughput, not a new timing
    assert "measure" in again.user_attrs["durations"]
    # Throughput, latency, the CPU peak and the device's reference baseline, all looked up;
    # the baseline once more by the confirmation of the front at the end.
    assert hits() == before + 5

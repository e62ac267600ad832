"""The study in the wider ecosystem: the HTML report (and in a real browser when Chromium is
installed), optuna-dashboard's HTTP API, the optuna CLI, a real KerasTuner tuner on our
oracle with resume, the Python API, and --format json listings."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import optuna
import pytest

from ..helpers import REPO, brute_force_front, brute_force_noise_front, run_cli


def _external_resources(page: str) -> list[str]:
    """src/href attributes of the page's tags that would fetch something."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.extend(f"{tag} {k}={v}" for k, v in attrs if k in ("src", "href") and v)

    Tags().feed(page)
    return found


def _pareto_plot_points(page: str) -> dict[str, list[tuple[int, float, float]]]:
    """(trial, x, y) of each trace of the report's Pareto plot (its first), by trace name
    without the count, read from the data the page hands Plotly."""
    start = re.search(r'Plotly\.newPlot\(\s*"plot0",\s*', page)
    assert start, "no Pareto plot in the report"
    traces, _ = json.JSONDecoder().raw_decode(page, start.end())
    points = {}
    for trace in traces:
        trials = [int(re.match(r"trial (\d+)", text).group(1)) for text in trace["text"]]  # type: ignore[union-attr]
        points[trace["name"].split(" (")[0]] = sorted(zip(trials, trace["x"], trace["y"], strict=True))
    return points


def _expected_pareto_points(study: optuna.Study) -> dict[str, list[tuple[int, float, float]]]:
    """What the plot must show: throughput (x) against accuracy (y), the front from every pair."""
    front = brute_force_front(study.trials, study.directions)
    noisy = brute_force_noise_front(study.trials, study.directions, study.metric_names) - front
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    confirmed = (study.user_attrs.get("confirmed") or {}).get("trials") or {}
    shown = sorted(
        (t.number, confirmed[str(t.number)]["images_per_s"], t.values[0])
        for t in done
        if t.number in front | noisy and str(t.number) in confirmed
    )
    return {
        "Pareto front": sorted((t.number, t.values[1], t.values[0]) for t in done if t.number in front),
        "within noise of the front": sorted((t.number, t.values[1], t.values[0]) for t in done if t.number in noisy),
        "dominated": sorted((t.number, t.values[1], t.values[0]) for t in done if t.number not in front | noisy),
        "infeasible": [],
    } | ({"confirmed after the search": shown} if shown else {})  # beside the search's own figures


@pytest.mark.slow
def test_report_is_self_contained_with_every_trial(finished_study: Path) -> None:
    result = run_cli("report", "tiny", "--out", "out/report.html", "--png", cwd=finished_study)
    assert result.returncode == 0, result.stderr
    page = (finished_study / "out" / "report.html").read_text()
    assert _external_resources(page) == []  # nothing to fetch: works offline
    assert "Plotly.newPlot" in page and "Pareto front" in page and "Hypervolume" in page
    assert "Parameter importance for accuracy" in page and "Learning curves" in page
    summary = json.loads(page.split('id="summary">')[1].split("</script>")[0])
    assert summary["finished"] == 3 and summary["study"] == "tiny"
    assert page.count("<tr>") == 1 + 3  # header + one row per trial
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{finished_study / 'nas.db'}")
    assert _pareto_plot_points(page) == _expected_pareto_points(study)
    assert summary["pareto"] == len(brute_force_front(study.trials, study.directions))
    assert (finished_study / "out" / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_renders_in_headless_chromium(finished_study: Path) -> None:
    if shutil.which("chromium") is None:
        reason = "Debian's chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI=true: .ci/run installs it, so this check must run there", pytrace=False)
        pytest.skip(reason)
    assert run_cli("report", "tiny", "--out", "report.html", cwd=finished_study).returncode == 0
    page = (finished_study / "report.html").read_text()
    # Every finished trial, and each confirmed front trial once more (its figure measured again).
    points = sum(len(trace) for trace in _pareto_plot_points(page).values())
    checked = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "report_in_browser.py"), "report.html"],
        cwd=finished_study,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"{points} markers in the Pareto plot for its {points} points (3 finished trials)" in checked.stdout


def test_the_browser_check_finds_a_plot_that_did_not_draw() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("report_in_browser", REPO / "scripts" / "report_in_browser.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    svg = '<svg class="main-svg"></svg>' * 3
    # Plot 1 drew nothing beside plots of three layers each (a total of 6 layers for 3 plots).
    dom = f'<div id="plot0">{svg}</div><div id="plot1"></div><div id="plot2">{svg}</div>'
    assert check.blank_plots(dom, 3) == [1]
    assert check.blank_plots(dom.replace('id="plot1">', f'id="plot1">{svg}'), 3) == []
    assert check.blank_plots(f'<div id="plot0">{svg}</div>', 2) == [1]  # a plot missing from the page
    assert check.blank_plots(f'<div id="plot1">{svg}</div><div id="plot10"></div>', 11)[:2] == [0, 2]


def test_report_errors(finished_study: Path) -> None:
    missing = run_cli("report", "nope", cwd=finished_study)
    assert missing.returncode == 2 and "study 'nope' not found" in missing.stderr
    blocked = run_cli("report", "tiny", "--out", "/etc/hostname/r.html", cwd=finished_study)
    assert blocked.returncode == 2 and blocked.stderr.startswith("Error: --out: cannot write")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_optuna_dashboard_serves_the_study(finished_study: Path) -> None:
    port = _free_port()
    dashboard = shutil.which("optuna-dashboard") or str(Path(sys.executable).parent / "optuna-dashboard")
    server = subprocess.Popen(
        [dashboard, "sqlite:///nas.db", "--host", "127.0.0.1", "--port", str(port)],
        cwd=finished_study,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline, studies = time.monotonic() + 60, None
        while time.monotonic() < deadline and studies is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=2) as reply:
                    studies = json.load(reply)["study_summaries"]
            except OSError:
                time.sleep(0.5)
        assert studies is not None, "optuna-dashboard did not answer"
        (summary,) = studies
        assert summary["study_name"] == "tiny" and summary["directions"] == ["maximize", "maximize"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/{summary['study_id']}?after=0") as reply:
            detail = json.load(reply)
        assert len(detail["trials"]) == 3 and detail["objective_names"] == ["accuracy", "throughput"]
        study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{finished_study / 'nas.db'}")
        assert {t["number"] for t in detail["best_trials"]} == brute_force_front(study.trials, study.directions)
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.slow
def test_optuna_cli_reads_the_study(finished_study: Path) -> None:
    cli = shutil.which("optuna") or str(Path(sys.executable).parent / "optuna")
    args = ["--study-name", "tiny", "--storage", "sqlite:///nas.db", "--format", "json"]
    trials = subprocess.run([cli, "trials", *args], cwd=finished_study, capture_output=True, text=True, check=True)
    assert len(json.loads(trials.stdout)) == 3
    best = subprocess.run([cli, "best-trials", *args], cwd=finished_study, capture_output=True, text=True, check=True)
    front = optuna.load_study(study_name="tiny", storage=f"sqlite:///{finished_study / 'nas.db'}").best_trials
    assert sorted(t["number"] for t in json.loads(best.stdout)) == sorted(t.number for t in front)


@pytest.mark.slow
def test_listings_have_json(finished_study: Path) -> None:
    status = json.loads(run_cli("status", "--format", "json", cwd=finished_study).stdout)
    assert status["studies"][0]["study"] == "tiny" and status["studies"][0]["finished"] == 3
    pareto = json.loads(run_cli("pareto", "tiny", "--format", "json", cwd=finished_study).stdout)
    assert pareto and all("accuracy" in r for r in pareto)
    shown = json.loads(run_cli("space", "show", "tiny", "--format", "json", cwd=finished_study).stdout)
    assert shown["name"] == "tiny"


@pytest.mark.slow
def test_keras_tuner_runs_on_the_optuna_oracle_and_resumes(tmp_path: Path) -> None:
    example = REPO / "examples" / "keras_tuner_oracle.py"
    storage = f"sqlite:///{tmp_path / 'kt.db'}"
    for trials in (2, 3):
        done = subprocess.run(
            [sys.executable, str(example), "--trials", str(trials), "--storage", storage, "--directory", "kt"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        study = optuna.load_study(study_name="keras-tuner-digits", storage=storage)
        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        assert len(complete) == trials and len(study.trials) == trials  # resumed, nothing redone
        assert study.metric_names == ["val_accuracy", "val_loss"]
        for t in complete:
            assert set(t.params) >= {"units", "dropout", "learning_rate"}
            # Conditional: never sampled without dropout. (Like KerasTuner's own oracles, a
            # hyperparameter first seen while a trial builds takes its default in that trial.)
            assert t.params["dropout"] or "rate" not in t.params
            assert 0 < t.values[0] <= 1 and t.values[1] > 0
        # Trial 0 takes the default (off), so the check above met a trial without dropout.
        assert any(not t.params["dropout"] for t in complete)
        # get_best_trials prints the Pareto front: one line per front trial.
        printed = [line for line in done.stdout.splitlines() if line.startswith("front: ")]
        assert len(printed) == len(study.best_trials)


@pytest.mark.slow
def test_python_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    import nas.api as api

    monkeypatch.chdir(tmp_path)
    space = yaml.safe_load((REPO / "spaces" / "tiny.yaml").read_text())
    space["name"] = "api"
    space["training"]["epochs"] = 1
    seen = []
    study = api.search(space, trials=2, storage="sqlite:///api.db", on_trial=lambda r: seen.append(r.number))
    assert seen == [0, 1]
    front = study.pareto()
    assert front and {"trial", "accuracy", "throughput", "parameters"} <= set(front[0])
    stored = optuna.load_study(study_name="api", storage="sqlite:///api.db")
    assert {r["trial"] for r in front if r["on_front"]} == brute_force_front(stored.trials, stored.directions)
    assert {r["trial"] for r in front} == brute_force_noise_front(stored.trials, stored.directions, stored.metric_names)
    again = api.load("api", storage="sqlite:///api.db")
    assert [t["trial"] for t in again.trials()] == [0, 1]
    manifest = again.export("keras", tmp_path / "exported")
    assert manifest["passed"] and (tmp_path / "exported" / "manifest.json").exists()
    page = again.report(tmp_path / "r.html").read_text()
    assert _pareto_plot_points(page) == _expected_pareto_points(stored)
    with pytest.raises(api.NasError, match="study 'nope' not found"):
        api.load("nope", storage="sqlite:///api.db")

"""A study with two devices' figures (the device of some trials changed by hand): `nas status`
and `nas pareto` name the devices and keep one front per device, in the table, JSON and CSV;
`nas pareto --confirm` measures them together here and shows one front."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import optuna
import pytest

import nas.api
from nas.errors import NasError

from ..helpers import finished_trial, run_cli

XEON = {"kind": "cpu", "name": "Xeon", "threads": 2, "tensorflow": "2.21.0", "host": "a"}
H100 = {"kind": "gpu", "name": "H100", "compute_capability": [9, 0], "tensorflow": "2.21.0", "host": "b"}
ON_XEON, ON_H100 = "CPU Xeon (2 threads)", "GPU H100"
MIXED = f"Study 's' was measured on 2 devices: {ON_XEON} (3 trials), {ON_H100} (1 trial); one front per device"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """nas.db with study `s`: three trials measured on a Xeon, one on an H100 faster than all."""
    study = optuna.create_study(
        directions=["maximize", "maximize"], study_name="s", storage=f"sqlite:///{tmp_path / 'nas.db'}"
    )
    study.set_metric_names(["accuracy", "throughput"])
    for accuracy, throughput, device in [(0.9, 1000, XEON), (0.8, 1500, XEON), (0.7, 900, XEON), (0.95, 9000, H100)]:
        study.add_trial(finished_trial(accuracy, throughput, device=device))
    return tmp_path


def _pareto(folder: Path, *args: str) -> tuple[list[tuple[int, str]], str]:
    result = run_cli("pareto", "s", "--format", "json", *args, cwd=folder)
    assert result.returncode == 0, result.stderr
    return [(r["trial"], r["compared_on"]) for r in json.loads(result.stdout)], result.stderr


def test_pareto_keeps_the_devices_apart_in_every_format(folder: Path) -> None:
    shown, said = _pareto(folder)
    assert shown == [(0, ON_XEON), (1, ON_XEON), (3, ON_H100)]  # the H100's trial takes no Xeon trial's place
    assert MIXED in said and "--confirm" in said  # JSON on stdout, the note on stderr

    table = run_cli("pareto", "s", cwd=folder)
    assert table.returncode == 0, table.stderr
    text = " ".join(table.stdout.split())
    assert MIXED in text
    assert f"Front of the trials measured on {ON_XEON} (2 trials):" in text
    assert f"Front of the trials measured on {ON_H100} (1 trial):" in text

    rows = list(csv.DictReader(io.StringIO(run_cli("pareto", "s", "--format", "csv", cwd=folder).stdout)))
    assert [(r["trial"], r["device"], r["compared_on"]) for r in rows] == [
        ("0", ON_XEON, ON_XEON),
        ("1", ON_XEON, ON_XEON),
        ("3", ON_H100, ON_H100),
    ]


def test_best_by_a_measured_figure_is_one_per_device(folder: Path) -> None:
    assert _pareto(folder, "--best", "throughput")[0] == [(1, ON_XEON), (3, ON_H100)]
    assert _pareto(folder, "--best", "accuracy")[0] == [(3, ON_H100)]  # accuracy compares on any device
    study = nas.api.load("s", storage=f"sqlite:///{folder / 'nas.db'}")
    assert study.best("accuracy")["trial"] == 3
    with pytest.raises(NasError, match="measured on 2 devices and throughput compares only within one"):
        study.best("throughput")


def test_status_names_the_devices_and_counts_one_front_per_device(folder: Path) -> None:
    table = run_cli("status", cwd=folder)
    assert table.returncode == 0, table.stderr
    assert MIXED in " ".join(table.stdout.split())
    result = run_cli("status", "--format", "json", cwd=folder)
    (row,) = json.loads(result.stdout)["studies"]
    assert row["devices"] == [{"device": ON_XEON, "trials": 3}, {"device": ON_H100, "trials": 1}]
    assert (row["pareto"], row["fronts"]) == (3, 2)


@pytest.mark.slow
def test_confirm_measures_the_devices_fronts_together_as_one(finished_study: Path) -> None:
    """The session's real tiny study, one finished trial's device changed by hand in the
    database (Optuna refuses to change a finished trial)."""
    url = f"sqlite:///{finished_study / 'nas.db'}"
    study = optuna.load_study(study_name="tiny", storage=url)
    moved = max((t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE), key=lambda t: t.number)
    here = moved.user_attrs["device"]
    elsewhere = {**here, "kind": "gpu", "name": "Elsewhere"}
    with sqlite3.connect(finished_study / "nas.db") as db:
        db.execute(
            "UPDATE trial_user_attributes SET value_json = ? WHERE key = 'device' AND trial_id = ?",
            (json.dumps(elsewhere), moved._trial_id),
        )
    before = run_cli("pareto", "tiny", "--format", "json", cwd=finished_study)
    fronts = {r["trial"]: r["compared_on"] for r in json.loads(before.stdout)}
    assert fronts[moved.number] == "GPU Elsewhere" and len(set(fronts.values())) == 2, fronts

    again = run_cli("pareto", "tiny", "--confirm", "--format", "json", cwd=finished_study)
    assert again.returncode == 0, again.stderr
    records = json.loads(again.stdout)
    confirmed = optuna.load_study(study_name="tiny", storage=url).user_attrs["confirmed"]
    assert {r["compared_on"] for r in records} == {confirmed["device"]} and confirmed["device_id"]
    assert {str(r["trial"]) for r in records} <= set(confirmed["trials"]) and str(moved.number) in confirmed["trials"]
    assert f"One front: the throughput measured again together on {confirmed['device']}" in again.stderr

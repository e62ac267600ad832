"""The typed study records (search/records.py) read and write what every nas before them stored:
a record as an old study holds it goes through the reader and the writer to the same JSON."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from nas.search.records import Confirmation, ConfirmedFigure, FinalFigures, FinalTraining, StudyAttr

REPO = Path(__file__).resolve().parents[2]

# As `nas train` stored them (benchmarks/fashion-runs/fashion.db's trial 1, its curve cut to two
# epochs; trial 2 as a study without an accuracy objective, measured without an interval).
OLD_FINAL: dict[str, Any] = {
    "trained_at": "2026-12-06T04:40:46+00:00",
    "trials": {
        "1": {
            "recipe": {
                "start": "scratch",
                "epochs": 15,
                "warmup_epochs": 1,
                "learning_rate": 0.004,
                "batch_size": 128,
                "optimizer": "adam",
                "label_smoothing": 0.1,
                "augmentation": {"flip": "horizontal", "rotation": 0.0, "crop": 0.1, "contrast": 0.0},
                "data": "train+validation",
                "seed": 0,
            },
            "test_accuracy": 0.9328,
            "keras_test_accuracy": 0.9328,
            "search_accuracy": 0.9235152969406119,
            "history": {
                "loss": [1.00612, 0.77023],
                "accuracy": [0.78067, 0.88508],
                "val_loss": [float("nan"), float("nan")],
                "val_accuracy": [float("nan"), float("nan")],
                "seconds": [141.9894, 142.0169],
            },
            "seconds": 1821.2,
            "throughput": 3443.19,
            "throughput_low": 3289.483017124584,
            "throughput_high": 3580.800114072837,
            "device": "Intel(R) Xeon(R) Processor",
            "model": "/studies/fashion_mnist/final/trial-1.keras",
            "sha256": "82ece7d362fae3273e9b6b608bbdbdeaa875975b30176d51f0fc075e35690a4c",
        },
        "2": {
            "recipe": {"start": "inherited", "epochs": 1, "seed": 0},
            "test_accuracy": 0.5,
            "keras_test_accuracy": 0.51,
            "search_accuracy": None,
            "history": {"loss": [2.1], "accuracy": [0.3], "seconds": [1.5]},
            "seconds": 1.5,
            "throughput": 900.0,
            "throughput_low": None,
            "throughput_high": None,
            "device": None,
            "model": "/studies/s/final/trial-2.keras",
            "sha256": "0" * 64,
        },
    },
}

# As the confirmation after a search stored it (the same study's trial 1, and one more).
OLD_CONFIRMED: dict[str, Any] = {
    "measured_at": "2026-12-06T00:56:22+00:00",
    "device": "CPU Intel(R) Xeon(R) Processor (2 threads)",
    "batch_size": 64,
    "rounds": 45,
    "baseline_images_per_s": 48076.14402693104,
    "trials": {
        "1": {
            "images_per_s": 3370.0941210247747,
            "low": 3312.226762970526,
            "high": 3425.4115669467,
            "relative": 0.0700990936198405,
            "spread": 0.04126659676388049,
            "trustworthy": True,
        },
        "3": {
            "images_per_s": 9000.0,
            "low": 8800.0,
            "high": 9100.0,
            "relative": 0.18,
            "spread": 0.2,
            "trustworthy": False,
        },
    },
}


def _stored(value: Any) -> str:
    """What Optuna keeps of a user attribute: its JSON (NaN as `NaN`, keys in order)."""
    return json.dumps(value)


def test_an_old_final_record_reads_and_writes_back_unchanged() -> None:
    record = FinalTraining.from_attr(json.loads(_stored(OLD_FINAL)))
    assert record is not None and record.trained_at == OLD_FINAL["trained_at"]
    first, second = record.trials["1"], record.trials["2"]
    assert (first.test_accuracy, first.throughput, first.epochs, first.model) == (
        0.9328,
        3443.19,
        15,
        "/studies/fashion_mnist/final/trial-1.keras",
    )
    assert (second.search_accuracy, second.throughput_low, second.device) == (None, None, None)
    assert _stored(record.to_attr()) == _stored(OLD_FINAL)
    assert _stored(FinalFigures.from_attr(OLD_FINAL["trials"]["1"]).to_attr()) == _stored(OLD_FINAL["trials"]["1"])


def test_an_old_confirmation_reads_and_writes_back_unchanged() -> None:
    record = Confirmation.from_attr(json.loads(_stored(OLD_CONFIRMED)))
    assert record is not None and (record.device, record.rounds) == (OLD_CONFIRMED["device"], 45)
    assert record.trials["3"] == ConfirmedFigure(9000.0, 8800.0, 9100.0, 0.18, 0.2, False)
    assert _stored(record.to_attr()) == _stored(OLD_CONFIRMED)


COMMITTED = sorted((REPO / "benchmarks").glob("*-runs/**/*.db"))


@pytest.mark.parametrize("database", COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_record_of_the_committed_studies_reads_and_writes_back_unchanged(database: Path) -> None:
    """The benchmarks' studies (made by earlier versions of nas): every stored record's JSON."""
    with closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        stored = db.execute(
            "SELECT key, value_json FROM study_user_attributes WHERE key IN (?, ?)",
            (StudyAttr.FINAL.value, StudyAttr.CONFIRMED.value),
        ).fetchall()
    assert stored
    readers = {StudyAttr.FINAL.value: FinalTraining.from_attr, StudyAttr.CONFIRMED.value: Confirmation.from_attr}
    for key, text in stored:
        record = readers[key](json.loads(text))
        assert record is not None and _stored(record.to_attr()) == text, (database, key)

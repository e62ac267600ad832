"""The typed study records (search/records.py) read and write what every nas before them stored:
a record as an old study holds it goes through the reader and the writer to the same JSON, and
the readers of the front (engine/front.py, `nas pareto`, the report, the export manifest) give
from it what they gave before the records were typed."""

from __future__ import annotations

import json
import sqlite3
import statistics
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from nas.search.engine.front import confirmation, confirmed, final_figures
from nas.search.records import Confirmation, ConfirmedFigure, FinalFigures, FinalRun, FinalTraining, StudyAttr

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


def _study() -> optuna.Study:
    """Trials 0-3 (trial 1 and 3 on the front) with the old records."""
    study = optuna.create_study(directions=["maximize", "maximize"])
    study.set_metric_names(["accuracy", "throughput"])
    for accuracy, throughput in ((0.80, 1000.0), (0.92, 3400.0), (0.70, 800.0), (0.85, 9000.0)):
        study.add_trial(
            create_trial(
                state=TrialState.COMPLETE,
                values=[accuracy, throughput],
                params={"x": accuracy},
                distributions={"x": FloatDistribution(0, 1)},
            )
        )
    study.set_user_attr(StudyAttr.FINAL, OLD_FINAL)
    study.set_user_attr(StudyAttr.CONFIRMED, OLD_CONFIRMED)
    return study


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


def _seed(k: int, accuracy: float, throughput: float) -> FinalRun:
    """Another seed of OLD_FINAL's trial 1."""
    (zero,) = FinalFigures.from_attr(OLD_FINAL["trials"]["1"]).runs
    name = f"fashion_mnist/final/trial-1-seed-{k}.keras"
    return replace(zero, seed=k, test_accuracy=accuracy, throughput=throughput, model=name, sha256=str(k) * 64)


def _three_seeds() -> FinalFigures:
    """OLD_FINAL's trial 1 with seeds 1 and 2 (given out of order)."""
    old = FinalFigures.from_attr(OLD_FINAL["trials"]["1"])
    two = replace(_seed(2, 0.9350, 3300.0), throughput_high=3700.0)
    return FinalFigures.of_runs(old.recipe, old.search_accuracy, [two, *old.runs, _seed(1, 0.9400, 3500.0)])


def test_several_seeds_store_each_seed_and_their_mean_and_read_back_unchanged() -> None:
    old = FinalFigures.from_attr(OLD_FINAL["trials"]["1"])
    (zero,) = old.runs  # an old record is seed 0's, and nothing else
    assert (zero.seed, zero.test_accuracy, zero.model, old.kept_seed) == (0, 0.9328, old.model, 0)
    assert _stored(FinalFigures.of_runs(old.recipe, old.search_accuracy, [zero]).to_attr()) == _stored(
        OLD_FINAL["trials"]["1"]
    )  # one seed, seed 0: stored as before seeds

    figures = _three_seeds()
    accuracies, speeds = [0.9328, 0.9400, 0.9350], [3443.19, 3500.0, 3300.0]
    assert [run.seed for run in figures.runs] == [0, 1, 2]
    assert figures.test_accuracy == round(statistics.mean(accuracies), 6) == 0.935933
    assert figures.test_accuracy_sd == round(statistics.stdev(accuracies), 6)
    assert figures.throughput == round(statistics.mean(speeds), 2) and figures.throughput_sd is not None
    assert (figures.throughput_low, figures.throughput_high) == (zero.throughput_low, 3700.0)  # every seed's interval
    kept = figures.runs[2]  # closest to the mean
    assert (figures.kept_seed, figures.model, figures.sha256, figures.history) == (
        2,
        kept.model,
        kept.sha256,
        kept.history,
    )
    stored = figures.to_attr()
    assert list(stored)[-3:] == ["seeds", "test_accuracy_sd", "throughput_sd"]
    assert _stored(FinalFigures.from_attr(json.loads(_stored(stored))).to_attr()) == _stored(stored)
    record = FinalTraining(trained_at="t", trials={"1": figures, "2": FinalFigures.from_attr(OLD_FINAL["trials"]["2"])})
    assert _stored(FinalTraining.from_attr(json.loads(_stored(record.to_attr()))).to_attr()) == _stored(
        record.to_attr()
    )
    assert "seeds" not in record.to_attr()["trials"]["2"]
    # Equally far from the mean: the lower seed's model.
    tie = FinalFigures.of_runs(old.recipe, None, [_seed(3, 0.90, 1.0), _seed(1, 0.92, 1.0)])
    assert tie.kept_seed == 1 and tie.test_accuracy_sd is not None


def test_pareto_the_report_and_the_manifest_read_the_mean_of_several_seeds_with_its_spread() -> None:
    from nas.search.results import pareto_records
    from nas.search.results.export import _final_summary
    from nas.search.results.report import pareto_figure

    study = _study()
    figures = _three_seeds()
    study.set_user_attr(StudyAttr.FINAL, FinalTraining(trained_at="t", trials={"1": figures}).to_attr())
    one = {r["trial"]: r for r in pareto_records(study)}[1]
    assert (one["test_accuracy"], one["final_throughput"]) == (0.935933, figures.throughput)
    assert (one["final_seeds"], one["test_accuracy_sd"]) == (3, figures.test_accuracy_sd)
    trace = {trace.name: trace for trace in pareto_figure(study).data}["final-trained, test accuracy (1)"]
    assert list(trace.y) == [0.935933] and list(trace.error_y.array) == [figures.test_accuracy_sd]
    assert trace.text[0].startswith(f"trial 1: test accuracy 0.9359 ± {figures.test_accuracy_sd:.4f} (mean of 3 seeds)")
    summary = _final_summary(final_figures(study)["1"], False)
    assert summary is not None and summary["test_accuracy"] == 0.935933
    assert (summary["seeds"], summary["kept_seed"]) == ([0, 1, 2], 2)


def test_an_old_confirmation_reads_and_writes_back_unchanged() -> None:
    record = Confirmation.from_attr(json.loads(_stored(OLD_CONFIRMED)))
    assert record is not None and (record.device, record.rounds) == (OLD_CONFIRMED["device"], 45)
    assert record.trials["3"] == ConfirmedFigure(9000.0, 8800.0, 9100.0, 0.18, 0.2, False)
    assert _stored(record.to_attr()) == _stored(OLD_CONFIRMED)


def test_the_writers_keep_the_figures_of_the_trials_they_did_not_touch() -> None:
    """As engine/final.py and engine/confirm.py store a new trial's figures beside the old ones."""
    study = _study()
    final = dict(final_figures(study))
    final["0"] = FinalFigures.from_attr(OLD_FINAL["trials"]["2"] | {"model": "/studies/s/final/trial-0.keras"})
    written = FinalTraining(trained_at="2026-12-07T00:00:00+00:00", trials=final).to_attr()
    assert list(written) == ["trained_at", "trials"] and list(written["trials"]) == ["1", "2", "0"]
    for number in ("1", "2"):
        assert _stored(written["trials"][number]) == _stored(OLD_FINAL["trials"][number])
    measured = dict(confirmed(study))
    measured["1"] = ConfirmedFigure(3500.0, 3400.0, 3600.0, 0.07, 0.01, True)
    again = Confirmation("2026-12-07T00:00:00+00:00", "GPU H100", 64, 45, 50000.0, measured).to_attr()
    assert list(again) == list(OLD_CONFIRMED) and _stored(again["trials"]["3"]) == _stored(OLD_CONFIRMED["trials"]["3"])
    assert again["trials"]["1"]["images_per_s"] == 3500.0


def test_a_study_without_the_records_has_no_figures() -> None:
    study = optuna.create_study(directions=["maximize", "maximize"])
    assert final_figures(study) == {} and confirmed(study) == {} and confirmation(study) is None
    study.set_user_attr(StudyAttr.CONFIRMED, {})
    assert confirmation(study) is None


def test_pareto_and_the_report_read_the_old_records_as_before() -> None:
    from nas.search.results import pareto_records
    from nas.search.results.report import pareto_figure, trial_rows

    study = _study()
    records = {r["trial"]: r for r in pareto_records(study)}
    assert set(records) == {1, 3}
    one, three = records[1], records[3]
    assert (one["confirmed_throughput"], one["confirmed_low"], one["confirmed_high"]) == (
        3370.0941210247747,
        3312.226762970526,
        3425.4115669467,
    )
    assert (one["test_accuracy"], one["final_throughput"], one["final_epochs"]) == (0.9328, 3443.19, 15)
    assert three["confirmed_throughput"] == 9000.0
    assert (three["test_accuracy"], three["final_throughput"], three["final_epochs"]) == (None, None, None)

    rows = {r["trial"]: r for r in trial_rows(study)}
    assert rows[1]["test accuracy (final)"] == 0.9328 and rows[2]["test accuracy (final)"] == 0.5
    assert "test accuracy (final)" not in rows[0]
    traces = {trace.name: trace for trace in pareto_figure(study).data}
    confirmed_trace = traces["confirmed after the search (2)"]
    assert list(confirmed_trace.x) == [3370.0941210247747, 9000.0]
    assert list(confirmed_trace.text) == ["trial 1: confirmed 3,370 img/s", "trial 3: confirmed 9,000 img/s"]
    final_trace = traces["final-trained, test accuracy (2)"]
    assert list(final_trace.x) == [3443.19, 900.0] and list(final_trace.y) == [0.9328, 0.5]
    assert final_trace.text[0] == "trial 1: test accuracy 0.9328 after 15 epochs, 3,443 img/s"


def test_the_manifest_reads_the_old_records_as_before() -> None:
    from nas.search.results.export import _confirmed_throughput, _final_summary

    study = _study()
    summary = _final_summary(final_figures(study)["1"], False)
    trial = OLD_FINAL["trials"]["1"]
    keys = ["recipe", "test_accuracy", "keras_test_accuracy", "throughput", "throughput_low", "throughput_high"]
    assert summary == {k: trial[k] for k in [*keys, "device"]} and list(summary) == [*keys, "device"]
    assert _final_summary(final_figures(study)["1"], True) is None and _final_summary(None, False) is None
    figure = _confirmed_throughput(study, 1)
    expected = {k: OLD_CONFIRMED["trials"]["1"][k] for k in ("images_per_s", "low", "high", "trustworthy")}
    expected |= {k: OLD_CONFIRMED[k] for k in ("measured_at", "device", "batch_size", "rounds")}
    assert figure is not None and _stored(figure) == _stored(expected)
    assert _confirmed_throughput(study, 0) is None


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

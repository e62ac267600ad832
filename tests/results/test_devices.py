"""A study measured on several devices (hand-made trials, each storing the device it was
measured on): one front per device, never a comparison of two devices' figures, not by the
front, its noise-aware comparison, retention, halving nor the rungs; the confirmed figures,
measured together on one device, make one front."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import sqlalchemy as sa
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from nas.search.engine import mixed_devices, noise_aware_front, pareto_front
from nas.search.engine.early_stopping import competitors_at
from nas.search.engine.front import dominated_by, kept_figures
from nas.search.engine.retention import kept_on_finish, trials_to_keep
from nas.search.hardware import device_identity, device_labels
from nas.search.records import Confirmation, ConfirmedFigure
from nas.search.results import pareto_records, to_csv, to_json
from nas.storage.models import Base
from nas.storage.weights import WeightStore

optuna.logging.set_verbosity(optuna.logging.WARNING)

XEON = {"kind": "cpu", "name": "Xeon", "threads": 2, "tensorflow": "2.21.0", "host": "a"}
H100 = {"kind": "gpu", "name": "H100", "compute_capability": [9, 0], "tensorflow": "2.21.0", "host": "b"}
ON_XEON, ON_H100 = "CPU Xeon (2 threads)", "GPU H100"


def _trial(values: list[float], device: dict[str, Any] | None, interval: tuple[float, float] | None = None) -> Any:
    figure = {"images_per_s": values[-1], "low": interval[0], "high": interval[1]} if interval else {}
    attrs: dict[str, Any] = {"hardware": {"throughput": {"64": figure}}} if figure else {}
    if device is not None:
        attrs["device"] = device
    return create_trial(
        state=TrialState.COMPLETE,
        values=values,
        params={"x": values[0]},
        distributions={"x": FloatDistribution(0, 1e6)},
        user_attrs=attrs,
    )


def _study(*trials: Any, names: tuple[str, ...] = ("accuracy", "throughput")) -> optuna.Study:
    directions = {"accuracy": "maximize", "throughput": "maximize", "model_size": "minimize"}
    study = optuna.create_study(directions=[directions[n] for n in names])
    study.set_metric_names(list(names))
    study.add_trials(list(trials))
    return study


def _mixed() -> optuna.Study:
    return _study(
        _trial([0.90, 1000], XEON, (950, 1050)),  # 0: the Xeon's front
        _trial([0.80, 1500], XEON, (1450, 1550)),  # 1: the Xeon's front
        _trial([0.70, 900], XEON),  # 2: dominated on the Xeon
        _trial([0.95, 9000], H100, (8500, 9500)),  # 3: better than every Xeon trial by its values
        _trial([0.85, 800], {**XEON, "host": "other"}),  # 4: another machine of the same kind: dominated by 0
        _trial([0.60, 8900], H100, (8000, 9900)),  # 5: within noise of 3 on the H100
        _trial([0.50, 8700], XEON, (8600, 8800)),  # 6: the Xeon's fastest; its interval meets the H100's
    )


def test_a_device_is_its_description_less_the_host() -> None:
    assert device_identity(XEON) == device_identity({**XEON, "host": "elsewhere"})
    assert len({device_identity(XEON), device_identity({**XEON, "threads": 4}), device_identity(H100)}) == 3
    assert device_identity(None) is None and device_identity({}) is None
    older = {**XEON, "tensorflow": "2.20.0"}
    assert device_labels([XEON, older, H100]) == [
        f"{ON_XEON}, tensorflow 2.21.0",
        f"{ON_XEON}, tensorflow 2.20.0",
        ON_H100,
    ]


def test_a_faster_device_never_pushes_another_devices_trials_off_their_front() -> None:
    study = _mixed()
    assert [t.number for t in pareto_front(study)] == [0, 1, 3, 6]
    assert [t.number for t in noise_aware_front(study)] == [0, 1, 3, 5, 6]
    assert [(d.label, d.trials) for d in mixed_devices(study)] == [(ON_XEON, 5), (ON_H100, 2)]
    records = pareto_records(study)
    shown = [(r["trial"], r["device"], r["compared_on"], r["on_front"], r["overlaps"]) for r in records]
    assert shown == [
        (0, ON_XEON, ON_XEON, True, []),  # the Xeon's front first (its first member is trial 0), best accuracy first
        (1, ON_XEON, ON_XEON, True, []),
        (6, ON_XEON, ON_XEON, True, []),  # two devices' intervals never "overlap": they are not compared
        (3, ON_H100, ON_H100, True, [5]),
        (5, ON_H100, ON_H100, False, [3]),  # within noise on its own device; overlaps name its front only
    ]


def test_the_report_draws_one_front_line_per_device(tmp_path: Path) -> None:
    from nas.search.results.report import pareto_figure, pareto_png

    def members(trace: Any) -> list[int]:
        return [int(text.split("<br>")[0].removeprefix("trial ")) for text in trace.text]

    figure = pareto_figure(_mixed())
    lines = {t.name: members(t) for t in figure.data if t.mode == "lines+markers"}
    # No line joins the Xeon's trial 6 (8,700 img/s) to the H100's trial 3 (9,000).
    assert lines == {f"Pareto front on {ON_XEON} (3)": [0, 1, 6], f"Pareto front on {ON_H100} (1)": [3]}
    assert {t.name: members(t) for t in figure.data if t.mode == "markers"} == {
        "within noise of the front (1)": [5],
        "dominated (2)": [2, 4],
        "infeasible (0)": [],
    }
    pareto_png(_mixed(), str(tmp_path / "front.png"))  # the PNG draws each device's symbol
    assert (tmp_path / "front.png").read_bytes()[:4] == b"\x89PNG"


def test_json_and_csv_carry_the_device() -> None:
    records = pareto_records(_mixed())
    assert {(r["trial"], r["device"], r["compared_on"]) for r in json.loads(to_json(records))} == {
        (0, ON_XEON, ON_XEON),
        (1, ON_XEON, ON_XEON),
        (3, ON_H100, ON_H100),
        (5, ON_H100, ON_H100),
        (6, ON_XEON, ON_XEON),
    }
    header, first, *_ = to_csv(records).splitlines()
    columns = header.split(",")
    assert dict(zip(columns, first.split(","), strict=False))["compared_on"] == ON_XEON and "device" in columns


def test_objectives_no_device_measured_make_one_front() -> None:
    study = _study(
        _trial([0.90, 5e5], XEON), _trial([0.95, 4e5], H100), names=("accuracy", "model_size")
    )  # size and accuracy compare on any machine: the H100's trial dominates
    assert [t.number for t in pareto_front(study)] == [1] and mixed_devices(study) == []
    assert [(r["trial"], r["compared_on"]) for r in pareto_records(study)] == [(1, None)]


def test_a_confirmation_makes_one_front_of_the_devices() -> None:
    study = _mixed()
    figures = {  # measured again together on one machine: the H100's trials are slower here
        "0": ConfirmedFigure(1000.0, 980.0, 1020.0, 0.1, 0.01, True),
        "1": ConfirmedFigure(1200.0, 1180.0, 1220.0, 0.12, 0.01, True),
        "3": ConfirmedFigure(1300.0, 1280.0, 1320.0, 0.13, 0.01, True),
        "5": ConfirmedFigure(1350.0, 1250.0, 1450.0, 0.135, 0.05, True),
    }
    record = Confirmation("2026-12-07T00:00:00+00:00", "CPU Here (2 threads)", 64, 9, 10000.0, figures, "abc")
    study.set_user_attr(Confirmation.KEY, record.to_attr())
    assert [r["trial"] for r in pareto_records(study)] == [0, 1, 6, 3, 5]  # by default, one front per device still
    one = pareto_records(study, remeasured=True)
    # Trial 3 dominates 0 and 1 by the confirmed figures; 5 is less accurate and faster than 3.
    assert [(r["trial"], r["compared_on"], r["on_front"]) for r in one] == [
        (3, "CPU Here (2 threads)", True),
        (5, "CPU Here (2 threads)", True),
    ]
    assert one[0]["device"] == ON_H100 and one[0]["overlaps"] == [5]
    assert Confirmation.from_attr(record.to_attr()) == record

    # A later confirmation keeps these figures for the trials it does not measure on this
    # device only; an older record without an identity is matched by its label.
    assert kept_figures(record, "abc", "any") == figures and kept_figures(record, "xyz", "CPU Here (2 threads)") == {}
    older = Confirmation(record.measured_at, record.device, 64, 9, 10000.0, figures)
    assert kept_figures(older, "xyz", "CPU Here (2 threads)") == figures and kept_figures(older, "abc", "GPU") == {}
    assert kept_figures(None, "abc", "any") == {}


def test_retention_never_deletes_weights_across_devices(tmp_path: Path) -> None:
    study = _mixed()
    keep = trials_to_keep(study, pareto_front(study), 0)
    assert keep == {0, 1, 3, 6}
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    Base.metadata.create_all(engine)
    store = WeightStore(engine, tmp_path / "artifacts")
    for t in study.trials:
        source = tmp_path / f"{t.number}.keras"
        source.write_bytes(b"weights")
        store.save("s", t.number, source)
    assert store.retain("s", keep) == [2, 4, 5]  # as the trial loop does after each trial
    assert [w.trial for w in store.all("s") if w.deleted is None and w.path.is_file()] == [0, 1, 3, 6]

    # Judged before it is told, as retention judges it after: only its own device's trials count.
    trial = study.ask()
    assert kept_on_finish(study, trial.number, [0.85, 1200], {}, 0, XEON) is None
    assert kept_on_finish(study, trial.number, [0.85, 1200], {}, 0, H100) == "trial 3 dominated it when it finished"
    assert kept_on_finish(study, trial.number, [0.85, 950], {}, 0, XEON) == "trial 0 dominated it when it finished"


def test_the_top_k_by_a_measured_objective_is_per_device() -> None:
    study = optuna.create_study(directions=["maximize", "maximize"])
    study.set_metric_names(["throughput", "accuracy"])
    study.add_trials([_trial([1000, 0.9], XEON), _trial([900, 0.95], XEON), _trial([9000, 0.5], H100)])
    assert trials_to_keep(study, [], 1) == {0, 2}  # the fastest of each device
    trial = study.ask()
    # Dominated by trial 0, but the Xeon's second fastest (third of the study).
    assert kept_on_finish(study, trial.number, [950, 0.1], {}, 2, XEON) is None
    assert kept_on_finish(study, trial.number, [950, 0.1], {}, 1, XEON) == "trial 0 dominated it when it finished"


def test_halving_and_the_rungs_compare_a_trial_with_its_own_device_only() -> None:
    study = _mixed()
    point = {"accuracy": 0.55, "throughput": 2000.0}
    assert dominated_by(study, point, None, XEON) is None  # faster than every Xeon trial
    dominator = dominated_by(study, point, None, H100)
    assert dominator is not None and dominator.number == 3

    rungs = optuna.create_study(directions=["maximize", "maximize"])
    rungs.set_metric_names(["accuracy", "throughput"])
    for device, throughput in ((XEON, 1000.0), (H100, 9000.0), (XEON, 800.0)):
        trial = rungs.ask()
        trial.set_user_attr("device", device)
        trial.set_user_attr("rungs", {"0": {"epoch": 1, "accuracy": 0.5, "throughput": throughput}})
    directions = {"accuracy": "maximize", "throughput": "maximize"}
    assert sorted(competitors_at(rungs, 0, directions, XEON)) == [0, 2]
    assert sorted(competitors_at(rungs, 0, {"accuracy": "maximize"}, XEON)) == [0, 1, 2]  # accuracy alone: all

"""Successive halving over subnets (`search.supernet.halving`): a subnet is scored on a
validation subset first and stopped there (PRUNED, `screened: halving`) only when a complete
trial dominates even its best case, so it never drops a subnet the whole validation set would
put on the front (beyond the bound's stated error), and a subnet scored in full gets the
figures it gets without halving."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import yaml
from optuna.trial import TrialState

from nas.search.engine.front import dominated_by, noise_aware_front
from nas.search.strategies.supernet.halving import first_images, tail, upper_bound
from nas.search.strategies.supernet.settings import HalvingSpec

from ...helpers import run_cli
from .test_supernet import _space

Z = 3.5
LOG_FACTORIAL = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, 60_001)))])


def _hypergeometric(k: np.ndarray, total: int, correct: int, n: int) -> np.ndarray:
    """P(k of the n images sampled without replacement are correct), `correct` of `total` being so."""
    k = np.asarray(k, dtype=int)
    lf = LOG_FACTORIAL
    possible = (k >= max(0, n - (total - correct))) & (k <= min(n, correct))
    k = np.clip(k, max(0, n - (total - correct)), min(n, correct))
    log_p = (
        lf[correct]
        - lf[k]
        - lf[correct - k]
        + lf[total - correct]
        - lf[n - k]
        - lf[total - correct - n + k]
        - (lf[total] - lf[n] - lf[total - n])
    )
    return np.where(possible, np.exp(log_p), 0.0)


def test_the_bound_fails_no_more_often_than_it_says_on_every_validation_set() -> None:
    """The subset is a random sample without replacement, so its correct count is
    hypergeometric: for every full accuracy, the chance that the bound falls below it."""
    for total, n, z in ((600, 256, Z), (4097, 2048, Z), (10_000, 2048, Z), (60_000, 2048, Z), (10_000, 2048, 1.0)):
        bounds = np.array([upper_bound(k, n, z) for k in range(n + 1)])
        assert (np.diff(bounds) > 0).all() and bounds[-1] == 1.0
        for correct in np.unique(np.linspace(0, total, 301).astype(int)):
            # The subsets that say less than the whole set has: the fewest correct ones.
            wrong = int(np.searchsorted(bounds, correct / total))
            risk = _hypergeometric(np.arange(wrong), total, correct, n).sum()
            assert risk <= tail(z), (total, n, correct, risk)
    assert tail(Z) == pytest.approx(2.326e-4, rel=1e-3)


def _trial(accuracy: float, throughput: float, **constraints: float) -> optuna.trial.FrozenTrial:
    """A complete trial as the search stores it, its throughput's 95% interval +-5%."""
    figure = {"images_per_s": throughput, "low": throughput * 0.95, "high": throughput * 1.05}
    return optuna.trial.create_trial(
        values=[accuracy, throughput],
        user_attrs={"hardware": {"throughput": {"32": figure}}},
        constraints=constraints or None,
    )


def _study(*trials: optuna.trial.FrozenTrial) -> optuna.Study:
    study = optuna.create_study(directions=["maximize", "maximize"])
    study.set_metric_names(["accuracy", "throughput"])
    for t in trials:
        study.add_trial(t)
    return study


FRONT = [(0.95, 1000.0), (0.90, 2000.0), (0.75, 4000.0), (0.55, 8000.0)]
# Among them, throughputs just below a front member's interval: on the front only by the noise.
THROUGHPUTS = (500.0, 950.0, 1000.0, 1850.0, 1900.0, 2100.0, 3000.0, 3700.0, 4100.0, 7400.0, 9000.0)


def _beats(accuracy: float, throughput: float, other_accuracy: float, other_throughput: float) -> bool:
    low, other_high = throughput * 0.95, other_throughput * 1.05
    if throughput == other_throughput:  # one stored measurement (the same interval): compared as exact
        low, other_high = throughput, other_throughput
    return accuracy >= other_accuracy and low >= other_high and (accuracy > other_accuracy or low > other_high)


@pytest.mark.slow
def test_halving_never_drops_a_subnet_the_whole_set_puts_on_the_front_and_drops_hopeless_ones() -> None:
    """A study with a known front (and a dominated trial); candidates of every full accuracy
    and many throughputs. For each that the whole set would put on the front (noise_aware_front
    with it added as COMPLETE), every split of its correct images between the subset and the
    rest is tried: every split within z standard deviations of the expected one is kept, and
    all the splits dropped together are no likelier than the bound's stated error."""
    study = _study(*(_trial(a, t) for a, t in FRONT), _trial(0.82, 1500.0))
    total, n = 600, 256
    bounds = [upper_bound(k, n, Z) for k in range(n + 1)]
    on_front = hopeless = 0
    for correct in range(0, total + 1, 5):
        for throughput in THROUGHPUTS:
            interval = (throughput * 0.95, throughput * 1.05)
            accuracy = correct / total
            with_it = _study(*study.trials, _trial(accuracy, throughput))
            splits = np.arange(max(0, correct - (total - n)), min(n, correct) + 1)
            dropped = [
                k for k in splits if dominated_by(study, {"accuracy": bounds[k], "throughput": throughput}, interval)
            ]
            mean = n * accuracy
            sd = math.sqrt(n * accuracy * (1 - accuracy) * (total - n) / (total - 1))
            plausible = splits[np.abs(splits - mean) <= Z * sd]
            on = any(t.number == len(study.trials) for t in noise_aware_front(with_it))
            # The front as docs/hardware.md defines it, pair by pair: nothing at least as accurate
            # whose throughput's low end reaches this one's high end, better in one.
            assert on == (not any(_beats(a, t, accuracy, throughput) for a, t in [*FRONT, (0.82, 1500.0)]))
            if on:
                on_front += 1
                assert not set(plausible) & set(dropped), (correct, throughput, dropped)
                assert _hypergeometric(np.array(dropped), total, correct, n).sum() <= tail(Z), (correct, throughput)
            elif accuracy <= 0.5 and throughput <= 3000.0:  # far below the front, and slower
                hopeless += 1
                assert set(plausible) <= set(dropped), (correct, throughput)
    assert on_front >= 100 and hopeless >= 100  # the grid really tried both kinds


def test_only_feasible_complete_trials_dominate_and_each_objective_counts() -> None:
    study = _study(_trial(0.99, 90_000.0, max_params=0.5), _trial(0.90, 2000.0))  # the first infeasible
    # Dominated only by the infeasible trial: kept; beyond the feasible one's: dropped.
    assert dominated_by(study, {"accuracy": 0.95, "throughput": 3000.0}, (2900.0, 3100.0)) is None
    found = dominated_by(study, {"accuracy": 0.70, "throughput": 1000.0}, (900.0, 1100.0))
    assert found is not None and found.number == 1
    # Throughput intervals that overlap: not dominated beyond the noise.
    assert dominated_by(study, {"accuracy": 0.70, "throughput": 1850.0}, (1800.0, 1950.0)) is None
    # An objective not yet known counts at its best: nothing dominates it there.
    assert dominated_by(study, {"accuracy": 0.70}, None) is None


def test_the_subset_is_whole_batches_of_a_random_order_and_halving_needs_a_set_over_twice_it() -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 10_000)
    assert first_images(HalvingSpec(), labels, 256) == (2048, None)
    assert first_images(HalvingSpec(subset=2000), labels, 256) == (2048, None)
    assert first_images(HalvingSpec(enabled=False), labels, 256) == (0, None)
    assert first_images(HalvingSpec(), labels[:4096], 256) == (0, None)  # not larger than twice it
    assert first_images(HalvingSpec(), labels[:4097], 256)[0] == 2048
    # A set sorted by class (a validation_path read folder by folder) is no random sample.
    n, warning = first_images(HalvingSpec(), np.sort(labels), 256)
    assert n == 0 and warning is not None and "not a random sample" in warning


def _evaluation(halving: dict[str, Any]) -> Any:
    """A SupernetEvaluation on random images (600 validation ones) over an untrained supernet."""
    from nas.search.data import Dataset
    from nas.search.engine.keras_evaluation import KerasSetup
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space
    from nas.search.strategies.supernet.evaluation import SupernetEvaluation, TrainedSupernet
    from nas.search.strategies.supernet.network import Supernet
    from nas.search.strategies.supernet.train import SupernetTraining

    rng = np.random.default_rng(0)
    data = Dataset(
        rng.integers(0, 256, (64, 8, 8, 1), dtype=np.uint8),
        rng.integers(0, 10, 64).astype(np.int32),
        rng.integers(0, 256, (600, 8, 8, 1), dtype=np.uint8),
        rng.integers(0, 10, 600).astype(np.int32),
        tuple(str(i) for i in range(10)),
    )
    space = space_from_dict(_space(supernet={"epochs": 1, "calibration_batches": 2, "halving": halving}))
    elastic = elastic_space(space)
    supernet = Supernet(elastic.space.candidate(elastic.largest, num_classes=10, channels=1), seed=0)
    setup = KerasSetup(data, None, None, 1e9)  # type: ignore[arg-type]  # train needs no profiler
    evaluation = SupernetEvaluation(
        space, setup, lambda: TrainedSupernet(supernet, elastic, SupernetTraining(1)), seed=0
    )
    evaluation.start()
    return evaluation


def test_a_subnet_scored_in_full_gets_the_figures_it_gets_without_halving() -> None:
    from nas.search.engine.evaluation import TrialWork

    study = optuna.create_study(directions=["maximize", "maximize"])
    figures = []
    for halving in ({"subset": 200}, {"enabled": False}):
        evaluation = _evaluation(halving)
        assert evaluation.first == (256 if halving.get("enabled", True) else 0)
        trial = study.ask()
        elastic = evaluation.trained.elastic
        work = TrialWork(trial, elastic.space.candidate(elastic.middle(), num_classes=10, channels=1))
        bounds: list[dict[str, Any]] = []
        work.on_bound = lambda upper, record, seen=bounds: seen.append(record)
        evaluation.build(work)
        result = evaluation.train(work, lambda *_: None)
        figures.append((result.accuracy, result.loss))
        if bounds:  # the subset, then the rest: counted once each
            (record,) = bounds
            assert (record["images"], record["of"]) == (256, 600) and record["upper_bound"] >= record["accuracy"]
            assert record["correct"] <= round(result.accuracy * 600) <= record["correct"] + 344
    assert figures[0] == figures[1]  # the same batches, the same sums: bit for bit


def test_scoring_traced_gives_the_eager_figures_and_traces_each_subnet_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from nas.search.strategies.supernet.extract import extract
    from nas.search.training import Scored, scoring

    evaluation = _evaluation({"subset": 200})
    elastic, data = evaluation.trained.elastic, evaluation.data
    candidate = elastic.space.candidate(elastic.middle(), num_classes=10, channels=1)
    model = extract(evaluation.trained.supernet, candidate)
    traced: list[Any] = []
    original = scoring.traced_forward
    monkeypatch.setattr(scoring, "traced_forward", lambda m: traced.append(original(m)) or traced[-1])
    x, y = data.x_val, data.y_val
    scored = Scored().add(model, x[:256], y[:256]).add(model, x[256:], y[256:])
    probs = np.asarray(model(x.astype("float32") / 255.0, training=False))
    eager_loss = float(-np.log(np.clip(probs[np.arange(len(y)), y], 1e-7, 1.0)).mean())
    eager_accuracy = float((probs.argmax(axis=-1) == y).mean())
    loss, accuracy = scored.figures()
    # One image's near-tie may fall either way between batchings: at most one of 600.
    assert accuracy == pytest.approx(eager_accuracy, abs=1.01 / 600) and loss == pytest.approx(eager_loss, rel=1e-5)
    assert len(traced) == 1  # the subset, then the rest: one traced function for both


def test_a_dominated_bound_stops_the_scoring_there() -> None:
    from nas.search.engine.evaluation import TrialWork

    class Stop(Exception):
        pass

    def stop(upper: float, record: dict[str, Any]) -> None:
        raise Stop

    evaluation = _evaluation({"subset": 100})
    elastic = evaluation.trained.elastic
    trial = optuna.create_study().ask()
    work = TrialWork(trial, elastic.space.candidate(elastic.smallest, num_classes=10, channels=1))
    work.on_bound = stop
    evaluation.build(work)
    with pytest.raises(Stop):
        evaluation.train(work, lambda *_: None)
    # A quantized subnet is told its TFLite accuracy, which its subset does not bound: scored in full.
    work.candidate = dataclasses.replace(work.candidate, quantization="int8")
    assert evaluation.train(work, lambda *_: None).accuracy >= 0


def test_the_runner_stops_a_trial_whose_best_case_a_complete_trial_dominates_beyond_the_noise() -> None:
    """TrialRunner's side: the bound with the high end of the trial's throughput interval,
    against the study's complete trials; what it decided is kept on the trial."""
    from types import SimpleNamespace

    from nas.search.engine.evaluation import TrialWork
    from nas.search.engine.trial import TrialRunner, _Halved
    from nas.search.hardware.figures import HardwareCost, Throughput
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space

    space = space_from_dict(_space())
    evaluation = SimpleNamespace(num_classes=10, channels=1, delivery=None)
    runner = TrialRunner(space, evaluation, on_phase=lambda _: None)  # type: ignore[arg-type]
    candidate = elastic_space(space).space.candidate(elastic_space(space).largest, num_classes=10, channels=1)
    study = _study(_trial(0.90, 2000.0))  # its interval: 1900-2100

    def check(upper: float, low: float, high: float) -> dict[str, Any]:
        work = TrialWork(study.ask(), candidate)
        figure = Throughput((low + high) / 2, 0.01, True, 32, 1, (), 1, 0.1, low=low, high=high)
        work.cost = HardwareCost({32: figure}, None, {})
        stopped = False
        try:
            runner._at_bound(work, upper, {"upper_bound": upper})
        except _Halved:
            stopped = True
        attrs = study.trials[-1].user_attrs
        assert stopped == (attrs.get("screened") == "halving")
        return dict(attrs["halving"], stopped=stopped)

    assert check(0.85, 1400.0, 1600.0) == {"upper_bound": 0.85, "dominated_by": 0, "stopped": True}
    assert check(0.85, 1700.0, 1950.0)["stopped"] is False  # within the noise of trial 0's throughput
    assert check(0.91, 1400.0, 1600.0)["stopped"] is False  # its best case is more accurate
    assert check(0.90, 1400.0, 1600.0)["stopped"] is True  # as accurate at best, slower beyond the noise


def _digits_space(**halving: Any) -> dict[str, Any]:
    supernet = {
        "epochs": 2,
        "calibration_batches": 2,
        "fixed": {"learning_rate": 0.01},
        "finetune": {"epochs": 0},
        "halving": halving,
    }
    space = _space(supernet=supernet, sampler="random", trials=8)
    # All of the digits, 1079 of them for validation (more than twice a subset of 512), at 16
    # pixels; two stages (the sandwich step traces once), nothing after the search. Accuracy
    # alone: throughput intervals of 2 loaded cores are too wide for a search of 8 subnets to
    # dominate one reliably (the throughput side is tested above), and a subnet dominated on
    # accuracy is still stopped only by a complete trial more accurate than its best case.
    space["dataset"] = {"source": "digits", "image_size": 16, "validation_fraction": 0.6, "seed": 0}
    space["model"]["stages"] = space["model"]["stages"][:2]
    space["measure"] = {**space["measure"], "confirm": False}
    space["objectives"] = {"accuracy": "maximize"}
    return space


@pytest.mark.slow
def test_a_supernet_search_halves_dominated_subnets_and_scores_the_rest_in_full(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(_digits_space(subset=500, z=1.0)))
    storage = f"sqlite:///{tmp_path / 'nas.db'}"
    result = run_cli("search", str(path), "--storage", storage, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    study = optuna.load_study(study_name="elastic", storage=storage)
    total = study.user_attrs["dataset"]["validation"]
    assert f"each subnet is scored on 512 of the {total} validation images first" in result.stderr + result.stdout
    trials = study.get_trials(deepcopy=False)
    halved = [t for t in trials if t.state == TrialState.PRUNED]
    scored = [t for t in trials if t.state == TrialState.COMPLETE]
    assert halved and scored and len(trials) == 8, [(t.state, t.user_attrs.get("halving")) for t in trials]
    for t in halved:
        half = t.user_attrs["halving"]
        beaten_by = study.trials[half["dominated_by"]]
        assert t.user_attrs["screened"] == "halving" and t.values is None
        assert beaten_by.state == TrialState.COMPLETE and beaten_by.number < t.number  # a front existed
        assert beaten_by.values[0] > half["upper_bound"] == upper_bound(half["correct"], 512, 1.0)
        assert (half["images"], half["of"]) == (512, total) and half["correct"] / 512 == half["accuracy"]
        assert "accuracy" not in t.user_attrs["known_objectives"]  # never measured on the whole set
        assert "deploy" not in t.user_attrs and "history" not in t.user_attrs
        assert f"trial {t.number}: screened (halving): val acc {half['accuracy']:.3f} on 512 images" in result.stderr
    for t in scored:  # scored on the subset, then on the rest: the whole set's figure
        accuracy = t.values[0]
        assert t.user_attrs["history"]["val_accuracy"] == [accuracy]
        correct = round(accuracy * total)
        assert correct / total == accuracy
        half = t.user_attrs["halving"]
        assert half["dominated_by"] is None and half["correct"] <= correct <= half["correct"] + total - 512
        assert all(other.values[0] <= half["upper_bound"] for other in scored if other.number < t.number)
    assert f"{len(halved)} trial{'s' if len(halved) != 1 else ''} screened (halving: {len(halved)})" in result.stderr

    # `nas pareto` reads the study as any; `nas status` counts the halved trials apart.
    pareto = run_cli("pareto", "elastic", "--storage", storage, "--format", "json", cwd=tmp_path)
    assert pareto.returncode == 0, pareto.stderr
    records = json.loads(pareto.stdout)
    assert {r["trial"] for r in records if r["on_front"]} == {t.number for t in noise_aware_front(study)}
    shown = run_cli("pareto", "elastic", "--storage", storage, cwd=tmp_path)
    assert shown.returncode == 0 and f"screened (halving: {len(halved)})" in shown.stdout
    status = run_cli("status", "--storage", storage, "--format", "json", cwd=tmp_path)
    (row,) = json.loads(status.stdout)["studies"]
    assert row["screened"] == len(halved) and row["screened_by_kind"] == {"halving": len(halved)}
    wide = run_cli("status", "--storage", storage, "--wide", cwd=tmp_path)
    assert f"{len(halved)} ({len(halved)} halving)" in wide.stdout

    # Halving is not part of the study: switched off, the same study resumes (its supernet
    # loaded) and scores the next subnet on the whole set at once.
    path.write_text(yaml.safe_dump(_digits_space(enabled=False)))
    resumed = run_cli("search", str(path), "--storage", storage, "--trials", "9", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "supernet: trained (2 epochs), loaded from" in resumed.stderr + resumed.stdout
    last = optuna.load_study(study_name="elastic", storage=storage).trials[-1]
    assert last.state == TrialState.COMPLETE and "halving" not in last.user_attrs

"""Progressive shrinking (`search.supernet.schedule: progressive`) and the reference subnets
scored after each epoch (`reference_subnets: true`): the phase of an epoch is a function of
the epoch alone, so a training killed in a phase resumes in it and draws what an unbroken one
draws; the reference accuracies are kept in the study and shown live."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
import yaml

from ...helpers import run_cli
from .test_supernet import _space

ALL = ("kernel", "depth", "expansion", "width")


def _two_stages(**supernet: Any) -> dict[str, Any]:
    """test_supernet's space with two stages: the sandwich step traces once, in 6 s, not 10."""
    settings = {"epochs": 2, "calibration_batches": 2, "fixed": {"learning_rate": 0.01}, "finetune": {"epochs": 0}}
    space = _space(supernet={**settings, **supernet})
    space["model"]["stages"] = space["model"]["stages"][:2]
    space["measure"] = {**space["measure"], "confirm": False}
    return space


def test_the_phase_of_an_epoch_is_a_function_of_the_epochs_and_the_elastic_dimensions() -> None:
    from nas.search.strategies.supernet.elastic import phase_ranges, progressive_phases

    assert phase_ranges(progressive_phases(12, ALL)) == "largest 1-3, kernel 4-5, depth 6-7, expansion 8-9, width 10-12"
    assert progressive_phases(5, ALL) == ["largest", *ALL]
    # Where the epochs are too few, the largest phase goes first, then the first dimensions
    # open together with the next; everything is open in the last epoch.
    assert progressive_phases(4, ALL) == list(ALL)
    assert progressive_phases(2, ALL) == ["expansion", "width"]
    assert progressive_phases(1, ALL) == ["width"]
    assert phase_ranges(progressive_phases(8, ALL)) == "largest 1-2, kernel 3, depth 4, expansion 5-6, width 7-8"
    # A dimension the space does not make elastic has no phase.
    assert progressive_phases(6, ("depth", "width")) == ["largest", "depth", "depth", "width", "width", "width"]
    for epochs in range(1, 30):
        for count in range(1, 5):
            for dimensions in itertools.combinations(ALL, count):
                phases = progressive_phases(epochs, dimensions)
                order = ["largest", *dimensions]
                assert len(phases) == epochs and phases[-1] == dimensions[-1]
                assert phases == sorted(phases, key=order.index)  # phases never go back
                if epochs > count:  # every phase gets an epoch, the largest a quarter
                    assert set(phases) == set(order) and phases.count("largest") == max(1, epochs // 4)
                assert progressive_phases(epochs, dimensions) == phases


def test_a_phases_subnets_vary_only_the_dimensions_opened_so_far() -> None:
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import dimension_of, elastic_space

    elastic = elastic_space(space_from_dict(_space()))
    assert elastic.dimensions() == ALL and elastic.opened("largest") == () and elastic.opened("depth") == ALL[:2]
    rng = np.random.default_rng(0)
    for phase in ("largest", *ALL):
        opened = elastic.opened(phase)
        smallest = elastic.smallest_within(opened)
        drawn = [elastic.random_params(rng, elastic.closed(opened)) for _ in range(40)]
        for name in elastic.elastic:
            varied = {d[name] for d in drawn}
            if dimension_of(name) in opened:
                assert smallest[name] == elastic.smallest[name] and len(varied) > 1, (phase, name)
            else:
                assert smallest[name] == elastic.largest[name] and varied == {elastic.largest[name]}, (phase, name)
    # Nothing kept: the sandwich's draw, value for value.
    assert elastic.random_params(np.random.default_rng(5), {}) == elastic.random_params(np.random.default_rng(5))
    # The middle subnet: medians, the two of an even count alternating.
    assert elastic.middle() == {
        "width_multiplier": 1.0,
        "stage1.depth": 1,
        "stage1.kernel": 5,
        "stage1.expansion": 3.0,
        "stage1.se": True,
        "stage2.depth": 2,
        "stage2.kernel": 3,
    }


class _Killed(Exception):
    pass


def _train(space: Any, data: Any, path: Path, drawn: list[bytes], kill_after: int = 0) -> Any:
    """A fresh process's supernet, trained from `path` (where it exists) as prepare_supernet
    does; `drawn` gets each step's subnet masks; killed after epoch `kill_after`'s checkpoint."""
    from nas.search.strategies.supernet.elastic import elastic_space
    from nas.search.strategies.supernet.network import Supernet
    from nas.search.strategies.supernet.train import SupernetTraining, train_supernet

    elastic = elastic_space(space)
    settings = space.spec.search.supernet
    largest = elastic.space.candidate(elastic.largest, num_classes=data.num_classes, channels=data.channels)
    supernet = Supernet(largest, seed=0)
    stacked = supernet.stacked_masks

    def recorded(plans: list[Any]) -> dict[str, np.ndarray]:
        masks = stacked(plans)
        drawn.append(b"".join(masks[k].tobytes() for k in sorted(masks)))
        return masks

    supernet.stacked_masks = recorded  # type: ignore[method-assign]

    def on_epoch(epoch: int, epochs: int, figures: dict[str, Any]) -> None:
        if epoch == kill_after:
            raise _Killed

    training = SupernetTraining(settings.epochs)
    try:
        train_supernet(supernet, elastic, data, training, path, seed=0, on_epoch=on_epoch, schedule=settings.schedule)
    except _Killed:
        return None
    return supernet


@pytest.mark.slow
def test_a_progressive_training_killed_mid_phase_resumes_through_the_next_as_an_unbroken_one(tmp_path: Path) -> None:
    from nas.search.data import load_dataset
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.train import checkpoint_progress

    # Only kernel and depth elastic: 5 epochs are largest 1, kernel 2-3, depth 4-5.
    document = _two_stages(epochs=5, schedule="progressive")
    model = document["model"]
    model["width_multiplier"] = 1.0
    model["stages"][1].update(expansion=6, se=True)
    document["dataset"]["subset"] = 150
    space = space_from_dict(document)
    data = load_dataset(space.spec.dataset)

    unbroken: list[bytes] = []
    whole = _train(space, data, tmp_path / "whole.npz", unbroken)
    whole_history = checkpoint_progress(tmp_path / "whole.npz").history
    phases = [h["phase"] for h in whole_history]
    assert phases == ["largest"] + ["kernel"] * 2 + ["depth"] * 2

    broken: list[bytes] = []
    path = tmp_path / "broken.npz"
    assert _train(space, data, path, broken, kill_after=2) is None  # in the kernel phase
    assert [h["phase"] for h in checkpoint_progress(path).history] == phases[:2]
    resumed = _train(space, data, path, broken)  # resumed in it, then through the depth phase
    history = checkpoint_progress(path).history

    # The same subnets, step by step, and the same training.
    diverged = [step for step, (a, b) in enumerate(zip(broken, unbroken, strict=True)) if a != b]
    assert not diverged, f"other subnets drawn from step {diverged[0]} on"
    assert len(set(unbroken)) > 3  # the phases really drew different subnets
    same = [{k: v for k, v in h.items() if k != "seconds"} for h in history]
    assert same == [{k: v for k, v in h.items() if k != "seconds"} for h in whole_history]
    for key, value in whole.get_state().items():
        np.testing.assert_allclose(resumed.get_state()[key], value, atol=1e-6, err_msg=key)


def test_space_show_and_the_fingerprint_know_the_schedule(tmp_path: Path) -> None:
    from nas.errors import NasError
    from nas.search.engine.study import open_study
    from nas.search.space import space_from_dict

    path = tmp_path / "space.yaml"
    settings = {"epochs": 12, "schedule": "progressive", "reference_subnets": True}
    path.write_text(yaml.safe_dump(_space(supernet=settings)))
    result = run_cli("space", "show", str(path), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert (
        "Search strategy: supernet, 12 epochs of progressive shrinking (epochs by phase: largest 1-3, kernel 4-5, "
        "depth 6-7, expansion 8-9, width 10-12), 4 subnets per step distilled from the largest, smallest, middle "
        "and largest subnet scored after each epoch," in text
    )

    storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'nas.db'}")
    sandwich = {"epochs": 3, "calibration_batches": 2}
    open_study(space_from_dict(_space(supernet=sandwich)), storage, "sandwich")
    # Scoring the reference subnets changes no weight: it may change on the same study.
    open_study(space_from_dict(_space(supernet={**sandwich, "reference_subnets": True})), storage, "sandwich")
    progressive = space_from_dict(_space(supernet={**sandwich, "schedule": "progressive"}))
    with pytest.raises(NasError, match="created from a different space"):
        open_study(progressive, storage, "sandwich")
    open_study(progressive, storage, "progressive")
    with pytest.raises(NasError, match="created from a different space"):
        open_study(space_from_dict(_space(supernet=sandwich)), storage, "progressive")


@pytest.mark.slow
def test_the_reference_subnets_are_scored_each_epoch_kept_in_the_study_and_shown_live(tmp_path: Path) -> None:
    from nas.search.results.report import build_report

    path = tmp_path / "space.yaml"
    space = _two_stages(schedule="progressive", reference_subnets=True)
    space["search"]["trials"] = 1
    path.write_text(yaml.safe_dump(space))
    storage = f"sqlite:///{tmp_path / 'nas.db'}"
    result = run_cli("search", str(path), "--storage", storage, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    study = optuna.load_study(study_name="elastic", storage=storage)
    history = study.user_attrs["supernet"]["history"]
    # Two epochs, four dimensions: kernel and depth open with expansion, then width.
    assert [h["phase"] for h in history] == ["expansion", "width"]
    for epoch, h in enumerate(history, 1):
        scored = h["reference_accuracy"]
        assert list(scored) == ["smallest", "middle", "largest"] and all(0 <= v <= 1 for v in scored.values())
        line = next(line for line in result.stderr.splitlines() if f"supernet: epoch {epoch}/2 (" in line)
        assert f"({h['phase']} phase)" in line
        assert "validation accuracy " + ", ".join(f"{k} {v:.3f}" for k, v in scored.items()) in line, line
    assert "progressive shrinking, epochs by phase: expansion 1, width 2;" in result.stderr
    assert "Supernet training: reference subnets" in build_report(study, "test")


@pytest.mark.slow
def test_the_reference_subnets_score_as_a_trial_scores_its_subnet_epoch_after_epoch() -> None:
    """Each reference model is built once and inherits the weights again each epoch: it scores
    what a subnet extracted afresh, as a trial's is, scores."""
    from nas.search.data import load_dataset
    from nas.search.strategies.supernet.evaluation import ReferenceSubnets, calibration_batches, evaluate
    from nas.search.strategies.supernet.extract import extract, recalibrate

    from .test_supernet import _randomised_supernet

    elastic, supernet = _randomised_supernet()
    data = load_dataset(elastic.space.spec.dataset)
    score = ReferenceSubnets(elastic, data, calibration=2)
    batches = calibration_batches(data, supernet.candidate.batch_size, 2)
    subnets = {"smallest": elastic.smallest, "middle": elastic.middle(), "largest": elastic.largest}
    rng = np.random.default_rng(4)
    seen = []
    for _ in range(2):  # the second call reuses the models, on other weights
        scored = score(supernet)
        seen.append(scored)
        for name, params in subnets.items():
            model = extract(supernet, elastic.space.candidate(params, num_classes=10, channels=1))
            recalibrate(model, batches)
            assert scored[name] == round(evaluate(model, data)[1], 5), name
        for _, w in supernet.variables():
            if w.trainable:
                w.assign(np.asarray(w.numpy()) + rng.normal(0, 0.3, w.shape).astype("float32"))
    assert seen[0] != seen[1]

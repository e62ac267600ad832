"""benchmarks/fashion_supernet.py: the subnets it trains stand-alone are spread over the
space's FLOPs, its rank correlations count only subnets every figure exists for, its space is the
preset's with the supernet strategy, and its final training takes the preset's recipe and seeds."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from .package import PACKAGE, benchmark
from .test_results_map import runnable, stamp_problems


def test_the_subnets_are_distinct_and_spread_from_the_cheapest_to_the_costliest() -> None:
    from nas.search.space import space_from_dict
    from nas.search.strategies.supernet.elastic import elastic_space

    module = benchmark("fashion_supernet")
    elastic = elastic_space(space_from_dict(module.space_document()))
    subnets = module.spread_subnets(elastic, 10)
    flops = [s["flops"] for s in subnets]
    assert len({json.dumps(s, sort_keys=True) for s in subnets}) == 10
    assert flops == sorted(flops) and flops[-1] > 10 * flops[0]
    assert module.spread_subnets(elastic, 10) == subnets  # drawn with a fixed seed


def test_correlations_rank_against_the_mean_of_the_seeds_over_the_subnets_with_every_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = benchmark("fashion_supernet")
    monkeypatch.setattr(module, "HERE", tmp_path)
    truth = [0.80, 0.82, 0.85, 0.87, 0.90]
    runs = [{"subnet": i, "seed": s, "accuracy": a + 0.001 * s} for i, a in enumerate(truth) for s in (0, 1)]
    runs.append({"subnet": 5, "seed": 0, "accuracy": 0.5})  # one seed only: left out
    flops = [{"flops": f} for f in (5, 4, 3, 2, 1, 0)]  # the opposite order of the accuracies
    (tmp_path / "standalone.json").write_text(json.dumps({"runs": runs, "subnets": flops}))
    # Inherited for 4 of the 5: subnet 0 first, the other three in the right order (tau 0 in all).
    ranked: dict[str, dict[str, float]] = {str(i): {"inherited": a} for i, a in enumerate([0.9, 0.1, 0.2, 0.3])}
    for i in (1, 2, 3):  # fine-tuned so far: 3 of them, in the opposite order
        ranked[str(i)]["finetuned"] = -truth[i]
    (tmp_path / "ranking.json").write_text(json.dumps({"subnets": ranked}))
    out = module.correlations("python -m benchmarks.fashion_supernet ranking --minutes 30")
    assert out["command"] == "python -m benchmarks.fashion_supernet ranking --minutes 30"
    assert out["commit"] == benchmark("stamps").commit() and not stamp_problems(out, runnable())
    assert out["subnets_with_both_seeds"] == 5
    assert (out["inherited_subnets"], out["finetuned_subnets"]) == (4, 3)
    assert out["seeds_against_each_other"]["kendall"] == 1.0
    assert out["inherited"]["kendall"] == 0.0
    assert out["finetuned"] == {"spearman": -1.0, "kendall": -1.0}
    assert out["inherited_where_finetuned"] == {"spearman": 1.0, "kendall": 1.0}  # subnets 1-3 only
    assert out["flops"] == {"spearman": -1.0, "kendall": -1.0}
    assert json.loads((tmp_path / "correlations.json").read_text()) == out


def test_the_final_training_takes_both_ends_of_the_front_and_spreads_the_rest() -> None:
    module = benchmark("fashion_supernet")
    front = [(n, 0.95 - n / 100) for n in (7, 3, 0, 12, 5, 9, 1, 20, 14, 4)]  # accuracy falls with n
    ordered = [0, 1, 3, 4, 5, 7, 9, 12, 14, 20]
    assert module.spread_front(front, 4) == [0, 4, 9, 20]
    picked = module.spread_front(front, 8)
    assert picked[0] == 0 and picked[-1] == 20 and len(set(picked)) == 8
    assert picked == sorted(picked, key=ordered.index)  # most accurate first
    assert module.spread_front(front[:3], 8) == [0, 3, 7]


def test_a_search_piece_adds_its_command_to_the_progress_log_and_stamps_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = benchmark("fashion_supernet")
    committed = json.loads((PACKAGE / "fashion-runs" / "supernet" / "progress.json").read_text())
    (tmp_path / "progress.json").write_text(json.dumps(committed))
    monkeypatch.setattr(module, "HERE", tmp_path)
    monkeypatch.setattr(module, "run_nas", lambda *_, **__: 0)  # no search: the log only
    command = "python -m benchmarks.fashion_supernet trials 2 --minutes 1"
    module._search("trials", 2, 1.0, command)
    log = json.loads((tmp_path / "progress.json").read_text())
    assert log["command"] == [*committed["command"], command]
    assert log["commit"] == benchmark("stamps").commit() == log["chunks"][-1]["commit"]
    assert log["chunks"][:-1] == committed["chunks"] and log["stamped_from"] == committed["stamped_from"]
    assert "fashion_trials_s2" in log["searches"] and not stamp_problems(log, runnable())


def test_each_piece_records_its_command_with_the_arguments_it_ran() -> None:
    module = benchmark("fashion_supernet")

    def piece(piece: str, what: str | None = None, minutes: float = 55.0, epochs: int = 1, **more: Any) -> str:
        options = {"seeds": 1, "networks": module.NETWORKS, "trials": None} | more
        return str(
            module.command_line(
                argparse.Namespace(piece=piece, what=what, minutes=minutes, finetune_epochs=epochs, **options)
            )
        )

    assert piece("search", "0", 64) == "python -m benchmarks.fashion_supernet search 0 --minutes 64"
    assert piece("train", "fashion_trials_s1") == "python -m benchmarks.fashion_supernet train fashion_trials_s1"
    assert (
        piece("train", "fashion_supernet_s0", seeds=3, trials=[5, 12])
        == "python -m benchmarks.fashion_supernet train fashion_supernet_s0 --seeds 3 --trials 5,12"
    )
    assert piece("train", "s", networks=8) == "python -m benchmarks.fashion_supernet train s --networks 8"
    assert piece("standalone") == "python -m benchmarks.fashion_supernet standalone"
    assert piece("ranking", epochs=0) == "python -m benchmarks.fashion_supernet ranking --finetune-epochs 0"


def test_the_supernet_searches_the_preset_itself_and_writes_the_file_only_when_it_searches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = benchmark("fashion_supernet")
    monkeypatch.setattr(module, "HERE", tmp_path)
    monkeypatch.setattr(module, "SPACE_FILE", tmp_path / "space.yaml")
    monkeypatch.setattr(module, "run_nas", lambda *_, **__: 0)
    preset = yaml.safe_load((PACKAGE.parent / "spaces" / "fashion_mnist.yaml").read_text())
    document = module.space_document()
    assert not (tmp_path / "space.yaml").exists()  # a reader (the tests, `standalone`) writes nothing
    # The preset's model, block types searched per stage, and its final recipe; the supernet's settings.
    assert document["model"] == preset["model"] and document["final"] == preset["final"]
    assert {"choice": ["mbconv", "fused"]} in [stage.get("block") for stage in document["model"]["stages"]]
    assert document["search"]["strategy"] == "supernet" and document["search"]["supernet"]["epochs"] == "auto"
    module._search("supernet", 0, 1.0, "python -m benchmarks.fashion_supernet search 0 --minutes 1")
    assert yaml.safe_load((tmp_path / "space.yaml").read_text()) == document  # the record of what it searched


def test_the_final_training_spreads_along_the_front_with_seeds_and_the_preset_s_recipe_now(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import optuna

    from nas.search.records import StudyAttr

    module = benchmark("fashion_supernet")
    database = tmp_path / "supernet.db"
    for name, value in (("HERE", tmp_path), ("SPACE_FILE", tmp_path / "space.yaml"), ("DATABASE", database)):
        monkeypatch.setattr(module, name, value)
    found = optuna.create_study(
        study_name="fashion_supernet_s0", storage=f"sqlite:///{database}", directions=["maximize"] * 2
    )
    for accuracy, speed in ((0.95, 1000.0), (0.94, 2000.0), (0.93, 3000.0), (0.92, 4000.0), (0.91, 5000.0)):
        found.add_trial(optuna.trial.create_trial(values=[accuracy, speed]))
    old = module.space_document() | {"final": {"epochs": 2}}  # searched before the recipe changed
    found.set_user_attr(StudyAttr.SPACE_DOCUMENT, old)
    module._write_space(old)
    asked: list[list[str]] = []
    monkeypatch.setattr(module, "run_nas", lambda args, *_, **__: asked.append(args) or 0)
    module.train(
        "fashion_supernet_s0", 1.0, "python -m benchmarks.fashion_supernet train fashion_supernet_s0", networks=3
    )
    module.train(
        "fashion_supernet_s0", 1.0, "python -m benchmarks.fashion_supernet train s --seeds 3", seeds=3, trials=[1]
    )
    assert asked == [
        ["train", "fashion_supernet_s0", "--trials", "0,2,4", "--seeds", "1"],  # both ends and the middle
        ["train", "fashion_supernet_s0", "--trials", "1", "--seeds", "3"],
    ]
    final = yaml.safe_load((PACKAGE.parent / "spaces" / "fashion_mnist.yaml").read_text())["final"]
    stored = optuna.load_study(study_name="fashion_supernet_s0", storage=f"sqlite:///{database}").user_attrs
    assert stored[StudyAttr.SPACE_DOCUMENT] == old | {"final": final}
    assert yaml.safe_load((tmp_path / "space.yaml").read_text()) == old | {"final": final}
    log = json.loads((tmp_path / "progress.json").read_text())
    assert [c["piece"] for c in log["chunks"]] == ["train fashion_supernet_s0"] * 2

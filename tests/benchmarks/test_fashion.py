"""benchmarks/fashion.py: the table it prints (the seeds' mean and spread, who dominates each
reference and who ties with it), the references it builds (keras.applications with fresh
weights for 32x32 grayscale, 10 classes; the published 2-conv network and ResNet-20 at 28x28)
and their seeds' bookkeeping, the round each piece writes, and the commands it records."""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .package import PACKAGE, benchmark
from .test_results_map import runnable, stamp_problems


def _row(name: str, kind: str, accuracy: float, low: float, high: float, **more: Any) -> dict[str, Any]:
    middle = (low + high) / 2
    return {
        "name": name,
        "kind": kind,
        "test_accuracy": accuracy,
        "test_accuracy_sd": None,
        "seeds": 1,
        "images_per_s": middle,
        "low": low,
        "high": high,
        "params": 1000,
        **more,
    }


def test_a_reference_is_compared_by_the_better_mean_of_its_two_scorings() -> None:
    # nas train scores with the moving BatchNorm statistics; a reference whose re-estimated
    # figure is lower (the 2-conv network) keeps its moving one. Round 1's files: one seed.
    score = benchmark("fashion_references").reference_score
    one = score({"test_accuracy": 0.9305, "test_accuracy_moving_statistics": 0.9332})
    assert one == {"test_accuracy": 0.9332, "test_accuracy_sd": None, "seeds": 1}
    assert score({"test_accuracy": 0.9065, "test_accuracy_moving_statistics": 0.9003})["test_accuracy"] == 0.9065
    # With seeds: the scoring whose mean is higher, all its seeds' (not the better one per seed).
    runs = [
        {"seed": 0, "test_accuracy": 0.930, "test_accuracy_moving_statistics": 0.934},
        {"seed": 1, "test_accuracy": 0.932, "test_accuracy_moving_statistics": 0.926},
        {"seed": 2, "test_accuracy": 0.931, "test_accuracy_moving_statistics": 0.927},
    ]
    assert score({"seeds": runs}) == {"test_accuracy": 0.931, "test_accuracy_sd": 0.001, "seeds": 3}


def test_the_table_lists_every_network_most_accurate_first_with_its_seeds_and_who_dominates_it() -> None:
    report = benchmark("fashion_report")
    nas_row = _row("trials s0 trial 1", "front", 0.93, 1200, 1400, front="trials s0", test_accuracy_sd=0.0012, seeds=3)
    subnet = _row("supernet s0 trial 240", "front", 0.92, 1200, 1400, front="supernet s0")
    dominators = ["trials s0 trial 1", "supernet s0 trial 240", "trials s0 trial 7"]
    beaten = _row("mobilenet_v2_0.35", "reference", 0.90, 900, 1100, dominated_by=dominators, ties=[])
    standing = _row("efficientnet_b0", "reference", 0.94, 100, 120, dominated_by=[], ties=["supernet s1 trial 3"])
    text = report.markdown(
        {"networks": [beaten, nas_row, standing, subnet], "published": {"human": 0.835}, "published_source": "README"}
    )
    lines = text.splitlines()
    assert lines[0].startswith("| network | test accuracy (mean ± sd) | seeds |")
    assert [line.split(" | ")[0] for line in lines[2:6]] == [
        "| efficientnet_b0",
        "| trials s0 trial 1",
        "| supernet s0 trial 240",
        "| mobilenet_v2_0.35",
    ]
    assert lines[2].endswith("| none | supernet s1 3 |")
    assert lines[3].startswith("| trials s0 trial 1 | 0.9300 ± 0.0012 | 3 | 1,300 (1,200-1,400) |")
    assert lines[3].endswith("| - | - |") and lines[4].endswith("| - | - |")
    assert "| 0.9200 | 1 |" in lines[4]  # one seed: no spread
    # Who dominates a reference, grouped by front.
    assert lines[5].endswith("| trials s0 1, 7; supernet s0 240 | - |")
    assert "human 0.835" in lines[-1]


def test_the_seeds_the_noise_rule_wants_are_asked_of_each_network_s_own_piece(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    report, state = benchmark("fashion_report"), benchmark("fashion_state")
    fronts = [
        state.Front("trials s0", state.STUDY, 0, state.DATABASE),
        state.Front("supernet s0", "fashion_supernet_s0", 0, state.SUPERNET_DATABASE),
        state.Front("trials s1", "fashion_trials_s1", 1, state.SUPERNET_DATABASE),
    ]
    monkeypatch.setattr(report, "round_studies", lambda _: fronts)
    # As wanted_seeds gives them: sorted by name, so trial 12 before trial 3.
    wanted = {
        "resnet20": 1,
        "supernet s0 trial 5": 1,
        "trials s0 trial 12": 1,
        "trials s0 trial 3": 2,
        "trials s1 trial 4": 1,
    }
    assert report.seed_commands(wanted) == [
        "python -m benchmarks.fashion train --seeds 3 --trials 3,12",
        "python -m benchmarks.fashion_supernet train fashion_supernet_s0 --seeds 3 --trials 5",
        "python -m benchmarks.fashion_supernet train fashion_trials_s1 --seeds 3 --trials 4",
        "python -m benchmarks.fashion reference resnet20 --seeds 3",
    ]


def test_a_reference_s_seeds_are_kept_one_by_one_with_their_mean_and_spread() -> None:
    references = benchmark("fashion_references")
    recipe = {"epochs": 15, "seed": 0, "reference": "resnet20"}

    def run(seed: int, accuracy: float, moving: float) -> dict[str, Any]:
        figures = {"test_accuracy": accuracy, "test_accuracy_moving_statistics": moving, "history": {"loss": [1.0]}}
        return {"seed": seed, "name": "resnet20", "params": 270810, **figures, "commit": "abc1234"}

    assert references.seeds_to_train(None, recipe, 3) == [0, 1, 2]
    record = references.with_seed(
        None, recipe, run(0, 0.94, 0.93), "python -m benchmarks.fashion reference all", "aaa1111"
    )
    assert references.seeds_to_train(record, recipe, 1) == [] and references.seeds_to_train(record, recipe, 3) == [1, 2]
    assert record["test_accuracy"] == 0.94 and record["test_accuracy_sd"] is None
    # A later piece (resumed, other command) adds seed 2, then seed 1: in seed order, each once.
    command = "python -m benchmarks.fashion reference resnet20 --seeds 3"
    record = references.with_seed(record, recipe, run(2, 0.95, 0.94), command, "bbb2222")
    record = references.with_seed(record, recipe, run(1, 0.96, 0.95), command, "ccc3333")
    assert [r["seed"] for r in record["seeds"]] == [0, 1, 2] and references.seeds_to_train(record, recipe, 3) == []
    assert record["test_accuracy"] == 0.95 and record["test_accuracy_sd"] == 0.01
    assert record["test_accuracy_moving_statistics"] == 0.94 and record["test_accuracy_moving_statistics_sd"] == 0.01
    assert (record["name"], record["params"], record["recipe"]) == ("resnet20", 270810, recipe)
    assert "name" not in record["seeds"][0] and record["seeds"][0]["history"] == {"loss": [1.0]}
    assert (
        record["command"] == ["python -m benchmarks.fashion reference all", command] and record["commit"] == "ccc3333"
    )
    assert not stamp_problems(record, runnable())
    # The same seed trained again replaces its figures; another recipe starts afresh.
    again = references.with_seed(record, recipe, run(1, 0.95, 0.95), command, "ddd4444")
    assert [r["test_accuracy"] for r in again["seeds"]] == [0.94, 0.95, 0.95]
    longer = recipe | {"epochs": 30}
    assert references.seeds_to_train(record, longer, 2) == [0, 1]
    fresh = references.with_seed(record, longer, run(0, 0.955, 0.95), command, "eee5555")
    assert [r["seed"] for r in fresh["seeds"]] == [0] and fresh["command"] == [command]


def test_a_published_line_s_label_moves_to_the_right_end_off_a_marker_and_point_labels_avoid_it() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    report = benchmark("fashion_report")
    fig, ax = plt.subplots(figsize=(9, 5.5))
    ax.set_xscale("log")
    ax.set_xlim(1000, 20000)
    ax.set_ylim(0.87, 0.97)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    # A marker at the left end of the 0.934 line, just above it where its label would go.
    under = report._box_around(ax.transData.transform((1080, 0.9345)), 5)
    taken = [under]
    report._label_published(ax, renderer, taken)
    placed = {t.get_text(): t.get_horizontalalignment() for t in ax.texts}
    published = {f"{label} {value:.3f}" for label, value in report.PUBLISHED.items() if value > 0.9}
    assert set(placed) == published
    moved = [text for text, align in placed.items() if align == "right"]
    assert moved == ["2 Conv + pooling + BatchNorm 0.934"], placed
    assert len(taken) == 1 + len(published)  # the labels' boxes, for the points' labels to avoid
    # A point right under the moved label: its name goes to a side that covers nothing taken.
    report._label_points(ax, renderer, [("s#1", 15000, 0.9335)], taken)
    box = report._corners(ax.texts[-1].get_window_extent(renderer))
    assert not any(report._overlap(box, other) for other in taken[:-1])
    plt.close(fig)


@pytest.mark.parametrize("name", ["mobilenet_v2_0.35", "mobilenet_v3_small_minimalistic", "two_conv_bn", "resnet20"])
def test_the_references_take_the_benchmark_s_images_and_give_ten_classes(name: str) -> None:
    from nas.search import runtime

    runtime.import_tensorflow()
    build, size = benchmark("fashion_references").REFERENCES[name]
    model = build()
    assert tuple(model.input_shape[1:]) == (size, size, 1) and model.output_shape[-1] == 10
    assert size == (28 if name in ("two_conv_bn", "resnet20") else 32)


def test_a_piece_stops_its_nas_process_even_when_started_with_sigint_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A piece started by `nohup ... &` from a script inherits SIGINT ignored; the process it
    # runs must still stop at the piece's SIGINT (not wait out the grace and be killed).
    fashion = benchmark("fashion")
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import time; time.sleep(120)'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(fashion.sys, "executable", str(fake))
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        started = time.monotonic()
        code = fashion.run_nas(["train", "nothing"], 1.0, tmp_path / "artifacts", database=tmp_path / "x.db")
    finally:
        signal.signal(signal.SIGINT, previous)
    # Python ends an uncaught KeyboardInterrupt by SIGINT (nas catches it: 130); not SIGKILL's
    # -9 after the grace.
    assert code == -signal.SIGINT
    assert time.monotonic() - started < 30


def test_a_piece_adds_its_command_to_the_progress_log_once_and_stamps_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fashion, state = benchmark("fashion"), benchmark("fashion_state")
    committed = json.loads((PACKAGE / "fashion-runs" / "progress.json").read_text())  # round 1's log
    (tmp_path / "progress.json").write_text(json.dumps(committed))
    monkeypatch.setattr(state, "WORK", tmp_path)
    trained: list[list[str]] = []
    monkeypatch.setattr(fashion, "run_nas", lambda args, *_, **__: trained.append(args) or 0)  # no training
    monkeypatch.setattr(fashion, "front_members", lambda networks: [0, 3, 9, 12][:networks])
    monkeypatch.setattr(fashion, "sync_final", lambda *_: False)
    fashion.train(1.0, "python -m benchmarks.fashion train --minutes 1")
    fashion.train(1.0, "python -m benchmarks.fashion train --minutes 50")  # listed already: not again
    fashion.train(1.0, "python -m benchmarks.fashion train --minutes 1", seeds=3, trials=[9])
    fashion.train(1.0, "python -m benchmarks.fashion train --minutes 1", networks=2)
    assert trained[0] == ["train", state.STUDY, "--trials", "0,3,9,12", "--seeds", "1"]
    assert trained[2][-4:] == ["--trials", "9", "--seeds", "3"] and trained[3][3] == "0,3"
    log = json.loads((tmp_path / "progress.json").read_text())
    assert log["command"] == [*committed["command"], "python -m benchmarks.fashion train --minutes 1"]
    assert log["commit"] == benchmark("stamps").commit() == log["chunks"][-1]["commit"]
    assert log["chunks"][:-4] == committed["chunks"] and len(log["chunks"]) == len(committed["chunks"]) + 4
    assert {"started", "ended", "machine", "seconds"} <= set(log["chunks"][-1])
    assert {k: v for k, v in log.items() if k not in ("command", "commit", "chunks")} == {
        k: v for k, v in committed.items() if k not in ("command", "commit", "chunks")
    }  # the stamped_from note and the search's seconds as they were
    assert list(log)[:2] == ["command", "commit"] and not stamp_problems(log, runnable())
    assert state.logged({"chunks": []}, "python -m benchmarks.fashion search", "abc1234") == {
        "command": ["python -m benchmarks.fashion search"],
        "commit": "abc1234",
        "chunks": [],
    }


def test_the_reference_piece_hands_each_reference_its_seeds_and_command_and_logs_what_trained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fashion, state, called = benchmark("fashion"), benchmark("fashion_state"), []
    monkeypatch.setattr(state, "WORK", tmp_path)
    said = iter(["trained", "done", "stopped"] + ["done"] * 20)
    monkeypatch.setattr(fashion, "reference", lambda *args: called.append(args) or next(said))
    monkeypatch.setattr(sys, "argv", ["fashion", "reference", "two_conv_bn", "--seeds", "3", "--minutes", "30"])
    fashion.main()
    [(name, seeds, minutes, command)] = called
    assert name == "two_conv_bn" and seeds == 3 and 29 < minutes <= 30
    assert command == "python -m benchmarks.fashion reference two_conv_bn --seeds 3 --minutes 30"
    monkeypatch.setattr(sys, "argv", ["fashion", "reference", "all"])
    fashion.main()  # the first is done already, the second stops at the deadline: the piece ends there
    assert {c[3] for c in called[1:]} == {"python -m benchmarks.fashion reference all"} and len(called) == 3
    log = json.loads((tmp_path / "progress.json").read_text())
    references = list(benchmark("fashion_references").REFERENCES)
    assert [(c["piece"], c["exit"]) for c in log["chunks"]] == [
        ("reference two_conv_bn", 0),
        (f"reference {references[1]}", 130),
    ]


def test_round_2_writes_its_own_folder_and_round_1_stays_readable_where_it_was() -> None:
    state = benchmark("fashion_state")
    assert state.ROUND == 2 and state.WORK == PACKAGE / "fashion-runs-2" == state.ROUNDS[2]
    assert state.ROUNDS[1] == PACKAGE / "fashion-runs"
    # Every piece of the round writes under its folder...
    assert benchmark("fashion").DATABASE == state.WORK / "fashion.db"
    assert benchmark("fashion_references").WORK == state.WORK and benchmark("fashion_report").WORK == state.WORK
    supernet = benchmark("fashion_supernet")
    assert supernet.HERE == state.WORK / "supernet" and supernet.SPACE_FILE.parent == supernet.HERE
    assert supernet.DATABASE == state.SUPERNET_DATABASE == supernet.HERE / "supernet.db"
    # ...and round 1's comparison reads its own, whose four studies are all still there.
    endtoend = benchmark("fashion_endtoend")
    round_1 = state.ROUNDS[1]
    assert round_1 == endtoend.WORK and round_1 / "supernet" / "supernet.db" == endtoend.SUPERNET_DATABASE
    labels = [front.label for front in state.round_studies(state.ROUNDS[1])]
    assert sorted(labels) == ["supernet s0", "supernet s1", "trials s0", "trials s1"] and labels[0] == "trials s0"
    assert len(list((state.ROUNDS[1] / "references").glob("*.json"))) == 8


def test_the_preset_s_final_recipe_reaches_a_study_searched_before_it_changed(tmp_path: Path) -> None:
    import optuna

    from nas.search.records import StudyAttr

    state = benchmark("fashion_state")
    database = tmp_path / "fashion.db"
    found = optuna.create_study(study_name="s", storage=f"sqlite:///{database}", directions=["maximize"] * 2)
    document = {"name": "fashion_mnist", "model": {"family": "mobilenet_v2"}, "final": {"epochs": 15}}
    found.set_user_attr(StudyAttr.SPACE_DOCUMENT, document)
    assert state.sync_final(database, "s", {"epochs": 30, "augmentation": {"erasing": 0.5}})
    stored = optuna.load_study(study_name="s", storage=f"sqlite:///{database}").user_attrs[StudyAttr.SPACE_DOCUMENT]
    assert stored == document | {"final": {"epochs": 30, "augmentation": {"erasing": 0.5}}}
    assert not state.sync_final(database, "s", {"epochs": 30, "augmentation": {"erasing": 0.5}})  # as it is


def test_a_network_counts_only_when_trained_with_the_preset_s_recipe_as_it_is_now() -> None:
    state = benchmark("fashion_state")
    preset = state.preset_recipe(state.recipe_space())
    assert preset["epochs"] == state.recipe_space().spec.final.epochs and "augmentation" in preset
    # A reference's recipe and a trial's name other things too (what it is, where it starts).
    assert state.current(preset | {"reference": "resnet20", "image_size": 28, "optimizer": "adam"}, preset)
    assert state.current(preset | {"start": "inherited"}, preset)
    assert not state.current(preset | {"epochs": preset["epochs"] + 1}, preset)
    assert not state.current({k: v for k, v in preset.items() if k != "augmentation"}, preset)


def _final(recipe: dict[str, Any], accuracies: list[float], seconds: float = 1000.0) -> Any:
    """`nas train`'s figures of one trial, one run per accuracy (seeds 0, 1, ...)."""
    from nas.search.records import FinalFigures, FinalRun

    runs = [
        FinalRun(
            seed=k,
            test_accuracy=a,
            keras_test_accuracy=a,
            history={"loss": [1.0], "seconds": [seconds]},
            seconds=seconds,
            throughput=1000.0,
            throughput_low=None,
            throughput_high=None,
            device=None,
            model=f"trial-seed-{k}.keras",
            sha256="0" * 64,
        )
        for k, a in enumerate(accuracies)
    ]
    return FinalFigures.of_runs(recipe, 0.9, runs)


def _study_with_finals(database: Path, name: str, finals: dict[str, Any], trials: int) -> None:
    import optuna

    from nas.search.records import FinalTraining

    found = optuna.create_study(study_name=name, storage=f"sqlite:///{database}", directions=["maximize"] * 2)
    for n in range(trials):  # a front: accuracy falls as speed rises
        found.add_trial(optuna.trial.create_trial(values=[0.93 - 0.04 * n, 5000.0 + 4000 * n]))
    found.set_user_attr(FinalTraining.KEY, FinalTraining(trained_at="2026-12-08T00:00+00:00", trials=finals).to_attr())


def test_report_and_status_read_a_round_s_folder_by_the_preset_s_recipe_and_the_noise_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    report, state, references = benchmark("fashion_report"), benchmark("fashion_state"), benchmark("fashion_references")
    work = tmp_path / "fashion-runs-2"
    (work / "supernet").mkdir(parents=True)
    for module, name, value in (
        (state, "WORK", work),
        (report, "WORK", work),
        (report, "DATABASE", work / "fashion.db"),
        (report, "SUPERNET", work / "supernet"),
        (report, "REPO", tmp_path),
    ):
        monkeypatch.setattr(module, name, value)
    preset = state.preset_recipe(state.recipe_space())
    scratch = preset | {"start": "scratch", "optimizer": "adam"}
    finals = {
        "0": _final(scratch, [0.951, 0.953, 0.952]),
        "1": _final(scratch, [0.93]),
        "2": _final(scratch | {"epochs": 2}, [0.95], seconds=50.0),  # trained before the recipe changed
    }
    _study_with_finals(work / "fashion.db", state.STUDY, finals, 3)
    inherited = preset | {"start": "inherited", "optimizer": "adam"}
    _study_with_finals(work / "supernet" / "supernet.db", "fashion_supernet_s0", {"0": _final(inherited, [0.94])}, 1)
    (work / "references").mkdir()
    recipe = preset | {"optimizer": "adam", "image_size": 28}
    for name, accuracy in (("two_conv_bn", 0.933), ("mobilenet_v2_0.35", 0.90), ("mobilenet_v3_small", 0.925)):
        run = {"seed": 0, "name": name, "params": 10, "test_accuracy": accuracy, "test_accuracy_moving_statistics": 0.5}
        record = references.with_seed(
            None, recipe | {"reference": name}, run, "python -m benchmarks.fashion reference all", "abc1234"
        )
        (work / "references" / f"{name}.json").write_text(json.dumps(record))
    timed = {
        "trials s0 trial 0": (14100, 15000),
        "trials s0 trial 1": (20000, 21000),
        "supernet s0 trial 0": (3000, 3200),
        "two_conv_bn": (6500, 7000),
        "mobilenet_v2_0.35": (3000, 3300),
        "mobilenet_v3_small": (15000, 16000),  # only trial 1 is faster, half a point less accurate: a tie
    }
    networks = {
        n: {"images_per_s": (lo + hi) / 2, "low": lo, "high": hi, "params": 10} for n, (lo, hi) in timed.items()
    }
    (work / "throughput.json").write_text(json.dumps({"networks": networks, "machine": "here"}))
    search = {"piece": "search", "seconds": 3600.0, "machine": "x86_64, AVX-512"}
    (work / "progress.json").write_text(json.dumps({"search_seconds": 3600.0, "chunks": [search]}))
    supernet = {"piece": "fashion_supernet_s0", "seconds": 3700.0, "machine": "x86_64, AVX2"}
    (work / "supernet" / "progress.json").write_text(
        json.dumps({"searches": {"fashion_supernet_s0": 3600.0}, "chunks": [supernet]})
    )

    result = report.report()
    assert result["stale"] == ["trials s0 trial 2"]
    by_name = {r["name"]: r for r in result["networks"]}
    assert set(by_name) == set(timed)
    assert (by_name["trials s0 trial 0"]["test_accuracy"], by_name["trials s0 trial 0"]["seeds"]) == (0.952, 3)
    assert by_name["two_conv_bn"]["dominated_by"] == ["trials s0 trial 0"]
    assert by_name["two_conv_bn"]["ties"] == ["trials s0 trial 1"]
    assert result["fronts"]["supernet s0"]["not_dominated"] == [
        "mobilenet_v2_0.35",
        "mobilenet_v3_small",
        "two_conv_bn",
    ]
    goals = result["goals"]
    assert goals["references_dominated"]["verdict"] == "incomplete"  # 6 of the 9 have no figures yet
    assert goals["accuracy"]["verdict"] == "met" and goals["accuracy"]["budget"] == {"seconds": 5600, "within": True}
    assert goals["speedup_at_two_conv"]["by"] == ["trials s0 trial 0"]
    assert result["wanted_seeds"] == {"mobilenet_v3_small": 1, "trials s0 trial 1": 1}
    assert json.loads((work / "report.json").read_text())["goals"] == goals
    assert (work / "fashion.png").read_bytes().startswith(b"\x89PNG")
    said = capsys.readouterr().out
    assert "| trials s0 trial 0 | 0.9520 ± 0.0010 | 3 |" in said
    assert "    python -m benchmarks.fashion train --seeds 3 --trials 1" in said

    report.status()
    said = capsys.readouterr().out
    assert "search trials s0: 3600 of 3600 s" in said and "search fashion_supernet_s0: 3600 of 3600 s" in said
    assert "trials s0: front of 3; final-trained: 0 (3 seeds), 1 (1 seed); to train: 2" in said
    assert "reference two_conv_bn: seeds 0" in said and "reference resnet20: to do" in said
    assert "left out until trained again): trials s0 trial 2" in said
    assert "python -m benchmarks.fashion reference mobilenet_v3_small --seeds 3" in said
    assert "pieces run: 2, on x86_64, AVX-512; x86_64, AVX2" in said


def test_a_piece_writes_each_study_databases_wal_back_before_it_is_committed(tmp_path: Path) -> None:
    import shutil
    import sqlite3

    state = benchmark("fashion_state")
    (tmp_path / "supernet").mkdir()
    database = tmp_path / "supernet" / "s.db"
    writer = sqlite3.connect(database)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")  # as a process that ended without closing it
    writer.execute("CREATE TABLE trials (n INTEGER)")
    writer.executemany("INSERT INTO trials VALUES (?)", [(n,) for n in range(50)])
    writer.commit()
    assert (tmp_path / "supernet" / "s.db-wal").stat().st_size > 0
    state.write_back(tmp_path)
    # What git commits: the database file alone (copied while the writer is still open: its
    # closing would write the WAL back itself).
    shutil.copy2(database, tmp_path / "committed.db")
    writer.close()
    assert sqlite3.connect(tmp_path / "committed.db").execute("SELECT count(*) FROM trials").fetchone() == (50,)

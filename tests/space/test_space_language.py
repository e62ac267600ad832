"""The space language: conditions, shared parameters, per-stage overrides, compound scaling,
units, space size, and `nas space validate|show|sample` (run in-process: no TensorFlow)."""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path

import optuna
import pytest
import yaml

from nas.errors import NasError
from nas.search.cli import main
from nas.search.nets import plan_network, space_size
from nas.search.space import parse_bytes, parse_count, space_from_dict

from ..helpers import REPO
from .test_space import BAD as BASIC_BAD
from .test_space import _set, good

BASE = """
name: lang
dataset: {source: digits, image_size: 16}
model:
  family: mobilenet_v3
  stem_filters: 16
  stem_stride: 1
  head_filters: 64
  shared:
    kernel: {choice: [3, 5]}
  stages:
    - {filters: 16, expansion: 1}
    - filters: 24
      stride: 2
      kernel: 7
      se: {choice: [false, true]}
      se_ratio: {choice: [0.125, 0.25, 0.5], when: {se: true}}
training:
  optimizer: {choice: [adam, sgd]}
  learning_rate: {float: [0.001, 0.1], log: true}
search: {trials: 3}
"""


def base() -> dict:
    return yaml.safe_load(BASE)


def _nas(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    argv = sys.argv
    sys.argv = ["nas", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = argv
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_conditional_parameter_is_sampled_only_when_active() -> None:
    space = space_from_dict(base())
    assert space.parameters()["stage1.se_ratio"].when == (("stage1.se", (True,)),)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen = {True: 0, False: 0}
    for _ in range(40):
        trial = study.ask()
        candidate = space.sample(trial, num_classes=10, channels=1)
        se = trial.params["stage1.se"]
        seen[se] += 1
        # Define-by-run: an inactive parameter never reaches Optuna.
        assert ("stage1.se_ratio" in trial.params) == se
        assert candidate.stages[1].se is se
        if se:
            assert candidate.stages[1].se_ratio == trial.params["stage1.se_ratio"]
        assert space.candidate(trial.params, num_classes=10, channels=1) == candidate
        study.tell(trial, 0.5)
    assert seen[True] and seen[False]


def test_tpe_learns_from_conditional_spaces() -> None:
    """The best value needs se on and its conditional ratio at 0.5: one trial in 6 by chance.
    TPE must come back to it in 13 or more of its last 30 of 50 trials (15 to 19 over seeds 0-19);
    random sampling does with probability 5e-4 (binomial), and the same seed's fails here."""
    space = space_from_dict(base())

    def objective(trial: optuna.Trial) -> float:
        c = space.sample(trial, num_classes=10, channels=1)
        return c.stages[1].se_ratio if c.stages[1].se else 0.0

    def best_hits(sampler: optuna.samplers.BaseSampler) -> int:
        study = optuna.create_study(direction="maximize", sampler=sampler)
        study.optimize(objective, n_trials=50)
        return sum(t.value == 0.5 for t in study.trials[20:])

    assert best_hits(optuna.samplers.TPESampler(seed=0, n_startup_trials=5)) >= 13
    assert best_hits(optuna.samplers.RandomSampler(seed=0)) < 13


def test_shared_parameter_is_one_value_and_a_stage_can_override_it() -> None:
    space = space_from_dict(base())
    names = space.parameters()
    assert "shared.kernel" in names and "stage0.kernel" not in names
    assert names["stage1.kernel"].value == 7
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3)).ask()
    c = space.sample(trial, num_classes=10, channels=1)
    assert c.stages[0].kernel == trial.params["shared.kernel"]
    assert c.stages[1].kernel == 7


def test_stage_activation_follows_a_searched_global_activation() -> None:
    data = base()
    data["model"]["activation"] = {"choice": ["relu", "hard_swish"]}
    data["model"]["stages"][1]["activation"] = "relu6"
    space = space_from_dict(data)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(6):
        trial = study.ask()
        c = space.sample(trial, num_classes=10, channels=1)
        assert c.activation == c.stages[0].activation == trial.params["activation"]
        assert c.stages[1].activation == "relu6"


def test_training_conditions() -> None:
    data = base()
    data["training"]["learning_rate"] = {"float": [0.01, 0.1], "log": True, "when": {"optimizer": "sgd"}}
    space = space_from_dict(data)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(10):
        trial = study.ask()
        c = space.sample(trial, num_classes=10, channels=1)
        seen.add(trial.params["optimizer"])
        if trial.params["optimizer"] == "sgd":
            assert 0.01 <= c.learning_rate <= 0.1
        else:
            assert "learning_rate" not in trial.params and c.learning_rate == 1e-3
    assert seen == {"adam", "sgd"}  # both branches were checked


def test_compound_scaling() -> None:
    data = base()
    data["model"].update(
        family="efficientnet",
        width_multiplier=0.5,
        resolution=32,
        compound={"phi": {"choice": [0, 1, 2]}, "alpha": 1.2, "beta": 1.1, "gamma": 1.15},
    )
    space = space_from_dict(data)
    widths = {}
    for seed in range(30):
        trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed)).ask()
        c = space.sample(trial, num_classes=10, channels=1)
        phi = trial.params["phi"]
        assert c.width_multiplier == pytest.approx(0.5 * 1.1**phi)
        assert c.depth_multiplier == pytest.approx(1.2**phi)
        assert c.resolution == round(32 * 1.15**phi)
        widths[phi] = plan_network(c).blocks[-1].out_ch
    assert set(widths) == {0, 1, 2}
    # Repeats grow as ceil(depth x 1.2^phi): 1 -> 2 at phi=1 (1.2) and phi=2 (1.44).
    c0 = space.candidate({"phi": 0.0, "shared.kernel": 3, "stage1.se": False, "optimizer": "adam",
                          "learning_rate": 0.01}, num_classes=10, channels=1)  # fmt: skip
    c2 = space.candidate({"phi": 2.0, "shared.kernel": 3, "stage1.se": False, "optimizer": "adam",
                          "learning_rate": 0.01}, num_classes=10, channels=1)  # fmt: skip
    assert len(plan_network(c0).blocks) == 2 and len(plan_network(c2).blocks) == 4


def test_space_size_counts_conditional_parameters_exactly() -> None:
    space = space_from_dict(base())
    size = space_size(space.parameters())
    # shared.kernel 2 x (se false: 1 + se true: 3 ratios) x optimizer 2; learning_rate continuous
    assert (size.combinations, size.exact, size.continuous) == (2 * 4 * 2, True, ["learning_rate"])


def test_units() -> None:
    assert parse_count("3.5M") == 3_500_000 and parse_count("600k") == 600_000 and parse_count(12) == 12
    assert parse_bytes("4MB") == 4_000_000 and parse_bytes("1.5MiB") == 1_572_864 and parse_bytes("800 KB") == 800_000
    with pytest.raises(ValueError, match=r"such as 3\.5M"):
        parse_count("3.5X")
    data = base()
    data["constraints"] = {"max_params": "20k", "max_model_size": "100KB", "max_flops": "1.5M"}
    c = space_from_dict(data).spec.constraints
    assert (c.max_params, c.max_model_size, c.max_flops) == (20_000, 100_000, 1_500_000)


# Malformed space files: each must give exit status 2 and one line naming the offending key.
# The basic ones of test_space.py go through the command line too.
LANGUAGE_BAD = [
    ("model.family", "resnet", "model.family: 'resnet': input should be 'mobilenet_v2'"),
    ("model.stages.0.kernel", 4, "model.stages[0].kernel: 4 is not one of [3, 5, 7]"),
    ("model.shared.filters", 16, "model.shared.filters: unknown key (allowed: block, depth, kernel"),
    (
        "model.stages.1.se_ratio",
        {"choice": [0.1, 0.2], "when": {"se": "yes"}},
        "model.stages[1].se_ratio.when: se = 'yes': expected true or false",
    ),
    (
        "model.stages.1.se_ratio",
        {"choice": [0.1, 0.2], "when": {"colour": "red"}},
        "model.stages[1].se_ratio.when: unknown parameter 'colour'",
    ),
    (
        "model.stages.1.se",
        {"choice": [True, False], "when": {"se": True}},
        "model.stages[1].se.when: a parameter cannot depend on itself",
    ),
    (
        "model.stages.1.depth",
        {"int": [1, 3], "when": {"kernel": 4}},
        "model.stages[1].depth.when: kernel = 4: 4 is not one of [3, 5, 7]",
    ),
    (
        "training.optimizer",
        {"choice": ["adam", "sgd"], "when": {"learning_rate": 0.01}},
        "training.optimizer.when: 'learning_rate' is a float range",
    ),
    (
        "model.shared.se_ratio",
        {"choice": [0.1, 0.2], "when": {"se": True}},
        "model.shared.se_ratio.when: 'se' must be set in the same scope",
    ),
    ("model.compound", {"phi": {"choice": [-1, 1]}}, "model.compound.phi: -1.0 is not between 0 and 8"),
    ("model.compound", {"phi": 1, "alpha": 0.5}, "model.compound.alpha: 0.5: input should be greater than or equal"),
    ("model.compound", {"alpha": 1.2}, "model.compound.phi: required key is missing"),
    ("model.resolution", 4, "model.resolution: 4 is not between 8 and 1024"),
    ("model.activation", "gelu", "model.activation: 'gelu' is not one of ['relu', 'relu6', 'swish', 'hard_swish']"),
    ("model.stages.0.activation", "tanh", "model.stages[0].activation: 'tanh' is not one of"),
    ("model.stages.0.expansion", 0.5, "model.stages[0].expansion: 0.5 is not between 1 and 8"),
    ("model.stages.0.se_ratio", 1.5, "model.stages[0].se_ratio: 1.5 is not between 0.01 and 1"),
    ("model.depth_multiplier", {"choice": [1.0, 10]}, "model.depth_multiplier: 10.0 is not between 0.1 and 4"),
    ("model.head_hidden", -1, "model.head_hidden: -1 is not between 0 and 8192"),
    ("model.num_classes", 5, "model.num_classes: 5, but the digits have 10 classes"),
    ("constraints.max_params", "3.5X", "constraints.max_params: expected a whole number or a figure such as 3.5M"),
    ("constraints.max_model_size", "big", "constraints.max_model_size: expected a whole number or a figure"),
    ("constraints.max_flops", 0, "constraints.max_flops: 0: input should be greater than or equal to 1"),
    (
        "model.stages.1.se_ratio",
        {"choice": [0.1, 0.2], "when": {"se": []}},
        "model.stages[1].se_ratio.when: se needs at least one value",
    ),
    ("model.stages.1.se_ratio", {"choice": [0.1], "when": "se"}, "model.stages[1].se_ratio.when: needs a mapping"),
    (
        "model.stages.0.kernel",
        {"value": 3, "choice": [3, 5]},
        "model.stages[0].kernel.value: a fixed value takes no choice",
    ),
    (
        "training.learning_rate",
        {"float": [0.01, 0.1], "when": {"optimizer": "nadam"}},
        "training.learning_rate.when: optimizer = 'nadam': 'nadam' is not one of",
    ),
    ("compute.xla", {"choice": [True, False], "when": {"precision": "float64"}}, "compute.xla.when: precision"),
    ("model.stages.0.stride", {"choice": [1, 3]}, "model.stages[0].stride: 3 is not one of [1, 2]"),
]


def _lite_with_se() -> dict:
    data = base()
    data["model"]["family"] = "efficientnet_lite"
    return data


def _loop() -> dict:
    data = base()
    stage = data["model"]["stages"][1]
    stage["depth"] = {"int": [1, 2], "when": {"expansion": 6}}
    stage["expansion"] = {"choice": [4, 6], "when": {"depth": 2}}
    return data


WHOLE_FILE_BAD = [
    (_lite_with_se, "model.stages[1].se: efficientnet_lite has no squeeze-and-excitation"),
    (_loop, "model.stages[1].depth.when: conditions form a loop (depth -> expansion -> depth)"),
]


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _mutated(make: Callable[[], dict], path: str, value: object) -> Callable[[], dict]:
    return lambda: _set(make(), path, copy.deepcopy(value))


MALFORMED: list[tuple[Callable[[], dict], str]] = [
    *((_mutated(base, p, v), m) for p, v, m in LANGUAGE_BAD),
    *((_mutated(good, p, v), m) for p, v, m in BASIC_BAD),
    *WHOLE_FILE_BAD,
]


@pytest.mark.parametrize(
    ("make", "message"), MALFORMED, ids=[f"{i}-{m.split(':')[0]}" for i, (_, m) in enumerate(MALFORMED)]
)
def test_malformed_files_exit_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Callable[[], dict], message: str
) -> None:
    bad = _write(tmp_path, make())
    code, out, err = _nas(capsys, "space", "validate", str(bad))
    assert code == 2 and out == ""
    assert err.count("\n") == 1, err
    assert err.startswith(f"Error: {bad}: {message}"), err


def test_at_least_25_malformed_files_are_covered() -> None:
    assert len(LANGUAGE_BAD) + len(WHOLE_FILE_BAD) >= 25 and len(MALFORMED) >= 50


def test_validate_reports_the_space_and_checks_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _write(tmp_path, base())
    code, out, _ = _nas(capsys, "space", "validate", str(good))
    assert code == 0
    assert out.startswith(f"OK: {good}: mobilenet_v3, 5 searchable parameters, 16 combinations x 1 continuous")
    assert "over 200 random candidates" in out
    reference = str(REPO / "spaces" / "reference" / "efficientnet_b0.yaml")
    code, _, err = _nas(capsys, "space", "validate", reference)
    assert code == 2 and "dataset.path:" in err and "does not exist" in err
    code, out, _ = _nas(capsys, "space", "validate", reference, "--no-data")
    assert code == 0 and "0 searchable parameters, 1 combinations" in out


def test_validate_warns_when_constraints_reject_everything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = base()
    data["constraints"] = {"max_params": 100}
    code, out, _ = _nas(capsys, "space", "validate", str(_write(tmp_path, data)))
    assert code == 0 and "Warning: none of 200 random candidates meets the static constraints" in out


def test_show_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _nas(capsys, "space", "show", "mobilenet_v3", "--format", "json")
    assert code == 0
    report = json.loads(out)
    by_name = {p["name"]: p for p in report["parameters"]}
    assert by_name["stage2.se_ratio"]["when"] == {"stage2.se": [True]}
    assert by_name["shared.kernel"]["choices"] == [3, 5]
    assert report["size"] == {"combinations": 62208, "exact": True, "continuous": ["dropout", "learning_rate"]}
    low, high = report["candidates"]["params"]
    assert 0 < low < high


def test_show_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _nas(capsys, "space", "show", "mobilenet_v3")
    assert code == 0
    assert "stage2.se_ratio" in out and "stage2.se = true" in out and "choice [relu, hard_swish]" in out
    assert "Size: 62,208 combinations x 2 continuous (dropout, learning_rate)" in out
    # The measuring costs no setting of the preset lowers: the defaults.
    assert "warm-up at most 20 s, latency timed 1 s, once per device: baseline 15 rounds, matmul peak 1 s" in out
    code, out, _ = _nas(capsys, "space", "show", "tiny")
    assert "warm-up at most 2 s, latency timed 0.2 s, once per device: baseline 5 rounds, matmul peak 0.2 s" in out


def test_sample_is_reproducible_and_consistent(capsys: pytest.CaptureFixture[str]) -> None:
    reports = []
    for seed in (5, 5, 6):
        code, out, _ = _nas(capsys, "space", "sample", "efficientnet", "--seed", str(seed), "--format", "json")
        assert code == 0
        reports.append(json.loads(out))
    assert reports[0] == reports[1] and reports[0]["parameters"] != reports[2]["parameters"]
    report = reports[0]
    assert sum(row["params"] for row in report["layers"]) == report["network"]["params"]
    assert report["network"]["model_bytes"] == 4 * report["network"]["params"]
    code, out, _ = _nas(capsys, "space", "sample", "efficientnet", "--seed", "5")
    assert code == 0 and "phi = " in out and "s0b0" in out and "classifier" in out


def test_sample_needs_the_number_of_classes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = base()
    data["dataset"] = {"source": "npz", "path": "data.npz"}
    code, _, err = _nas(capsys, "space", "sample", str(_write(tmp_path, data)))
    assert code == 2 and "set model.num_classes" in err


def test_space_commands_do_not_import_tensorflow(tmp_path: Path) -> None:
    import subprocess

    probe = (
        "import sys; from nas.search.cli import main; "
        "sys.argv = ['nas', 'space', 'show', 'efficientnet']; "
        "import contextlib\n"
        "with contextlib.suppress(SystemExit): main()\n"
        "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, 'TensorFlow was imported'"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Space 'efficientnet'" in done.stdout


def test_configurations_enumerate_a_finite_space_with_its_conditions() -> None:
    data = base()
    data["training"]["learning_rate"] = {"choice": [0.001, 0.01]}
    space = space_from_dict(data)
    configs = space.configurations()
    # kernel 2 x optimizer 2 x learning rate 2 x (se off, or se on with 3 ratios) = 32
    assert len(configs) == 32 == space_size(space.parameters()).combinations
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == 32
    for params in configs:
        # Exactly what a sampler would suggest: an inactive parameter is absent.
        assert ("stage1.se_ratio" in params) == params["stage1.se"]
        assert set(params) <= set(space.searchable())
        space.candidate(params, num_classes=10, channels=1)  # every one is a valid trial
    assert configs == space.configurations()  # a fixed order: shards of a table agree on it


def test_configurations_refuse_a_continuous_range() -> None:
    with pytest.raises(NasError, match="learning_rate: a continuous range has no finite list"):
        space_from_dict(base()).configurations()

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from nas.errors import NasError
from nas.search.space import load_space, space_from_dict
from nas.spaces import preset_names

from ..helpers import REPO, run_cli

GOOD = """
name: t
model:
  stages:
    - {filters: 16, stride: 1, depth: 1, kernel: 3, expansion: 1}
    - {filters: 24, stride: 2, depth: {int: [1, 3]}, kernel: {choice: [3, 5]}, se: {choice: [false, true]}}
training:
  learning_rate: {float: [0.0001, 0.1], log: true}
"""


def good() -> dict:
    return yaml.safe_load(GOOD)


def test_examples_load() -> None:
    examples = sorted((REPO / "examples").glob("*.yaml"))
    assert examples
    for path in examples:
        assert load_space(str(path)).searchable(), path


def test_only_the_nas_package_is_installed(tmp_path: Path) -> None:
    # From a folder outside the checkout, so only what is installed can be found.
    probe = (
        "import importlib.util as u; "
        "print([n for n in ('nas.search', 'nas.storage', 'nas.spaces', 'search', 'storage', 'spaces') "
        "if u.find_spec(n) is not None])"
    )
    found = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "['nas.search', 'nas.storage', 'nas.spaces']"


def test_presets_load() -> None:
    assert {"mobilenet", "tiny"} <= set(preset_names())
    for name in preset_names():
        space = load_space(name)
        assert space.searchable(), name
    assert (
        load_space("spaces/mobilenet.yaml" if Path("spaces/mobilenet.yaml").exists() else "mobilenet").name
        == "mobilenet"
    )


def test_parameters_and_distributions() -> None:
    space = space_from_dict(good())
    searchable = space.searchable()
    assert set(searchable) == {"stage1.depth", "stage1.kernel", "stage1.se", "learning_rate"}
    dists = space.distributions()
    assert dists["stage1.depth"] == optuna.distributions.IntDistribution(1, 3)
    assert dists["learning_rate"] == optuna.distributions.FloatDistribution(1e-4, 0.1, log=True)
    assert dists["stage1.kernel"] == optuna.distributions.CategoricalDistribution([3, 5])


def test_sampled_parameters_alone_determine_the_candidate() -> None:
    space = space_from_dict(good())
    study = optuna.create_study(directions=["maximize", "maximize"])
    trial = study.ask()
    sampled = space.sample(trial, num_classes=10, channels=1)
    rebuilt = space.candidate(trial.params, num_classes=10, channels=1)
    assert sampled == rebuilt
    assert sampled.stages[0].depth == 1 and sampled.stages[1].stride == 2


def test_fingerprint_ignores_name_and_search_section() -> None:
    a, b = good(), good()
    b["name"] = "other"
    b["search"] = {"trials": 99, "sampler": "random"}
    assert space_from_dict(a).fingerprint() == space_from_dict(b).fingerprint()
    b["training"]["epochs"] = 9
    assert space_from_dict(a).fingerprint() != space_from_dict(b).fingerprint()


def _set(data: dict, path: str, value: object) -> dict:
    *parents, last = path.split(".")
    node: object = data
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})  # type: ignore[index]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value  # type: ignore[index]
    return data


BAD = [
    ("model.stages.1.kernel", 4, "model.stages[1].kernel: 4 is not one of [3, 5, 7]"),
    ("model.stages.1.kernel", {"choice": [3, 4]}, "model.stages[1].kernel: 4 is not one of [3, 5, 7]"),
    (
        "model.stages.0.depth",
        {"int": [3, 1]},
        "model.stages[0].depth: int range [3, 1]: low must be below high",
    ),
    ("model.stages.0.depth", {"float": [1.0, 2.0]}, "model.stages[0].depth: this parameter takes int values"),
    ("model.stages.0.se", "yes", "model.stages[0].se: expected true or false, got 'yes'"),
    (
        "model.stages.0.colour",
        "red",
        "model.stages[0].colour: unknown key "
        "(allowed: block, depth, kernel, expansion, activation, se, se_ratio, filters, stride)",
    ),
    (
        "model.width_multiplier",
        [0.5, 1.0],
        "model.width_multiplier: a list is not a parameter; to search over it write {choice: [0.5, 1.0]}",
    ),
    (
        "model.width_multiplier",
        {"choice": [0.5], "log": True},
        "model.width_multiplier: step and log apply to int and float ranges",
    ),
    ("model.stages.0.stride", 3, "model.stages[0].stride: 3 is not one of [1, 2]"),
    ("model.dropout", {"float": [0, 0.5], "log": True}, "model.dropout: a log range needs low > 0"),
    (
        "training.learning_rate",
        {"float": [0, 0.1]},
        "training.learning_rate: 0.0 is not between 1e-07 and 10",
    ),
    (
        "training.optimizer",
        "adagrad",
        "training.optimizer: 'adagrad' is not one of ['adam', 'adamw', 'sgd', 'rmsprop']",
    ),
    (
        "training.batch_size",
        {"int": [16, 64], "step": 5},
        "training.batch_size: int range [16, 64] is not a whole number of steps of 5",
    ),
    ("training.epochs", 0, "training.epochs: 0: input should be greater than or equal to 1"),
    ("search.sampler", "cmaes", "search.sampler: 'cmaes': input should be 'tpe', 'nsga2', 'gp' or 'random'"),
    (
        "objectives.latency",
        "minimize",
        "objectives: unknown objective 'latency' (available: accuracy, throughput, model_size, tflite_latency)",
    ),
    ("objectives.accuracy", "minimize", "objectives: objective 'accuracy' can only be maximized"),
    ("dataset.validation_fraction", 1.5, "dataset.validation_fraction: 1.5: input should be less than 1"),
    ("dataset.source", "imagenet", "dataset.source: 'imagenet': input should be 'digits'"),
    ("name", "has space", "name: 'has space': string should match pattern"),
    ("model.stages", [], "model.stages: List should have at least 1 item"),
    (
        "model.dropout",
        {"float": [0.1, 0.5], "step": 0.1, "log": True},
        "model.dropout: step and log cannot be combined",
    ),
    (
        "model.stages.1.kernel",
        {"choice": [3, 3]},
        "model.stages[1].kernel: choice has repeated values: [3, 3]",
    ),
    ("model.stages.1.kernel", {"range": [3, 5]}, "model.stages[1].kernel: unknown key 'range'"),
    ("extra_section", {"a": 1}, "extra_section: unknown key (allowed: name, dataset, model, training"),
]


@pytest.mark.parametrize(
    ("path", "value", "message"), BAD, ids=[b[2].split(":")[0] + "-" + str(i) for i, b in enumerate(BAD)]
)
def test_bad_space_files_name_the_key(tmp_path: Path, path: str, value: object, message: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_set(good(), path, value), sort_keys=False))
    with pytest.raises(NasError) as info:
        load_space(str(bad))
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"{bad}: " + message), text


def test_missing_required_keys() -> None:
    with pytest.raises(NasError, match=r"^x.yaml: model: required key is missing$"):
        space_from_dict({"name": "a"}, "x.yaml")
    with pytest.raises(NasError, match=r"^x.yaml: a space file must be a mapping"):
        space_from_dict([1, 2], "x.yaml")


def test_yaml_syntax_and_missing_files(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: a\nmodel: {stages: [\n")
    with pytest.raises(NasError, match=r"broken.yaml: line \d+: invalid YAML"):
        load_space(str(broken))
    with pytest.raises(
        NasError,
        match=r"space file nowhere.yaml not found \(and no preset of that name; presets: .*mobilenet",
    ):
        load_space("nowhere.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: a\n" + GOOD, "line 3: key 'name' appears twice (first on line 1)"),
        (GOOD.replace("model:\n", "model:\n  family: resnet\n  family: mobilenet_v2\n"), "line 5: key 'family'"),
        (GOOD.replace("model:\n", "model:\n  'stages': []\n"), "line 5: key 'stages' appears twice (first on line 4)"),
        (GOOD.replace("kernel: 3, expansion: 1}", "kernel: 3, kernel: 5, expansion: 1}"), "line 5: key 'kernel'"),
    ],
    ids=["top-level", "in-model", "quoted-and-plain", "in-flow-mapping"],
)
def test_a_key_written_twice_is_refused(tmp_path: Path, text: str, message: str) -> None:
    """PyYAML keeps the last of two equal keys; a space file's second `name:` is a mistake to tell."""
    twice = tmp_path / "twice.yaml"
    twice.write_text(text)
    with pytest.raises(NasError) as info:
        load_space(str(twice))
    assert str(info.value).startswith(f"{twice}: {message}"), str(info.value)
    result = run_cli("space", "validate", str(twice), cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip() == f"Error: {info.value}", result.stderr


def test_merge_keys_may_still_override(tmp_path: Path) -> None:
    """`<<: *first` brings keys in that the mapping may set again: YAML's rule, not a repeat."""
    text = GOOD.replace("- {filters: 16,", "- &first {filters: 16,").replace(
        "- {filters: 24, stride: 2,", "- {<<: *first, filters: 24, stride: 2,"
    )
    merged = tmp_path / "merged.yaml"
    merged.write_text(text)
    stage = load_space(str(merged)).document["model"]["stages"][1]
    assert (stage["filters"], stage["stride"], stage["expansion"]) == (24, 2, 1)


@pytest.mark.parametrize(
    ("strategy", "latency", "measured"),
    [("trials", None, True), ("supernet", None, False), ("supernet", True, True), ("trials", False, False)],
)
def test_latency_is_measured_unless_unset_in_a_supernet_study(
    strategy: str, latency: bool | None, measured: bool
) -> None:
    data = good()
    data["search"] = {**data.get("search", {}), "strategy": strategy}
    if latency is not None:
        data["measure"] = {"latency": latency}
    spec = space_from_dict(data).spec
    assert spec.search_measure().latency is measured
    assert spec.measure.latency is latency  # the file's value, as the fingerprint reads it


def test_a_space_that_says_latency_true_keeps_the_fingerprint_it_had_when_true_was_the_default() -> None:
    unset = good()
    said = good() | {"measure": {"latency": True}}
    off = good() | {"measure": {"latency": False}}
    prints = [space_from_dict(d).fingerprint() for d in (unset, said, off)]
    assert prints[0] == prints[1] != prints[2]
    assert '"measure"' not in prints[1]

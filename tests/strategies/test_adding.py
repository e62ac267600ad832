"""A strategy is one folder and one registry line: the tests' own `flops` strategy (random
architectures scored by FLOPs, tests/strategies/flops/) is added that way and searches, shows
and resumes as the built-in ones do; the guide's "Adding a strategy" names what it took."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from nas.errors import NasError

from ..helpers import QUICK_MEASURE, REPO, run_cli

FOLDER = Path(__file__).parent / "flops"


@pytest.fixture
def flops() -> Iterator[None]:
    from nas.search import strategies

    strategies.register("flops", "tests.strategies.flops")  # the one registry line
    try:
        yield
    finally:
        strategies.unregister("flops")


def _space(**flops: Any) -> dict[str, Any]:
    return {
        "name": "flops",
        "dataset": {"source": "digits", "image_size": 8, "subset": 200, "validation_fraction": 0.3, "seed": 0},
        "model": {
            "family": "mobilenet_v2",
            "stem_filters": 8,
            "head_filters": 16,
            "stages": [{"filters": {"choice": [8, 16]}, "stride": 1, "depth": {"int": [1, 2]}, "kernel": 3}],
        },
        "training": {"epochs": 1, "batch_size": 32},
        "measure": QUICK_MEASURE,
        "search": {"trials": 3, "strategy": "flops", **({"flops": flops} if flops else {})},
    }


def test_a_strategy_added_by_its_folder_and_one_registry_line_searches(flops: None, tmp_path: Path) -> None:
    from nas import api

    url = f"sqlite:///{tmp_path / 'nas.db'}"
    study = api.search(_space(scale=5e5), storage=url).optuna
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert len(done) == 3
    for t in done:
        flops_ = t.user_attrs["flops"]
        assert t.values[0] == pytest.approx(flops_ / (flops_ + 5e5), rel=1e-6)  # scored by FLOPs, not trained
        assert t.values[1] > 0  # throughput measured for real
    stored = study.user_attrs["space"]["search"]
    assert stored == {"strategy": "flops", "flops": {"scale": 500000.0}}

    # Its settings are in the fingerprint, but for the one it leaves out.
    api.search(_space(scale=5e5, note="relabelled"), storage=url)  # resumes: nothing left to run
    with pytest.raises(NasError, match="different space"):
        api.search(_space(scale=1e6), storage=url)


def test_a_strategy_s_own_check_refuses_a_space_and_nas_space_show_describes_it(flops: None, tmp_path: Path) -> None:
    from nas.search.space import space_from_dict

    space = _space()
    space["objectives"] = {"throughput": "maximize"}
    with pytest.raises(NasError, match="flops scores the accuracy objective"):
        space_from_dict(space)
    with pytest.raises(NasError, match=r"search\.flops\.scale"):
        space_from_dict(_space(scale=-1))

    path = tmp_path / "flops.yaml"
    path.write_text(yaml.safe_dump(_space(scale=2e6)))
    shown = run_cli("space", "show", str(path), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "Search strategy: flops (random architectures scored by FLOPs, half at 2e+06)" in shown.stdout
    described = run_cli("space", "show", str(path), "--format", "json", cwd=tmp_path)
    assert json.loads(described.stdout)["strategy"] == {"strategy": "flops", "scale": 2e6}


def test_an_unregistered_strategy_is_refused_by_name() -> None:
    from nas.search.space import space_from_dict

    with pytest.raises(NasError, match=r"search\.strategy"):
        space_from_dict(_space())


def test_the_guide_s_adding_a_strategy_names_what_the_test_strategy_took() -> None:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Adding a strategy", 1)[1].split("\n## ", 1)[0]
    files = sorted(p.name for p in FOLDER.glob("*.py"))
    assert files == ["__init__.py", "settings.py", "strategy.py"]
    for name in ("settings.py", "strategy.py", "SETTINGS", "STRATEGY", "REGISTRY", "register"):
        assert re.search(rf"`[^`]*{re.escape(name)}[^`]*`", section), f"Adding a strategy does not name {name}"


def test_the_command_line_s_help_and_the_schema_name_the_registered_strategies(flops: None, tmp_path: Path) -> None:
    from nas.search import strategies
    from nas.search.space import space_schema

    shown = run_cli("search", "--help", cwd=tmp_path)
    assert "search.strategy: trials, supernet, flops." in " ".join(shown.stdout.split())
    search = space_schema().model_fields["search"].annotation
    assert search is not None
    described = search.model_fields["strategy"].description or ""
    assert all(f"{name}: " in described for name in strategies.names())

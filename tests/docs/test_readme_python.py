"""The front page's Python example runs as written, through `nas.api` only, on the short
settings the guide's commands run with (test_guide_commands.py's `_short`: 2 trials of 1 epoch
on 300 images, one final epoch): search, choose by figures, final-train, load the Keras model,
export to TFLite."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from ..helpers import REPO
from .test_guide_commands import _short


def readme_python() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", (REPO / "README.md").read_text(encoding="utf-8"), re.M | re.S)
    assert len(blocks) == 1, "the front page shows one Python example"
    code: str = blocks[0]
    return code


def test_the_example_is_about_ten_lines_of_nas_api() -> None:
    code = readme_python()
    assert len([line for line in code.splitlines() if line.strip()]) <= 10
    assert code.startswith("import nas.api as nas\n")


@pytest.mark.slow
def test_the_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    preset = yaml.safe_load((REPO / "spaces" / "mobilenet.yaml").read_text())
    (tmp_path / "mobilenet.yaml").write_text(yaml.safe_dump(_short(preset), sort_keys=False))
    code = readme_python()
    # The preset by name is the shipped file; the short copy stands in for it, as in the guide's test.
    runnable = code.replace('nas.search("mobilenet")', 'nas.search("mobilenet.yaml")')
    assert runnable != code
    monkeypatch.chdir(tmp_path)  # the default storage and artifacts folder, and exported/
    monkeypatch.delenv("NAS_STORAGE", raising=False)
    monkeypatch.delenv("NAS_ARTIFACTS", raising=False)
    exec(compile(runnable, "README.md", "exec"), {})  # the example, as a reader runs it
    manifest = json.loads((tmp_path / "exported" / "manifest.json").read_text())
    [exported] = manifest["trials"]
    assert exported["weights"] == "final-trained"

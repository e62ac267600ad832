"""Every shell command the guide shows (README.md and docs/, in ```bash blocks) runs, so the
guide cannot rot: a renamed option, a moved file or a changed preset fails here.

The commands run as written, in one workspace (a copy of spaces/ and examples/), in one order
(README.md, then docs/ by file name), and must exit 0: a page's test first runs what the pages
before it in that order left to run (whatever order the tests run in, a page finds
the studies the README made), and a command is tried once per workspace (the pages repeat the
tour's searches and trainings: a second run would test nothing the first did not, at 5-30 s
each; a failed one is reported by the test that tried it, not again by every later page).
Short settings stand in where the real command takes minutes; what changes is said here, never
the command's options:

- the workspace's spaces and examples are the repository's with 1 epoch, 300 images, 2 trials,
  the cheapest measuring, 1 final epoch (`_short`); `nas search PRESET` reads the workspace's
  copy (`spaces/PRESET.yaml`), as a preset name would read the shipped file;
- `nas search ... --trials N` asks for at most 3;
- trial numbers (`--trial 7`, `--trials 3,7`) are the short study's own front members.

A plain `nas ...` command (no shell syntax, no worker processes) runs in this process, through
the `main()` the `nas` entry point calls, with its arguments as written: a subprocess would add a
Python and TensorFlow start (5-10 s) to each of some 25 commands and test nothing more (the
installed `nas` script runs as a process here to read a front, `python -m nas` in tests/e2e).
Every other command runs in bash.

What cannot run here is listed in NOT_HERE with the reason (a GPU, another machine, a download,
a server that runs until stopped, the set-up that `.ci/run` itself performs); the test fails on
a command that is neither runnable nor listed, and on a listed one the guide no longer shows.
The benchmark pages (benchmarks/RESULTS.md) record the commands that made their figures, hours
each; tests/benchmarks runs their code.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..helpers import QUICK_MEASURE, REPO, nas_env, run_cli

PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(?:bash|sh|shell|console)\n(.*?)^```", re.M | re.S)
COMMENT = re.compile(r"(^|\s+)#(\s.*)?$")

SET_UP = {
    "python3 -m venv .venv": "the environment this suite runs in was made so (.ci/run)",
    ". .venv/bin/activate": "ditto",
    "pip install -e .": "ditto",
    "pip install -e '.[dev]'": "ditto",
    "mkdocs build --strict": ".ci/run builds the guide before the tests",
    "pytest": "this suite",
    "apt-get install dataset-fashion-mnist": ".ci/run installs Debian's package as root",
}
NOT_HERE = {
    'python -c "import keras; keras.datasets.fashion_mnist.load_data()"': "downloads (no network at run time)",
    "nas search mobilenet --gpus 0,1,2,3": "needs 4 GPUs (tests/workers place workers on a CPU)",
    "nas search mobilenet --gpus 0,1 --workers-per-gpu 2": "needs 2 GPUs",
    "nas search spaces/mobilenet.yaml --storage postgresql+psycopg://nas:secret@db-host/nas --gpus 0,1": (
        "another machine's server and 2 GPUs (tests/storage runs studies on the local PostgreSQL)"
    ),
    "NAS_STORAGE=postgresql+psycopg://nas:secret@db-host/nas nas worker --study mobilenet": "another machine",
    "python examples/python_api.py": (
        "tests/api/test_api_workflow.py runs it (2 trials, in process) and checks its study through nas.api"
    ),
    "optuna-dashboard sqlite:///nas.db": (
        "serves until stopped; tests/e2e/test_ecosystem.py starts it and reads the study over HTTP"
    ),
}
MAX_TRIALS = 3
SHELL_SYNTAX = re.compile(r"[|&;<>$`*?=(){}\[\]~'\"\\]")


def guide_commands(page: str) -> list[str]:
    """The page's shell commands: fenced bash blocks, comments dropped, `&&` chains split."""
    commands = []
    for block in FENCE.finditer((REPO / page).read_text(encoding="utf-8")):
        for line in block.group(1).replace("\\\n", " ").splitlines():
            line = COMMENT.sub("", line).strip()
            commands.extend(part.strip() for part in line.split(" && ") if line)
    return [c for c in commands if c]


def _short(data: dict[str, Any]) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    data.setdefault("training", {})["epochs"] = 1
    data.setdefault("dataset", {})["subset"] = 300
    data["measure"] = {**QUICK_MEASURE, "latency": False, "confirm": False}
    data.setdefault("search", {})["trials"] = 2
    data["final"] = {**data.get("final", {}), "epochs": 1, "warmup_epochs": 0, "trials": 2}
    return data


@dataclass
class Workspace:
    root: Path
    ran: set[str] = field(default_factory=set)  # the guide's commands run here so far, as written


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    root = tmp_path_factory.mktemp("guide")
    shutil.copytree(REPO / "spaces", root / "spaces")
    shutil.copytree(REPO / "examples", root / "examples", ignore=shutil.ignore_patterns("images"))
    for path in [*(root / "spaces").glob("*.yaml"), root / "examples" / "image_folder" / "space.yaml"]:
        path.write_text(yaml.safe_dump(_short(yaml.safe_load(path.read_text())), sort_keys=False))
    return Workspace(root)


def _front(study: str, cwd: Path, env: dict[str, str]) -> list[int]:
    shown = subprocess.run(
        ["nas", "pareto", study, "--format", "json"], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    # Members beyond the noise only: those within it may have had their weights deleted.
    return [r["trial"] for r in json.loads(shown.stdout) if r["on_front"]]


def runnable(command: str, cwd: Path, env: dict[str, str]) -> str:
    """The command with the short settings of the module docstring."""
    presets = {p.stem for p in (REPO / "spaces").glob("*.yaml")}
    search = re.match(r"nas search (\S+)(.*)$", command)
    if search and search.group(1) in presets:
        command = f"nas search spaces/{search.group(1)}.yaml{search.group(2)}"
    if command.startswith("nas search"):
        command = re.sub(r"--trials (\d+)", lambda m: f"--trials {min(int(m.group(1)), MAX_TRIALS)}", command)
    numbered = re.match(r"nas (export|train) (\S+)", command)
    if numbered and re.search(r"--trials? \d", command):
        members = _front(numbered.group(2), cwd, env)
        front = iter(members)
        # Each `--trial N` becomes the next front member (dropped when the front has no more).
        command = re.sub(r" --trial \d+", lambda m: next((f" --trial {n}" for n in front), ""), command)
        command = re.sub(r"(--trials )[\d,]+", lambda m: m.group(1) + ",".join(map(str, members[:2])), command)
    return command


def in_process(command: str) -> list[str] | None:
    """The arguments of a plain `nas` command that can run in this process; None for any other
    (shell syntax, another program, or worker processes, which are what such a command tests)."""
    if not command.startswith("nas ") or SHELL_SYNTAX.search(command) or "--workers" in command:
        return None
    return shlex.split(command)[1:]


def run_command(run: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    args = in_process(run)
    if args is not None:
        return run_cli(*args, cwd=cwd)
    return subprocess.run(["bash", "-c", run], cwd=cwd, env=env, capture_output=True, text=True, timeout=240)


def test_plain_nas_commands_run_in_process_and_the_rest_in_bash() -> None:
    assert in_process("nas export mobilenet --format tflite --out exported/") == [
        "export",
        "mobilenet",
        "--format",
        "tflite",
        "--out",
        "exported/",
    ]
    for command in [
        "nas search mobilenet --workers 2",
        "NAS_STORAGE=sqlite:///x.db nas worker --study mobilenet",
        "nas pareto mobilenet --format json > front.json",
        "nas status && nas pareto mobilenet",
        "python examples/image_folder/make_folder.py",
        "optuna best-trials --study-name mobilenet --storage sqlite:///nas.db",
    ]:
        assert in_process(command) is None, command


def test_the_guide_shows_commands_and_every_exception_is_still_shown() -> None:
    shown = {c for page in PAGES for c in guide_commands(page)}
    assert len(shown) > 30, shown
    stale = [c for c in [*SET_UP, *NOT_HERE] if c not in shown]
    assert not stale, f"listed here but no longer in the guide: {stale}"


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if guide_commands(p)])
def test_every_command_of_the_page_runs(page: str, workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    env = nas_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("NAS_ARTIFACTS", None)
    monkeypatch.delenv("NAS_ARTIFACTS", raising=False)  # for the commands run in this process
    for at, command in [(p, c) for p in PAGES[: PAGES.index(page) + 1] for c in guide_commands(p)]:
        if command in SET_UP or command in NOT_HERE or command in workspace.ran:
            continue
        run = runnable(command, workspace.root, env)
        done = run_command(run, workspace.root, env)
        workspace.ran.add(command)
        why = f"{at}: `{command}` (ran `{run}`) exited {done.returncode}:\n{done.stderr[-3000:]}"
        assert done.returncode == 0, why

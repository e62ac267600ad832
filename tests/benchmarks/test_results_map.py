"""The map of the benchmarks: every committed JSON under benchmarks/ names the command and the
commit that made it (its own `command` and `commit`, or, for a folder of raw per-run outputs,
the folder's SOURCE.json), every stored command is `python -m benchmarks.NAME` of a runnable
benchmark, and RESULTS.md's index has a row for each runnable benchmark whose links reach a
heading. Files only: nothing here imports TensorFlow or runs a benchmark."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from .package import PACKAGE

RESULTS = PACKAGE / "RESULTS.md"
SOURCE = "SOURCE.json"  # a folder's stamp, for its files that lack their own
COMMAND = re.compile(r"python -m benchmarks\.(\w+)(?: |$)")
COMMIT = re.compile(r"[0-9a-f]{7,40}")
PATH_FORM = re.compile(r"python3? (?:\./)?benchmarks/\w+\.py")


def committed_json() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.json"], cwd=PACKAGE, capture_output=True, text=True, check=True
    ).stdout
    return sorted(PACKAGE / name for name in listed.split("\0") if name and (PACKAGE / name).is_file())


def runnable() -> set[str]:
    """The benchmarks with a command line: modules of the package that run as `__main__`."""
    return {p.stem for p in PACKAGE.glob("*.py") if 'if __name__ == "__main__":' in p.read_text()}


def folder_stamp(path: Path) -> Path | None:
    """The SOURCE.json nearest above a file, within benchmarks/."""
    for folder in path.parents:
        if (folder / SOURCE).is_file():
            return folder / SOURCE
        if folder == PACKAGE:
            return None
    return None


def top_level(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text())
    return document if isinstance(document, dict) else {}


def stamp_problems(stamp: dict[str, Any], modules: set[str]) -> list[str]:
    """What is wrong with a (merged) stamp's `command` and `commit`, if anything. A command is a
    string, or a list of them for a file written piece by piece (one per piece's command)."""
    problems = []
    commands = stamp.get("command")
    commands = [commands] if isinstance(commands, str) else commands
    if not commands or not isinstance(commands, list):
        problems.append("no command")
    else:
        for command in commands:
            found = COMMAND.match(command) if isinstance(command, str) else None
            if not found:
                problems.append(f"command {command!r} is not `python -m benchmarks.NAME ...`")
            elif found.group(1) not in modules:
                problems.append(f"command {command!r} names no runnable benchmark")
    if not isinstance(stamp.get("commit"), str) or not COMMIT.fullmatch(stamp["commit"]):
        problems.append(f"commit {stamp.get('commit')!r} is not a commit")
    return problems


def headings_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: the heading's text without code
    marks, lowercased, with every character but letters, digits, `_`, `-` and spaces dropped
    and the spaces made hyphens; a repeated anchor gets `-1`, `-2` ..."""
    anchors: set[str] = set()
    counts: dict[str, int] = {}
    for title in re.findall(r"(?m)^#{1,6} (.+)$", markdown):
        anchor = "".join(c for c in title.replace("`", "").lower() if c.isalnum() or c in "_- ").replace(" ", "-")
        anchors.add(f"{anchor}-{counts[anchor]}" if anchor in counts else anchor)
        counts[anchor] = counts.get(anchor, 0) + 1
    return anchors


def index_rows() -> list[str]:
    """The index's rows: the table before RESULTS.md's first section."""
    intro = RESULTS.read_text().split("\n## ", 1)[0]
    return [line for line in intro.splitlines() if line.startswith("| `python -m benchmarks.")]


def test_every_committed_json_names_its_command_and_commit() -> None:
    files, modules = committed_json(), runnable()
    assert len(files) > 1 and modules, (PACKAGE, files, modules)
    unstamped: dict[str, list[str]] = {}
    stamps_used: set[Path] = set()
    for path in files:
        if path.name == SOURCE:
            continue
        own, source = top_level(path), folder_stamp(path)
        if source is not None and not {"command", "commit"} <= own.keys():
            stamps_used.add(source)
        merged = (top_level(source) if source else {}) | own
        if problems := stamp_problems(merged, modules):
            unstamped[str(path.relative_to(PACKAGE))] = problems
    assert not unstamped, (
        "stamp each with `command` and `commit` as benchmarks/stamps.py's reports do (or its folder's SOURCE.json): "
        f"{unstamped}"
    )
    for source in (p for p in files if p.name == SOURCE):
        assert not stamp_problems(top_level(source), modules), (source, stamp_problems(top_level(source), modules))
        assert source in stamps_used, f"{source} stamps no file: every file beside it names its own"


def test_no_stored_command_runs_a_benchmark_by_its_path() -> None:
    stored = [*committed_json(), RESULTS]
    offenders = {str(p.relative_to(PACKAGE)): PATH_FORM.findall(p.read_text()) for p in stored}
    assert not {p: found for p, found in offenders.items() if found}, "write them `python -m benchmarks.NAME`"


def test_the_index_has_a_row_per_runnable_benchmark_whose_links_reach_a_heading() -> None:
    rows, anchors = index_rows(), headings_anchors(RESULTS.read_text())
    commands = [COMMAND.match(row.split("`")[1]) for row in rows]
    listed = {found.group(1) for found in commands if found}
    assert listed == runnable(), f"the index lacks {runnable() - listed}, or lists {listed - runnable()}"
    for row in rows:
        cells = row.strip("|").split(" | ")
        assert len(cells) == 4, row
        assert re.search(r"\]\(#[^)]+\)", cells[3]), f"no link to a section: {row}"
    links = re.findall(r"\]\(#([^)\s]+)\)", RESULTS.read_text())
    assert links and not [link for link in links if link not in anchors], sorted(set(links) - anchors)

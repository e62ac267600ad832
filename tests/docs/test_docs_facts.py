"""What the front page and the guide state that a test can check without running a search:
every option they quote for a `nas` command is one of that command's options (read from the
Typer app itself), every list of presets names exactly the files of spaces/, every relative link
resolves on GitHub (the file, and the heading an anchor names) and maps to a page of the site,
and what space.md says may change under a running study leaves a study's fingerprint alone.
(`mkdocs build --strict`, in test_site.py, checks the site's own links and anchors.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.main import get_command
from typer.testing import CliRunner

from nas.search.cli.app import app
from nas.search.space import space_from_dict
from nas.spaces import preset_names

from ..helpers import REPO
from .test_guide_commands import COMMENT, PAGES
from .test_site import hooks

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`((?:[^`\n]|\n(?!\n))+)`")  # inline code, which may wrap inside a paragraph
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
# Options the guide quotes bare (no command before them) that belong to another program.
NOT_NAS = {
    "--cpu": "benchmarks/gpu_check.py's, in development.md",
    "--dist": "pytest-xdist's (`-n 2 --dist loadfile`), in development.md",
    "--quick": "benchmarks/race.py's, in development.md",
    "--shard": "benchmarks/table.py's (`build --shard I/N`), in development.md",
}


def _text(page: str) -> str:
    return (REPO / page).read_text(encoding="utf-8")


def _prose(text: str) -> str:
    return FENCE.sub("", text)


def _spans(text: str) -> list[str]:
    return [" ".join(span.split()) for span in SPAN.findall(_prose(text))]


def _commands(page: str) -> list[str]:
    """Every `nas ...` the page quotes: lines of its shell blocks (comments dropped, chains
    split, an environment variable before it skipped) and inline code that starts with `nas `."""
    found = []
    for block in FENCE.finditer(_text(page)):
        if block.group(1) not in ("bash", "sh", "shell", "console"):
            continue
        for line in block.group(2).replace("\\\n", " ").splitlines():
            line = COMMENT.sub("", line)
            for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
                part = re.sub(r"^(\w+=\S+\s+)+", "", part.strip())
                if part.startswith("nas "):
                    found.append(part)
    found += [span for span in _spans(_text(page)) if span.startswith("nas ")]
    return found


def _options(command: Any) -> set[str]:
    return {o for p in command.params for o in [*p.opts, *p.secondary_opts] if o.startswith("--")} | {"--help"}


def _resolve(words: list[str]) -> tuple[str, Any]:
    """(`nas space show`, its click command) for the words after `nas`."""
    command, path = get_command(app), ["nas"]
    for word in words:
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        command, path = sub, [*path, word]
    return " ".join(path), command


def _every_option() -> set[str]:
    found: set[str] = set()
    queue = [get_command(app)]
    while queue:
        command = queue.pop()
        found |= _options(command)
        queue += list(getattr(command, "commands", {}).values())
    return found


def quoted_options(page: str) -> list[tuple[str, str, str]]:
    """(what the page quotes, the command it names, an option that command lacks)."""
    wrong = []
    for quoted in _commands(page):
        try:
            words = shlex.split(quoted)[1:]
        except ValueError:  # an unclosed quote in prose
            words = quoted.split()[1:]
        name, command = _resolve(words)
        options = _options(command)
        for word in words:
            option = word.split("=", 1)[0]
            if OPTION.fullmatch(option) and option not in options:
                wrong.append((quoted, name, option))
    return wrong


def bare_options(page: str) -> list[tuple[str, str]]:
    """Inline code that quotes an option with no command before it (`--seeds N`): it must be
    an option of some nas command, unless it belongs to another program the span names."""
    every = _every_option()
    wrong = []
    for span in _spans(_text(page)):
        if span.startswith(("nas ", "python ", "pytest", "mkdocs", "pip ", "optuna")):
            continue
        wrong += [(span, o) for o in OPTION.findall(span) if o not in every and o not in NOT_NAS]
    return wrong


@pytest.mark.parametrize("page", PAGES)
def test_every_option_the_page_quotes_is_the_commands_own(page: str) -> None:
    assert not quoted_options(page), f"{page} quotes options the command does not have: {quoted_options(page)}"
    assert not bare_options(page), f"{page} quotes options no nas command has: {bare_options(page)}"


def test_the_check_finds_a_quoted_option_the_command_lacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\nnas train mobilenet --seeds 2 --epochs 3     # no such option\n```\n"
        "Then `nas export STUDY --format tflite --best accuracy`, `nas space show --wide` and `--trial-count 3`.\n"
    )
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert quoted_options("page.md") == [
        ("nas train mobilenet --seeds 2 --epochs 3", "nas train", "--epochs"),
        ("nas space show --wide", "nas space show", "--wide"),
    ]
    assert bare_options("page.md") == [("--trial-count 3", "--trial-count")]


def test_the_options_of_other_programs_are_still_quoted_and_not_nas_options() -> None:
    quoted = {o for page in PAGES for span in _spans(_text(page)) for o in OPTION.findall(span)}
    assert set(NOT_NAS) <= quoted, f"listed here but no longer in the guide: {set(NOT_NAS) - quoted}"
    assert not set(NOT_NAS) & _every_option(), "a nas option is listed as another program's"


def _preset_lists(text: str) -> list[list[str]]:
    """Runs of three or more backquoted names that are presets ("`mobilenet`, `tiny` and ...")."""
    names = set(preset_names())
    runs = re.findall(r"`\w+`(?:(?:,\s+|\s+and\s+|\s+or\s+|,\s+and\s+)`\w+`){2,}", text)
    lists = [re.findall(r"`(\w+)`", run) for run in runs]
    return [found for found in lists if set(found) <= names]


def test_every_list_of_presets_names_every_preset() -> None:
    names = sorted(preset_names())
    assert {"mobilenet", "fashion_mnist", "efficientnet_v2", "tiny"} <= set(names)
    lists = [(page, found) for page in PAGES for found in _preset_lists(_prose(_text(page)))]
    assert lists, "the guide lists the presets somewhere"
    assert [(page, sorted(found)) for page, found in lists] == [(page, names) for page, _ in lists]
    table = _text("docs/space.md").split("## Presets", 1)[1].split("\n\n", 2)[1]
    assert sorted(re.findall(r"(?m)^\| `(\w+)` \|", table)) == names
    said = re.search(r"presets: ([\w, ]+)\)", _text("docs/troubleshooting.md"))
    assert said and said.group(1).split(", ") == names


def test_nas_search_help_names_every_preset() -> None:
    shown = CliRunner().invoke(app, ["search", "--help"], env={"COLUMNS": "200"}).output
    missing = [name for name in preset_names() if name not in shown]
    assert not missing, shown


def _links(page: str) -> list[tuple[str, str]]:
    """(target, anchor) of each Markdown link and image in the page's prose."""
    return [(m.group(1), m.group(2) or "") for m in re.finditer(r"\]\(([^)\s#]*)(#[^)\s]*)?\)", _prose(_text(page)))]


def _anchors(path: Path) -> set[str]:
    return {anchor for anchor, _, _ in hooks._github_anchors(_prose(path.read_text(encoding="utf-8")))}


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_resolves_on_github_and_in_the_site(page: str) -> None:
    broken = []
    for target, anchor in _links(page):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path = (REPO / page).parent / target if target else REPO / page
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor[1:] not in _anchors(path):
            broken.append(f"{target}{anchor}: no such heading")
    assert not broken, f"{page}: {broken}"
    hooks.site_links(_text(page), page, "index.md" if page == "README.md" else page.removeprefix("docs/"))


def test_a_link_is_pointed_at_the_page_the_site_shows_it_on() -> None:
    assert hooks.site_links("[a](docs/space.md#presets)", "README.md", "index.md") == "[a](space.md#presets)"
    assert hooks.site_links("[b](../README.md)", "docs/glossary.md", "glossary.md") == "[b](index.md)"
    shown = hooks.site_links(
        "[c](../benchmarks/RESULTS.md#block-types-at-28x28-benchmarksfashion_blockspy)", "docs/x.md", "x.md"
    )
    assert shown == "[c](benchmarks/fashion-blocks.md)"
    assert hooks.site_links("[d](../space.md)", "docs/reference/space.md", "reference/space.md") == "[d](../space.md)"
    with pytest.raises(ValueError, match="does not show"):
        hooks.site_links("[e](examples/python_api.py)", "README.md", "index.md")


def _fingerprint(data: dict[str, Any]) -> str:
    return space_from_dict(data, "<test>").fingerprint()


def _changed(data: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    copy: dict[str, Any] = yaml.safe_load(yaml.safe_dump(data))
    *parents, last = key.split(".")
    node = copy
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return copy


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("name", "renamed", "`name`"),
        ("final.epochs", 3, "`final:`"),
        ("search.trials", 99, "(`trials`)"),
        ("search.sampler", "random", "`sampler`"),
        ("search.seed", 7, "`seed`"),
        ("search.early_stopping.method", "asha", "`early_stopping`"),
    ],
)
def test_what_space_md_says_may_change_leaves_the_fingerprint(key: str, value: Any, said: str) -> None:
    assert said in _text("docs/space.md").split("## What may change", 1)[1].split("\n\n")[2]  # its list
    preset = yaml.safe_load((REPO / "spaces" / "mobilenet.yaml").read_text())
    assert _fingerprint(_changed(preset, key, value)) == _fingerprint(preset)


@pytest.mark.parametrize(
    ("key", "value", "same"),
    [
        ("search.supernet.finetune", {"epochs": 1}, True),
        ("search.supernet.reference_subnets", False, True),
        ("search.supernet.halving", {"enabled": False}, True),
        ("search.supernet.epochs", 2, False),
        ("search.strategy", "trials", False),
        ("training.epochs", 9, False),
    ],
)
def test_a_supernet_study_keeps_what_space_md_says(key: str, value: Any, same: bool) -> None:
    space = yaml.safe_load((REPO / "examples" / "supernet-digits.yaml").read_text())
    assert (_fingerprint(_changed(space, key, value)) == _fingerprint(space)) is same

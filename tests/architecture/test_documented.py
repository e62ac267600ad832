"""docs/architecture.md stays true: every stored value of search/records.py is documented under
its own vocabulary and every field of its typed records in its key's row, every strategy is
named, and every file and module it names is there (so a moved module cannot stay documented
where it was)."""

from __future__ import annotations

import dataclasses
import re
import typing
from enum import StrEnum
from pathlib import Path

import pytest

from nas.search import records, strategies

REPO = Path(__file__).resolve().parents[2]
SEARCH = REPO / "search"
DOC_PATH = REPO / "docs" / "architecture.md"
DOC = DOC_PATH.read_text(encoding="utf-8")
INLINE = re.compile(r"`([^`\n]+)`")

# Every StrEnum records.py defines (not the ones it imports).
VOCABULARIES = sorted(
    (
        value
        for value in vars(records).values()
        if isinstance(value, type) and issubclass(value, StrEnum) and value.__module__ == records.__name__
    ),
    key=lambda cls: cls.__name__,
)
ROOMS = {p.name for p in SEARCH.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
TOP = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")}


def _section(heading: str) -> str:
    start = DOC.index(f"\n## {heading}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end != -1 else len(DOC)]


STORED = _section("Stored names")


def _vocabulary_text(cls: type[StrEnum]) -> str:
    """The part of "Stored names" about one class: from where it is introduced, "(`Class`", to
    where the next of records.py's classes is."""
    starts = {other: STORED.find(f"(`{other.__name__}`") for other in VOCABULARIES}
    start = starts[cls]
    assert start != -1, f"docs/architecture.md's Stored names introduce no (`{cls.__name__}`...)"
    assert STORED.count(f"(`{cls.__name__}`") == 1, f"(`{cls.__name__}`...) introduced twice"
    after = [i for i in starts.values() if i > start]
    return STORED[start : min(after) if after else len(STORED)]


def test_records_defines_the_vocabularies_this_test_reads() -> None:
    names = {cls.__name__ for cls in VOCABULARIES}
    assert {"StudyAttr", "TrialAttr", "TunerAttr", "Screened", "StoppedBy", "PipeEvent"} <= names


@pytest.mark.parametrize("cls", VOCABULARIES, ids=lambda cls: cls.__name__)
def test_every_stored_value_is_documented_under_its_class(cls: type[StrEnum]) -> None:
    text = set(INLINE.findall(_vocabulary_text(cls)))
    missing = [member.value for member in cls if member.value not in text]
    assert not missing, f"docs/architecture.md documents no {cls.__name__} value {missing} (as `value`)"


# Every dataclass records.py defines: the typed study records, each stored under its KEY, and
# the figures they hold.
RECORDS = sorted(
    (
        value
        for value in vars(records).values()
        if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__ == records.__name__
    ),
    key=lambda cls: cls.__name__,
)
STORED_RECORDS = [cls for cls in RECORDS if "KEY" in vars(cls)]


def _held(cls: type) -> list[type]:
    """`cls` and every records.py dataclass its fields hold, in dicts, lists or unions, at any depth."""
    found = [cls]
    for hint in typing.get_type_hints(cls).values():
        inner = [hint]
        while inner:
            t = inner.pop()
            inner.extend(typing.get_args(t))
            if t in RECORDS and t not in found:
                found.extend(c for c in _held(t) if c not in found)
    return found


def _row(key: str) -> str:
    """The row of a stored key in one of "Stored names"' tables."""
    rows = [line for line in STORED.splitlines() if line.startswith(f"| `{key}` |")]
    assert len(rows) == 1, f"docs/architecture.md's Stored names has {len(rows)} rows for `{key}`"
    return rows[0]


def test_records_defines_the_records_this_test_reads() -> None:
    names = {cls.__name__ for cls in STORED_RECORDS}
    assert {"Confirmation", "FinalTraining"} <= names
    held = {c.__name__ for cls in STORED_RECORDS for c in _held(cls)}
    assert {"ConfirmedFigure", "FinalFigures"} <= held


def test_every_record_is_stored_under_a_key_or_held_by_one() -> None:
    held = {c for cls in STORED_RECORDS for c in _held(cls)}
    assert not [cls.__name__ for cls in RECORDS if cls not in held]
    assert all(isinstance(vars(cls)["KEY"], records.StudyAttr) for cls in STORED_RECORDS)


@pytest.mark.parametrize("cls", STORED_RECORDS, ids=lambda cls: cls.__name__)
def test_every_field_of_a_stored_record_is_documented_in_its_key_s_row(cls: type) -> None:
    key = vars(cls)["KEY"]
    named = set(INLINE.findall(_row(key)))
    missing = [f"{c.__name__}.{f.name}" for c in _held(cls) for f in dataclasses.fields(c) if f.name not in named]
    assert not missing, f"docs/architecture.md's row of `{key}` does not name {missing} (as `field`)"
    unnamed = [c.__name__ for c in _held(cls) if c.__name__ not in named]
    assert not unnamed, f"docs/architecture.md's row of `{key}` does not name the types {unnamed}"


def test_every_strategy_is_named_where_adding_one_is_described() -> None:
    named = set(INLINE.findall(_section("Adding a strategy")))
    missing = [name for name in strategies.names() if name not in named]
    assert not missing, f"docs/architecture.md's Adding a strategy does not name {missing} (as `name`)"


def _path_exists(token: str) -> bool | None:
    """Whether a path the doc names is there: under search/ for a room's (`engine/strategy.py`,
    `nets/build`, `cli/`), else from the repository root (`tests/...`, `nas/errors.py`);
    None for a token that is no path of ours."""
    token = token.rstrip("/")
    first = token.split("/")[0]
    if first in ROOMS or token in ("records.py", "runtime.py"):
        base = SEARCH
    elif first in TOP and "/" in token:
        base = REPO
    elif token.endswith(".py"):
        # A bare module name may be one every strategy package holds (`settings.py`).
        packages = [p for p in (SEARCH / "strategies").iterdir() if (p / "__init__.py").exists()]
        in_each = bool(packages) and all((p / token).exists() for p in packages)
        return (REPO / token).exists() or (SEARCH / token).exists() or in_each
    else:
        return None
    path = base / token
    return path.exists() or (path.suffix == "" and path.with_suffix(".py").exists())


PATHS = sorted(
    {
        token
        for token in INLINE.findall(DOC)
        if re.fullmatch(r"[A-Za-z0-9_.]+(/[A-Za-z0-9_.]+)*/?", token) and ("/" in token or token.endswith(".py"))
    }
)


def test_the_doc_names_paths() -> None:
    assert "engine/strategy.py" in PATHS and "strategies/settings.py" in PATHS


@pytest.mark.parametrize("token", PATHS)
def test_every_file_the_doc_names_is_there(token: str) -> None:
    assert _path_exists(token) is not False, f"docs/architecture.md names `{token}`, which is not there"


def _rooms_table() -> list[tuple[str, str]]:
    """(room folder, what it holds) for each row of "The rooms and their order"."""
    rows = []
    for line in _section("The rooms and their order").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and (m := re.fullmatch(r"`([a-z_]+)/`", cells[1])):
            rows.append((m.group(1), cells[2]))
    return rows


def test_the_rooms_table_lists_every_room() -> None:
    assert {room for room, _ in _rooms_table()} == ROOMS


@pytest.mark.parametrize("room,holds", _rooms_table(), ids=[room for room, _ in _rooms_table()])
def test_every_module_a_room_is_said_to_hold_is_in_it(room: str, holds: str) -> None:
    """Each bare name in parentheses is a module of the row's room: (`pareto`) in the row of
    `results/` means search/results/pareto.py."""
    within = " ".join(re.findall(r"\(([^()]*)\)", holds))
    named = [t for t in INLINE.findall(within) if re.fullmatch(r"[a-z_]+", t)]
    assert named
    # A room with packages (`strategies/`) holds the modules of its packages too.
    missing = [t for t in named if not any((SEARCH / room).glob(f"**/{t}.py"))]
    assert not missing, f"docs/architecture.md says search/{room}/ holds {missing}, which are not there"

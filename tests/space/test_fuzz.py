"""Fuzzing the space loader: whatever bytes a space file holds, loading it gives a space that
a study can store and rebuild, or one NasError line; never another exception.

The examples start from the presets and break them the ways files get broken: random bytes,
other encodings, cut short, a line replaced by YAML's odd corners, any value of any type at any
key, deep nesting, huge numbers and strings; and a sweep of every type of value at every key of
the schema. Each crash the fuzzing found is kept as an `@example` or in FOUND below.
"""

from __future__ import annotations

import codecs
import copy
import datetime
import json
import math
import sqlite3
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from nas.errors import NasError
from nas.search.space import SearchSpace, load_space, loading, space_from_dict, space_schema

from ..helpers import REPO, run_nas

# Deterministic for CI, and bounded: each test takes a few seconds on a small machine. The one
# file the tests write is overwritten by every example, so a function-scoped folder is fine.
FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
PRESETS = {p.stem: p.read_text() for p in sorted((REPO / "spaces").glob("*.yaml"))}
TINY = PRESETS["tiny"]

# YAML that PyYAML reads in surprising ways: implicit dates, explicit tags on the wrong text,
# aliases, merge keys, sets, sexagesimal and huge numbers, flow syntax, document markers.
SNIPPETS = [
    "2001-13-01",
    "2001-02-29 25:61:61",
    "!!int abc",
    "!!int 0x",
    "!!float abc",
    "!!bool maybe",
    "!!timestamp yesterday",
    "!!binary 'not base64!'",
    "!!binary aGVsbG8=",
    "!!null x",
    "!!str [1]",
    "!!map 3",
    "!!set {a, b}",
    "!!omap [a: 1, b: 2]",
    "!!pairs [a: 1]",
    "!!python/object:os.system ls",
    "!custom 3",
    "&a [*a]",
    "*undefined",
    "{<<: 3}",
    "{<<: [1]}",
    "[",
    "{a: 1",
    "'unterminated",
    "? [a, b]\n  : c",
    "{[1]: 2}",
    "1:30:00",
    "0o777",
    "0b1011",
    "-.inf",
    ".nan",
    "1e999",
    "9" * 5000,
    "0x" + "f" * 5000,
    '"\\0"',
    '"a\\nb\\u2028c"',
    '"\\ud800"',
    "---\nname: x\n---\nname: y",
    "...",
    "%YAML 1.1\n---",
    "\t- tab",
    "~nosuchuser/data",
    "'1e999'",
    "'3.5M'",
    "'9e400KB'",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=40),
    st.sampled_from(["relu", "adam", "tpe", "float32", "int8", "digits", "folder", "3.5M", "4MB", "1e999", ""]),
    st.dates(),
    st.datetimes(),
    st.binary(max_size=8),
    st.sampled_from([b"tiny", b"folder", b"accuracy"]),  # bytes that pass as text
)
# Dictionary keys include the words of the parameter syntax, so that choice/int/float/when
# forms with bad contents come up, not only unknown keys.
keys = st.one_of(
    st.sampled_from(["choice", "int", "float", "step", "log", "when", "value", "se", "kernel", "depth", "filters"]),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4) | st.sets(st.integers(1, 9)),
    max_leaves=12,
)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key and list position in a loaded document."""
    out = [prefix] if prefix else []
    if isinstance(data, dict):
        for key, value in data.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out += _paths(value, (*prefix, i))
    return out


def _mutate(data: Any, path: tuple[Any, ...], action: str, value: Any) -> Any:
    *parents, last = path
    node = data
    for part in parents:
        node = node[part]
    if action == "delete":
        del node[last]
    elif action == "add" and isinstance(node, dict):
        node[f"{last}_extra"] = value
    else:
        node[last] = value
    return data


def _check(source: Path | dict[str, Any]) -> None:
    """A space the study can store and `nas worker` rebuild, or one printable NasError line."""
    load: Callable[[], SearchSpace] = (
        (lambda: space_from_dict(source, "d")) if isinstance(source, dict) else (lambda: load_space(str(source)))
    )
    try:
        space = load()
    except NasError as exc:
        message = str(exc)
        assert message and message.isprintable() and len(message.splitlines()) == 1, message
        assert len(message) < 1000, message  # long values the user wrote are shortened
        return
    # What `nas search` does with a space before any trial: fingerprint and document on the
    # study (as JSON), the sampler's distributions; `nas worker` rebuilds it from the document.
    space.distributions()
    for seed in (space.spec.search.seed, space.spec.dataset.seed):  # the sampler's and the split's
        numpy.random.RandomState(seed)
    stored = json.loads(json.dumps(space.document))
    assert space_from_dict(stored, "study").fingerprint() == space.fingerprint()


@pytest.fixture
def space_file(tmp_path: Path) -> Path:
    return tmp_path / "space.yaml"


def _schema_paths(model: type[BaseModel], prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key the schema knows, the first stage standing for all."""
    out = []
    for name, field in model.model_fields.items():
        path, annotation = (*prefix, name), field.annotation
        out.append(path)
        if typing.get_origin(annotation) is list:
            path, annotation = (*path, 0), typing.get_args(annotation)[0]
        for kind in (annotation, *typing.get_args(annotation)):
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                out += _schema_paths(kind, path)
    return out


# One value of every type YAML (and a Python caller) can give, and the parameter forms.
EVERY_TYPE = [
    None, True, 0, -1, 7, 2**40, 2**63, 0.5, 1e-9, 1e300, math.nan, math.inf, "", "text", "a\nb", "1e999", "3.5M",
    "~nosuchuser/x", datetime.date(2024, 1, 1), datetime.datetime(2024, 1, 1, 12), b"tiny", {1, 2}, (1, 2), [],
    [1, "a"], {}, {1: 2}, {"choice": [1, 2]}, {"int": [1, 2**70]}, {"float": [-1.0, 1.0], "log": True},
    {"value": 3, "when": {"se": True}},
]  # fmt: skip


@pytest.mark.parametrize("path", _schema_paths(space_schema()), ids=lambda path: ".".join(map(str, path)))
def test_every_type_at_every_key(path: tuple[Any, ...]) -> None:
    base = yaml.safe_load(TINY)
    base["dataset"] = {"source": "folder", "path": "/data"}  # so that path and its kin are used
    for value in EVERY_TYPE:
        document = copy.deepcopy(base)
        node = document
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(part, str) else node[part]
        node[path[-1]] = value
        _check(document)


@FUZZ
@given(data=st.binary(max_size=3000))
@example(data=TINY.encode("utf-16-le"))  # UnicodeDecodeError
@example(data=(TINY + "# café\n").encode("latin-1"))  # UnicodeDecodeError
def test_random_bytes(space_file: Path, data: bytes) -> None:
    space_file.write_bytes(data)
    _check(space_file)


@FUZZ
@given(
    preset=st.sampled_from(sorted(PRESETS)),
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "cp1252"]),
    extra=st.text(max_size=20),
    bom=st.sampled_from([b"", codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE]),
)
def test_encodings(space_file: Path, preset: str, encoding: str, extra: str, bom: bytes) -> None:
    text = PRESETS[preset] + f"# {extra}\n"
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        data = text.encode(encoding, errors="replace")
    space_file.write_bytes(bom + data)
    _check(space_file)


@FUZZ
@given(preset=st.sampled_from(sorted(PRESETS)), data=st.data())
def test_values_anywhere(space_file: Path, preset: str, data: st.DataObject) -> None:
    document = yaml.safe_load(PRESETS[preset])
    path = data.draw(st.sampled_from(_paths(document)), label="path")
    action = data.draw(st.sampled_from(["replace", "replace", "delete", "add"]), label="action")
    document = _mutate(document, path, action, data.draw(values, label="value"))
    space_file.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    _check(space_file)


@FUZZ
@given(preset=st.sampled_from(sorted(PRESETS)), data=st.data())
def test_lines_replaced(space_file: Path, preset: str, data: st.DataObject) -> None:
    lines = PRESETS[preset].splitlines()
    i = data.draw(st.integers(0, len(lines) - 1), label="line")
    snippet = data.draw(st.sampled_from(SNIPPETS) | st.text(max_size=30), label="snippet")
    key, colon, _ = lines[i].partition(":")
    lines[i] = f"{key}: {snippet}" if colon else snippet
    space_file.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    _check(space_file)


@FUZZ
@given(preset=st.sampled_from(sorted(PRESETS)), data=st.data())
def test_cut_and_spliced(space_file: Path, preset: str, data: st.DataObject) -> None:
    text = PRESETS[preset].encode()
    cut = data.draw(st.integers(0, len(text)), label="cut")
    junk = data.draw(st.binary(max_size=20) | st.text(max_size=20).map(str.encode), label="junk")
    keep = data.draw(st.booleans(), label="keep rest")
    space_file.write_bytes(text[:cut] + junk + (text[cut:] if keep else b""))
    _check(space_file)


@settings(FUZZ, max_examples=40)
@given(
    depth=st.integers(1, 3000),
    style=st.sampled_from(["[", "{a: ", "- ", "a:\n", "&x ["]),
)
def test_deep_nesting(space_file: Path, depth: int, style: str) -> None:
    if style == "- ":
        body = "".join("  " * i + "-\n" for i in range(depth)) + "  " * depth + "1\n"
    elif style == "a:\n":
        body = "\n" + "".join("  " * (i + 1) + "a:\n" for i in range(depth)) + "  " * (depth + 1) + "1\n"
    else:
        closing = {"[": "]", "{a: ": "}", "&x [": "]"}[style]
        body = style * depth + "1" + closing * depth + "\n"
    space_file.write_text(f"name: deep\nmodel: {body}")
    _check(space_file)


@settings(FUZZ, max_examples=12)
@given(
    key=st.sampled_from(["name", "dataset.path", "model.stages[0].kernel", "constraints.max_params"]),
    size=st.sampled_from([10**3, 10**5]),
    char=st.sampled_from(["a", "9", "é", "\\n"]),
)
def test_huge_strings(space_file: Path, key: str, size: int, char: str) -> None:
    document = yaml.safe_load(TINY)
    huge = char * size
    if key == "name":
        document["name"] = huge
    elif key == "dataset.path":
        document["dataset"] = {"source": "folder", "path": huge}
    elif key == "constraints.max_params":
        document["constraints"] = {"max_params": huge}
    else:
        document["model"]["stages"][0]["kernel"] = huge
    space_file.write_text(yaml.safe_dump(document, width=1 << 30), encoding="utf-8")
    _check(space_file)


# Each crash the fuzzing found, with the message it gives now.
FOUND = [
    ("utf-16 without BOM", TINY.encode("utf-16-le"), "line 1: invalid YAML (unacceptable character #x0000"),
    ("latin-1", ("# café\n" + TINY).encode("latin-1"), "line 1: not UTF-8 text (byte 0xe9); save the file as UTF-8"),
    ("date", TINY.replace("name: tiny", "name: 2001-13-01"), "cannot read '2001-13-01' as timestamp: month must be"),
    ("tag int", TINY.replace("epochs: 3", "epochs: !!int abc"), "line 23: invalid YAML (cannot read 'abc' as int)"),
    ("tag bool", TINY.replace("epochs: 3", "epochs: !!bool abc"), "invalid YAML (cannot read 'abc' as bool)"),
    ("tag timestamp", TINY.replace("epochs: 3", "epochs: !!timestamp x"), "cannot read 'x' as timestamp"),
    ("tag float", TINY.replace("epochs: 3", "epochs: !!float abc"), "invalid YAML (cannot read 'abc' as float)"),
    ("5000 digits", TINY.replace("epochs: 3", "epochs: " + "9" * 5000), "line 23: invalid YAML (cannot read '999"),
    ("hex digits", TINY.replace("epochs: 3", "epochs: 0x" + "f" * 5000), "training.epochs: integer too large"),
    ("deep list", "name: x\nmodel: " + "[" * 5000 + "]" * 5000, "line 2: invalid YAML (nested more than 32 levels"),
    ("deep map", "name: x\nmodel: " + "{a: " * 900 + "1" + "}" * 900, "invalid YAML (nested more than 32 levels"),
    ("alias in itself", "name: x\nmodel: &a [*a]\n", "model[0][0][0]...: nested more than 32 levels deep"),
    ("infinite count", TINY + "constraints: {max_params: '1e999'}\n", "max_params: expected a whole number"),
    ("unknown home", TINY.replace("source: digits", "source: folder\n  path: ~nosuchuser/x"), "cannot find the home"),
    ("binary path", TINY.replace("source: digits", "source: folder\n  path: !!binary aGk="), "is binary (!!binary)"),
    ("line break in a key", TINY.replace("expansion: 2}", 'expansion: {value: 2, when: {"a\\nb": 1}}}'), "'a\\nb'"),
    ("negative seed", TINY.replace("trials: 3\n  seed: 0", "trials: 3\n  seed: -1"), "search.seed: -1: input should"),
    ("NUL in text", TINY.replace("name: tiny", 'name: "a\\0b"'), "name: text may not hold a NUL character"),
]


@pytest.mark.parametrize(("content", "expected"), [f[1:] for f in FOUND], ids=[f[0] for f in FOUND])
def test_found_by_fuzzing(space_file: Path, content: str | bytes, expected: str) -> None:
    if isinstance(content, str):
        content = content.encode()
    space_file.write_bytes(content)
    with pytest.raises(NasError) as caught:
        load_space(str(space_file))
    message = str(caught.value)
    assert expected in message and message.isprintable(), message


def test_empty_constraint_is_no_constraint(space_file: Path) -> None:
    """`max_params:` with nothing after it (null): pydantic compared None with the bound."""
    space_file.write_text(TINY + "constraints:\n  max_params:\n  max_flops: 600k\n  max_model_size:\n")
    constraints = load_space(str(space_file)).spec.constraints
    assert (constraints.max_params, constraints.max_flops, constraints.max_model_size) == (None, 600_000, None)


def test_other_unicode_encodings_load(space_file: Path) -> None:
    """YAML allows UTF-16 and UTF-32 with a byte-order mark; the space is the same."""
    for encoding in ("utf-8-sig", "utf-16", "utf-32"):
        space_file.write_bytes(TINY.encode(encoding))
        assert load_space(str(space_file)).fingerprint() == load_space("tiny").fingerprint()


def test_one_megabyte_value(space_file: Path) -> None:
    space_file.write_text(TINY.replace("name: tiny", "name: " + "a" * 2**20))
    with pytest.raises(NasError, match=r"name: 'a{30,}\.\.\.a{30,}': string should match pattern"):
        load_space(str(space_file))


def test_file_name_too_long_and_big_file(tmp_path: Path) -> None:
    with pytest.raises(NasError, match=r"^space file a+: cannot read it \(File name too long\)$"):
        load_space("a" * 300)
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(11 * 2**20)
    with pytest.raises(NasError, match="is over 10 MB: not a space file"):
        load_space(str(big))


PLAIN = "a space file holds text, numbers, true/false, lists, mappings"


def test_values_that_are_not_plain_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a Python caller can put in a dict but a study cannot store as JSON."""
    document = yaml.safe_load(TINY)
    for value, expected in [
        (datetime.date(2024, 1, 1), "name: 2024-01-01 is a date; quote it to make it text"),
        ({1, 2}, f"name: {{1, 2}} is a set; {PLAIN}"),
        (b"\x00", f"name: b'\\x00' is binary (!!binary); {PLAIN}"),
        ({0: "a"}, "name: key 0 must be text (quote it)"),
        ({None: "a"}, "name: key None must be text (quote it)"),
    ]:
        with pytest.raises(NasError) as caught:
            space_from_dict({**document, "name": value}, "d")
        assert str(caught.value) == f"d: {expected}"
    monkeypatch.setattr(loading, "MAX_VALUES", 1000)
    laughs = ["lol"] * 40
    many = [laughs] * 40  # shared, as YAML aliases share them: a "billion laughs" in small
    with pytest.raises(NasError, match="more than 1,000 values"):
        space_from_dict({**document, "dataset": {"classes": many}}, "d")


def test_cli_one_error_line_and_database_unchanged(tmp_path: Path) -> None:
    """Fuzz-found files through the real `nas search` in a fresh process: exit status 2, one
    `Error:` line, an existing database untouched and no new one."""
    existing = tmp_path / "existing.db"
    with sqlite3.connect(existing) as con:
        con.execute("CREATE TABLE keep (x)")
        con.execute("INSERT INTO keep VALUES (1)")
    before = existing.read_bytes()
    bad = {
        "date.yaml": TINY.replace("name: tiny", "name: 2001-13-01").encode(),
        "deep.yaml": ("name: x\nmodel: " + "[" * 5000 + "]" * 5000).encode(),
        "latin1.yaml": ("# café\n" + TINY).encode("latin-1"),
    }
    for (name, content), storage in zip(bad.items(), ("existing.db", "new.db", "existing.db"), strict=True):
        (tmp_path / name).write_bytes(content)
        result = run_nas("search", name, "--storage", f"sqlite:///{storage}", cwd=tmp_path, timeout=120)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode == 2, result.stderr
        assert len(lines) == 1 and lines[0].startswith(f"Error: {name}: "), result.stderr
    assert existing.read_bytes() == before
    assert not (tmp_path / "new.db").exists()

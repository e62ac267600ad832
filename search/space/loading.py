"""Loading a space file or mapping with one-line errors: safe YAML, plain data, paths relative to
the file, the schema's messages (the schema is spec.py; the loaded space, searchspace.py)."""

from __future__ import annotations

import codecs
import datetime
import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from nas.errors import NasError
from nas.search.space.candidate import Candidate, StagePlan
from nas.search.space.params import short, shown
from nas.search.space.schema import space_schema
from nas.search.space.searchspace import SearchSpace
from nas.search.space.spec import (
    OBJECTIVES,
    PRECISIONS,
    AugmentationSpec,
    ComputeSpec,
    ConstraintsSpec,
    DatasetSpec,
    MeasureSpec,
    SearchSpec,
    SpaceSpec,
    TFRecordSpec,
    TrainingSpec,
)
from nas.search.strategies import space_part
from nas.spaces import preset_names

# The schema's names stay importable from here, where the rest of the package looks for them.
__all__ = [
    "OBJECTIVES",
    "PRECISIONS",
    "AugmentationSpec",
    "Candidate",
    "ComputeSpec",
    "ConstraintsSpec",
    "DatasetSpec",
    "MeasureSpec",
    "SearchSpace",
    "SearchSpec",
    "SpaceSpec",
    "StagePlan",
    "TFRecordSpec",
    "TrainingSpec",
    "load_space",
    "space_from_dict",
]


# ---- loading -----------------------------------------------------------------------------


def _path_of(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + short(str(part))  # an unknown key may be 100 KB
    return out or "(top level)"


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed in the mapping that holds loc[-1], for 'unknown key' messages."""
    model: Any = SpaceSpec
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            return []
        annotation = field.annotation
        args = getattr(annotation, "__args__", ())
        model = args[0] if args and isinstance(args[0], type) else annotation
    return list(getattr(model, "model_fields", {}))


def format_validation_error(exc: ValidationError) -> str:
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    where = _path_of(loc)
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc)
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"{where}: unknown key{hint}"
    if err["type"] == "missing":
        return f"{where}: required key is missing"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "value_error" and (key := re.match(r"^([a-z_][a-z0-9_.\[\]]*): ", msg)):
        # A check across keys names the key it is about: report it at that key's path.
        return f"{where + '.' if loc else ''}{key.group(1)}: {msg[key.end() :]}"
    if err["type"] in ("literal_error", "string_pattern_mismatch") or msg.startswith("Input should"):
        msg = f"{shown(err.get('input'))}: {msg[0].lower()}{msg[1:]}"
    return f"{where}: {msg}"


# No space file is near this size; a bigger one is the wrong file (a data set, a log), which
# would take minutes to parse.
MAX_FILE_BYTES = 10 * 2**20
# YAML is UTF-8, or UTF-16/32 with a byte-order mark (UTF-32's LE mark starts like UTF-16's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def _decode(data: bytes, source: str) -> str:
    codec = next((codec for bom, codec in _BOMS if data.startswith(bom)), "utf-8")
    try:
        return data.decode(codec)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].decode(codec, errors="replace").count("\n") + 1
        name = codec.removesuffix("-sig").upper()
        raise NasError(
            f"{source}: line {line}: not {name} text (byte 0x{data[exc.start]:02x}); save the file as UTF-8"
        ) from None


def _read(ref: str) -> tuple[str, str]:
    path = Path(ref)
    try:
        is_file, exists = path.is_file(), path.exists()
        if is_file:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise NasError(f"space file {ref} is over {MAX_FILE_BYTES // 2**20} MB: not a space file")
            return _decode(path.read_bytes(), str(path)), str(path)
    except OSError as exc:  # a name too long for the file system, a file we may not read
        raise NasError(f"space file {ref}: cannot read it ({exc.strerror or exc})") from None
    if exists:
        raise NasError(f"space file {ref} is not a file")
    # A preset name, or reference/NAME for the published networks shipped beside them.
    preset = resources.files("nas.spaces").joinpath(*f"{ref}.yaml".split("/", 1))
    if re.fullmatch(r"(reference/)?[\w.-]+", ref) and not ref.endswith((".yaml", ".yml")) and preset.is_file():
        return preset.read_text(encoding="utf-8"), f"preset {ref}"
    raise NasError(f"space file {ref} not found (and no preset of that name; presets: {', '.join(preset_names())})")


def space_from_dict(data: Any, source: str = "<dict>") -> SearchSpace:
    if not isinstance(data, dict):
        raise NasError(f"{source}: a space file must be a mapping with name, model, ... at its top level")
    if problem := _not_plain(data):
        raise NasError(f"{source}: {problem}")
    try:
        space = SearchSpace(space_schema().model_validate(data), source, data)
    except ValidationError as exc:
        raise NasError(f"{source}: {format_validation_error(exc)}") from None
    try:
        space_part(space.spec.search.strategy).check(space)
    except NasError as exc:
        raise NasError(f"{source}: {exc}") from None
    return space


def load_space(ref: str) -> SearchSpace:
    """Load a space from a file path or a preset name; every problem is a one-line NasError."""
    text, source = _read(ref)
    try:
        loader = _Loader(text)  # its reader refuses control characters at once
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line if mark is not None else None
        if isinstance(exc, yaml.reader.ReaderError):  # a control character: at a position, not a line
            line = text.count("\n", 0, exc.position)
        where = f"line {line + 1}: " if line is not None else ""
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
        said = problem if isinstance(exc, _DuplicateKey) else f"invalid YAML ({problem})"
        raise NasError(f"{source}: {where}{said}") from None
    if isinstance(data, dict) and source == str(Path(ref)):
        data = _with_absolute_paths(data, Path(ref).resolve().parent, source)
    return space_from_dict(data, source)


# Deeper than any space file goes (about 6 levels); also bounds PyYAML's recursive composer.
MAX_DEPTH = 32
# Values in one document, aliases counted each time they are used (a "billion laughs").
MAX_VALUES = 1_000_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _DuplicateKey(yaml.composer.ComposerError):
    """A key written twice in one mapping, which PyYAML would take silently (the last wins)."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with every failure a YAMLError at a line: it lets a few bad scalars
    out as other exceptions (`2001-13-01`, `!!int abc`, 5000 digits) and deep nesting as a
    RecursionError."""

    depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.depth >= MAX_DEPTH:
            problem = f"nested more than {MAX_DEPTH} levels deep"
            raise yaml.composer.ComposerError(None, None, problem, self.get_mark())
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:  # the anchor's name, or None
        """The mapping as written, refused if a key is in it twice. Keys compare as written with
        their resolved tag (a space file's keys are text); `<<` merge keys may repeat, and the
        keys they bring in may be overridden, as YAML allows."""
        node: yaml.MappingNode = super().compose_mapping_node(anchor)
        first: dict[tuple[str, str], yaml.Node] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag == _MERGE_TAG:
                continue
            seen = first.setdefault((key.tag, key.value), key)
            if seen is not key:
                problem = f"key {shown(key.value)} appears twice (first on line {seen.start_mark.line + 1})"
                raise _DuplicateKey(None, None, problem, key.start_mark)
        return node

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
            value = shown(node.value) if isinstance(node, yaml.ScalarNode) else "this value"
            kind = str(node.tag).rpartition(":")[2]
            # Only a date's reason says more than "cannot read" (int() and float() repeat the value).
            reason = f"cannot read {value} as {kind}" + (f": {exc}" if kind == "timestamp" and str(exc) else "")
            raise yaml.constructor.ConstructorError(None, None, reason, node.start_mark) from None


def _not_plain(data: Any) -> str | None:
    """Why `data` is more than plain JSON data (which the study stores), or None. Iterative and
    bounded, so that an alias inside itself or aliases that multiply are an error, not a hang."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    for _ in range(MAX_VALUES):
        if not stack:
            return None
        loc, value = stack.pop()
        if len(loc) > MAX_DEPTH:
            return f"{_path_of(loc[:4])}...: nested more than {MAX_DEPTH} levels deep (an alias inside itself?)"
        if isinstance(value, dict):
            if keys := [k for k in value if not isinstance(k, str)]:
                return f"{_path_of(loc)}: key {shown(keys[0])} must be text (quote it)"
            stack.extend(((*loc, k), v) for k, v in reversed(value.items()))
        elif isinstance(value, list | tuple):
            stack.extend(((*loc, i), v) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, str) and "\0" in value:
            return f"{_path_of(loc)}: text may not hold a NUL character (\\0)"
        elif isinstance(value, int) and abs(value) >= 2**63:
            return f"{_path_of(loc)}: integer too large (over 2**63)"
        elif isinstance(value, datetime.date):
            return f"{_path_of(loc)}: {value} is a date; quote it to make it text"
        elif not isinstance(value, str | int | float) and value is not None:
            kind = "binary (!!binary)" if isinstance(value, bytes) else f"a {type(value).__name__}"
            plain = "a space file holds text, numbers, true/false, lists, mappings"
            return f"{_path_of(loc)}: {shown(value)} is {kind}; {plain}"
    return f"more than {MAX_VALUES:,} values (aliases that repeat each other?)"


def _with_absolute_paths(data: dict[str, Any], base: Path, source: str) -> dict[str, Any]:
    """Data paths in a space file are relative to the file, so a study (and `nas worker`,
    which reads the space from the study) finds them from any working folder."""
    dataset = data.get("dataset")
    if not isinstance(dataset, dict):
        return data
    fixed = dict(dataset)
    for key in ("path", "validation_path", "test_path"):
        value = fixed.get(key)
        if not isinstance(value, str) or not value:
            continue
        try:
            path = Path(value).expanduser()
        except RuntimeError:  # ~name of a user this machine does not know
            raise NasError(f"{source}: dataset.{key}: cannot find the home folder in {value!r}") from None
        fixed[key] = str(path if path.is_absolute() else base / value)
    return {**data, "dataset": fixed}

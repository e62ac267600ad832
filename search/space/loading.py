"""A loaded space: the flat, named parameters it samples, the Candidates they make, and
loading a space file with one-line errors (the schema itself is in spec.py)."""

from __future__ import annotations

import codecs
import datetime
import json
import re
from dataclasses import asdict, replace
from importlib import resources
from pathlib import Path
from typing import Any

import optuna
import yaml
from pydantic import ValidationError

from nas.errors import NasError
from nas.search.space.candidate import Candidate, StagePlan
from nas.search.space.compression_spec import COMPRESSION_DEFAULTS
from nas.search.space.families import FAMILIES
from nas.search.space.model_spec import GLOBAL_FIELDS, GLOBAL_OFF, STAGE_DEFAULTS, STAGE_FIELDS, sampling_order
from nas.search.space.params import Param, short, shown
from nas.search.space.spec import (
    COMPUTE_DEFAULTS,
    OBJECTIVES,
    PRECISIONS,
    TRAINING_DEFAULTS,
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
from nas.search.space.strategies import rules_for

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


class SearchSpace:
    """A validated space: names its parameters and turns samples into Candidates.

    Parameters have flat Optuna names: globals (`width_multiplier`, `phi`), `shared.kernel`
    for one value used by every stage that does not set its own, `stage2.kernel` for a
    stage's own, then training and compute ones. Conditions refer to these names.
    """

    def __init__(self, spec: SpaceSpec, source: str = "<dict>", document: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.source = source
        # The mapping the space was read from: stored on the study so that `nas worker` on
        # another machine rebuilds the same space without the file.
        self.document = document
        self._sources = {
            (i, field): self._source(i, field) for i in range(len(spec.model.stages)) for field in STAGE_FIELDS
        }
        self._params = self._flatten()

    @property
    def name(self) -> str:
        return self.spec.name

    def stage_source(self, stage: int, field: str) -> str:
        """The parameter a stage's field takes its value from."""
        return self._sources[(stage, field)]

    def _source(self, stage: int, field: str) -> str:
        m = self.spec.model
        if field in m.stages[stage].set_params():
            return f"stage{stage}.{field}"
        if field in m.shared.set_params():
            return f"shared.{field}"
        if field == "activation":
            return "activation"
        return f"stage{stage}.{field}"

    def _flatten(self) -> dict[str, Param]:
        m, rules = self.spec.model, FAMILIES[self.spec.model.family]
        out: dict[str, Param] = {}

        def add(scope: dict[str, Param], rename: Any) -> None:
            for key in sampling_order(scope):
                p = scope[key]
                when = tuple((rename(k), allowed) for k, allowed in p.when)
                out[rename(key)] = replace(p, when=when)

        globals_ = m.global_params()
        globals_.setdefault("resolution", Param("int", value=self.spec.dataset.image_size))
        globals_.setdefault("activation", Param("str", value=rules.activation))
        globals_.setdefault("drop_connect_rate", Param("float", value=rules.drop_connect_rate))
        add({k: globals_[k] for k in GLOBAL_FIELDS}, lambda k: k)
        if m.compound is not None:
            out["phi"] = m.compound.phi
        add(m.shared.set_params(), lambda k: f"shared.{k}")
        shared = m.shared.set_params()
        for i, stage in enumerate(m.stages):
            own = stage.set_params()
            scope = {
                f: own.get(f) or Param(STAGE_FIELDS[f][0], value=STAGE_DEFAULTS[f])
                for f in STAGE_FIELDS
                if f in own or (f not in shared and f != "activation")
            }
            add(scope, lambda k, i=i: self.stage_source(i, k))
        add(self.spec.training.params(), lambda k: k)
        add(self.spec.compute.params(), lambda k: k)
        pruning = self.spec.compression.pruning.params()
        add(pruning, lambda k: f"pruning.{k}")
        add({"quantization": self.spec.compression.quantization}, lambda k: k)
        return out

    def parameters(self) -> dict[str, Param]:
        """Every parameter by its Optuna name, fixed ones included, in sampling order."""
        return dict(self._params)

    def searchable(self) -> dict[str, Param]:
        return {name: p for name, p in self._params.items() if not p.fixed}

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {name: p.distribution() for name, p in self.searchable().items()}

    def configurations(self) -> list[dict[str, Any]]:
        """Every configuration of a finite space, as the trial parameters a sampler would
        suggest (searchable and active ones only), in a fixed order: a parameter whose
        conditions do not hold in a branch is left out of that branch, as in `sample`."""
        continuous = [name for name, p in self.searchable().items() if not p.discrete]
        if continuous:
            raise NasError(f"{continuous[0]}: a continuous range has no finite list of values (use choice)")
        branches: list[tuple[dict[str, Any], dict[str, Any]]] = [({}, {})]  # (all values, searchable ones)
        for name, p in self._params.items():
            grown = []
            for values, params in branches:
                if not p.active(values):
                    grown.append((values, params))
                elif p.fixed:
                    grown.append(({**values, name: p.value}, params))
                else:
                    grown += [({**values, name: v}, {**params, name: v}) for v in p.values()]
            branches = grown
        return [params for _, params in branches]

    def sample(self, trial: optuna.Trial, *, num_classes: int, channels: int) -> Candidate:
        """Define-by-run: a parameter whose conditions do not hold is never suggested."""
        values: dict[str, Any] = {}
        for name, p in self._params.items():
            if p.active(values):
                values[name] = p.suggest(trial, name)
        return self._candidate(values, num_classes=num_classes, channels=channels)

    def candidate(self, params: dict[str, Any], *, num_classes: int, channels: int) -> Candidate:
        """Rebuild the Candidate of a stored trial from its parameters."""
        values: dict[str, Any] = {}
        for name, p in self._params.items():
            if not p.active(values):
                continue
            if p.fixed:
                values[name] = p.value
            elif name in params:
                values[name] = params[name]
            else:
                raise NasError(f"trial parameters lack '{name}' (was the space changed?)")
        return self._candidate(values, num_classes=num_classes, channels=channels)

    def active_values(self, params: dict[str, Any]) -> dict[str, Any]:
        """The values of a trial's active parameters, fixed ones included."""
        values: dict[str, Any] = {}
        for name, p in self._params.items():
            if p.active(values):
                values[name] = p.value if p.fixed else params.get(name)
        return values

    def _candidate(self, v: dict[str, Any], *, num_classes: int, channels: int) -> Candidate:
        m, t = self.spec.model, self.spec.training
        rules = FAMILIES[m.family]
        # An inactive parameter takes its "off" value.
        defaults: dict[str, Any] = {
            **GLOBAL_OFF,
            "resolution": self.spec.dataset.image_size,
            "stem_stride": 2,
            "activation": rules.activation,
            "phi": 0.0,
            **TRAINING_DEFAULTS,
            **COMPUTE_DEFAULTS,
            **{f"pruning.{k}": COMPRESSION_DEFAULTS[k] for k in ("method", "sparsity")},
            "quantization": COMPRESSION_DEFAULTS["quantization"],
        }

        def get(name: str) -> Any:
            value = v.get(name)
            return defaults[name] if value is None else value

        activation = str(get("activation"))

        def stage_value(i: int, field: str) -> Any:
            value = v.get(self.stage_source(i, field))
            if value is None:
                return activation if field == "activation" else STAGE_DEFAULTS[field]
            return value

        stages = tuple(
            StagePlan(
                filters=int(stage_value(i, "filters")),
                stride=int(stage_value(i, "stride")),
                depth=int(stage_value(i, "depth")),
                kernel=int(stage_value(i, "kernel")),
                expansion=float(stage_value(i, "expansion")),
                se=bool(stage_value(i, "se")),
                se_ratio=float(stage_value(i, "se_ratio")),
                activation=str(stage_value(i, "activation")),
            )
            for i in range(len(m.stages))
        )
        width, depth = float(get("width_multiplier")), float(get("depth_multiplier"))
        resolution = int(get("resolution"))
        if m.compound is not None:
            phi = float(get("phi"))
            depth *= m.compound.alpha**phi
            width *= m.compound.beta**phi
            resolution = round(resolution * m.compound.gamma**phi)
        return Candidate(
            num_classes=num_classes,
            image_size=self.spec.dataset.image_size,
            channels=channels,
            width_multiplier=round(width, 6),
            stem_filters=m.stem_filters,
            stem_stride=int(get("stem_stride")),
            head_filters=m.head_filters,
            dropout=float(get("dropout")),
            stages=stages,
            epochs=t.epochs,
            batch_size=int(get("batch_size")),
            optimizer=str(get("optimizer")),
            learning_rate=float(get("learning_rate")),
            precision=str(get("precision")),
            xla=bool(get("xla")),
            family=m.family,
            depth_multiplier=round(depth, 6),
            resolution=resolution,
            activation=activation,
            drop_connect_rate=float(get("drop_connect_rate")),
            head_hidden=rules.head_hidden if m.head_hidden is None else m.head_hidden,
            pruning=str(get("pruning.method")),
            sparsity=float(get("pruning.sparsity")),
            quantization=str(get("quantization")),
        )

    def with_precisions(self, allowed: list[str]) -> SearchSpace:
        """This space with only `allowed` precision policies (for a device that cannot run
        the others)."""
        param = Param("str", value=allowed[0]) if len(allowed) == 1 else Param("str", choices=tuple(allowed))
        compute = self.spec.compute.model_copy(update={"precision": param})
        return SearchSpace(self.spec.model_copy(update={"compute": compute}), self.source, self.document)

    def fingerprint(self) -> str:
        """What must not change under a running study: everything but `name` and the search's
        budget and sampler; the strategy and the supernet's settings are in it, since a
        supernet study's trials are scored by weights those settings trained."""
        # Defaults left out: a later version that adds a knob with a default does not make
        # every existing study look changed (a `trials` study's fingerprint has no `search`).
        # `final` acts after the search (nas train), like the search's own budget and sampler.
        data = self.spec.model_dump(mode="json", exclude={"name", "search", "final"}, exclude_defaults=True)
        stride = self.spec.model.stem_stride
        if stride.fixed and "stem_stride" in data["model"]:
            # A fixed stride was a plain number before it became searchable: studies made then resume.
            data["model"]["stem_stride"] = stride.value
        if (search := rules_for(self.spec.search).fingerprint(self.spec.search)) is not None:
            data["search"] = search
        return json.dumps(_plain(data), sort_keys=True)


def _plain(value: Any) -> Any:
    if isinstance(value, Param):
        return {k: v for k, v in asdict(value).items() if v not in (None, (), False)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


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


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("nas.spaces").iterdir() if p.name.endswith(".yaml"))


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
        space = SearchSpace(SpaceSpec.model_validate(data), source, data)
    except ValidationError as exc:
        raise NasError(f"{source}: {format_validation_error(exc)}") from None
    try:
        rules_for(space.spec.search).check(space)
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
        raise NasError(f"{source}: {where}invalid YAML ({problem})") from None
    if isinstance(data, dict) and source == str(Path(ref)):
        data = _with_absolute_paths(data, Path(ref).resolve().parent, source)
    return space_from_dict(data, source)


# Deeper than any space file goes (about 6 levels); also bounds PyYAML's recursive composer.
MAX_DEPTH = 32
# Values in one document, aliases counted each time they are used (a "billion laughs").
MAX_VALUES = 1_000_000


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

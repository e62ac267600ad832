"""The space file: schema (pydantic), loading with one-line errors, and the Candidate it yields."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, replace
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import optuna
import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from .arch import FAMILIES
from .candidate import Candidate, StagePlan
from .compression_spec import COMPRESSION_DEFAULTS, CompressionSpec
from .errors import NasError
from .model_spec import GLOBAL_FIELDS, STAGE_DEFAULTS, STAGE_FIELDS, ModelSpec, check_scope, sampling_order
from .params import Check, Kind, Param, between, one_of, parse_param
from .units import parse_bytes, parse_count

__all__ = ["Candidate", "SearchSpace", "SpaceSpec", "StagePlan", "load_space", "space_from_dict"]


def _parsed(kind: Kind, check: Check | None = None) -> BeforeValidator:
    return BeforeValidator(lambda raw: parse_param(raw, kind, check))


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)


class TFRecordSpec(_Spec):
    image_feature: str = "image"
    image_type: Literal["encoded", "raw"] = Field("encoded", description="encoded: JPEG/PNG/BMP/GIF bytes")
    raw_shape: tuple[int, int, int] | None = Field(None, description="(H, W, C) of raw uint8 images")
    label_feature: str = "label"
    label_type: Literal["int64", "string"] = "int64"

    @model_validator(mode="after")
    def _raw_needs_shape(self) -> TFRecordSpec:
        if self.image_type == "raw" and self.raw_shape is None:
            raise ValueError("raw_shape: required when image_type is raw")
        return self


class AugmentationSpec(_Spec):
    """Random transforms of training batches, run on the device as Keras preprocessing layers."""

    flip: Literal["none", "horizontal", "vertical", "both"] = "none"
    rotation: float = Field(0.0, ge=0, le=0.5, description="up to this fraction of a full turn")
    crop: float = Field(0.0, ge=0, lt=1, description="zoom in by up to this fraction (a random crop)")
    contrast: float = Field(0.0, ge=0, le=1)

    @property
    def active(self) -> bool:
        return self.flip != "none" or bool(self.rotation or self.crop or self.contrast)


class DatasetSpec(_Spec):
    source: Literal["digits", "folder", "npz", "tfrecord"] = "digits"
    path: str | None = Field(None, description="folder, .npz file, or TFRecord file/folder")
    validation_path: str | None = Field(None, description="an explicit validation set of the same kind")
    image_size: int = Field(16, ge=8, le=512, description="images are resized once to this size")
    channels: Literal[1, 3] | None = Field(None, description="default: 1 for digits, 3 otherwise")
    classes: list[str] | None = Field(None, min_length=2, description="names of integer labels 0..K-1")
    validation_fraction: float = Field(0.2, gt=0, lt=1)
    subset: int | None = Field(None, ge=20, description="use only this many images (stratified)")
    seed: int = 0
    on_corrupt: Literal["skip", "error"] = "skip"
    cache: Literal["auto", "memory", "disk"] = "auto"
    tfrecord: TFRecordSpec = TFRecordSpec()
    augmentation: AugmentationSpec = AugmentationSpec()

    @model_validator(mode="after")
    def _path_matches_source(self) -> DatasetSpec:
        if self.source == "digits" and (self.path or self.validation_path):
            raise ValueError("path: the built-in digits take no path (set source: folder, npz or tfrecord)")
        if self.source != "digits" and not self.path:
            raise ValueError(f"path: required for source {self.source}")
        if self.source == "digits" and self.channels == 3:
            raise ValueError("channels: digits are grayscale (1 channel)")
        return self


TRAINING_FIELDS: dict[str, tuple[Kind, Check | None]] = {
    "batch_size": ("int", between(1, 65536)),
    "optimizer": ("str", one_of(["adam", "adamw", "sgd", "rmsprop"])),
    "learning_rate": ("float", between(1e-7, 10.0)),
}
TRAINING_DEFAULTS: dict[str, Any] = {"batch_size": 32, "optimizer": "adam", "learning_rate": 1e-3}


class TrainingSpec(_Spec):
    epochs: int = Field(5, ge=1, le=10000)
    batch_size: Annotated[Param, _parsed(*TRAINING_FIELDS["batch_size"])] = Param("int", value=32)
    optimizer: Annotated[Param, _parsed(*TRAINING_FIELDS["optimizer"])] = Param("str", value="adam")
    learning_rate: Annotated[Param, _parsed(*TRAINING_FIELDS["learning_rate"])] = Param("float", value=1e-3)

    def params(self) -> dict[str, Param]:
        return {f: getattr(self, f) for f in TRAINING_FIELDS}

    @model_validator(mode="after")
    def _conditions(self) -> TrainingSpec:
        check_scope(self.params(), TRAINING_FIELDS, "")
        return self


class MeasureSpec(_Spec):
    batch_sizes: list[Annotated[int, Field(ge=1, le=65536)]] = Field(
        default_factory=lambda: [64],
        min_length=1,
        description="inference batch sizes; the first is the objective",
    )
    latency: bool = Field(True, description="also measure latency (ms, p50 and p95) at batch 1")
    rounds: int = Field(5, ge=3, le=100, description="timed rounds; the median is reported")
    round_seconds: float = Field(0.2, gt=0, le=60, description="target length of one timed round")
    max_spread: float = Field(0.10, gt=0, le=1, description="relative spread above which to re-measure")


PRECISIONS = ["float32", "mixed_float16", "mixed_bfloat16"]


COMPUTE_FIELDS: dict[str, tuple[Kind, Check | None]] = {"precision": ("str", one_of(PRECISIONS)), "xla": ("bool", None)}
COMPUTE_DEFAULTS: dict[str, Any] = {"precision": "float32", "xla": False}


class ComputeSpec(_Spec):
    precision: Annotated[Param, _parsed(*COMPUTE_FIELDS["precision"])] = Param("str", value="float32")
    xla: Annotated[Param, _parsed(*COMPUTE_FIELDS["xla"])] = Param("bool", value=False)

    def params(self) -> dict[str, Param]:
        return {f: getattr(self, f) for f in COMPUTE_FIELDS}

    @model_validator(mode="after")
    def _conditions(self) -> ComputeSpec:
        check_scope(self.params(), COMPUTE_FIELDS, "")
        return self


class ConstraintsSpec(_Spec):
    """Limits a candidate must meet; static ones (params, FLOPs, size) are checked right after
    sampling, before a model is built, measured ones before training."""

    max_params: Annotated[int | None, BeforeValidator(parse_count), Field(ge=1)] = None
    max_flops: Annotated[int | None, BeforeValidator(parse_count), Field(ge=1)] = None
    max_model_size: Annotated[
        int | None, BeforeValidator(parse_bytes), Field(ge=1, description="bytes of float32 weights; 4MB, 3.5MiB")
    ] = None
    max_latency_ms: float | None = Field(None, gt=0)
    min_throughput: float | None = Field(None, gt=0)


class SearchSpec(_Spec):
    sampler: Literal["tpe", "nsga2", "gp", "random"] = "tpe"
    trials: int = Field(20, ge=1, le=1_000_000)
    seed: int = 0


OBJECTIVES: dict[str, Literal["maximize", "minimize"]] = {
    "accuracy": "maximize",  # of the deployable form: after pruning and quantization
    "throughput": "maximize",  # images/s of the Keras model on this device
    "model_size": "minimize",  # bytes: the TFLite file when trials convert, else float32 weights
    "tflite_latency": "minimize",  # ms at batch 1 in the LiteRT interpreter
}


DEFAULT_OBJECTIVES: dict[str, Literal["maximize", "minimize"]] = {"accuracy": "maximize", "throughput": "maximize"}


class SpaceSpec(_Spec):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
    dataset: DatasetSpec = DatasetSpec()
    model: ModelSpec
    training: TrainingSpec = TrainingSpec()
    objectives: dict[str, Literal["maximize", "minimize"]] = Field(default_factory=lambda: dict(DEFAULT_OBJECTIVES))
    compute: ComputeSpec = ComputeSpec()
    constraints: ConstraintsSpec = ConstraintsSpec()
    compression: CompressionSpec = CompressionSpec()
    measure: MeasureSpec = MeasureSpec()
    search: SearchSpec = SearchSpec()

    @field_validator("objectives")
    @classmethod
    def _known_objectives(
        cls, value: dict[str, Literal["maximize", "minimize"]]
    ) -> dict[str, Literal["maximize", "minimize"]]:
        if not value:
            raise ValueError("at least one objective is needed")
        for name, direction in value.items():
            if name not in OBJECTIVES:
                raise ValueError(f"unknown objective '{name}' (available: {', '.join(OBJECTIVES)})")
            if direction != OBJECTIVES[name]:
                raise ValueError(f"objective '{name}' can only be {OBJECTIVES[name]}d")
        return value

    @model_validator(mode="after")
    def _classes_agree(self) -> SpaceSpec:
        classes, names = self.model.num_classes, self.dataset.classes
        if classes is not None and names is not None and classes != len(names):
            raise ValueError(f"model.num_classes: {classes}, but dataset.classes names {len(names)}")
        if classes is not None and self.dataset.source == "digits" and classes != 10:
            raise ValueError(f"model.num_classes: {classes}, but the digits have 10 classes")
        return self


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
        self._params = self._flatten()

    @property
    def name(self) -> str:
        return self.spec.name

    def stage_source(self, stage: int, field: str) -> str:
        """The parameter a stage's field takes its value from."""
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
            "width_multiplier": 1.0,
            "depth_multiplier": 1.0,
            "resolution": self.spec.dataset.image_size,
            "activation": rules.activation,
            "dropout": 0.0,
            "drop_connect_rate": 0.0,
            "phi": 0.0,
            **TRAINING_DEFAULTS,
            **COMPUTE_DEFAULTS,
            "pruning.method": "none",
            "pruning.sparsity": COMPRESSION_DEFAULTS["sparsity"],
            "quantization": "none",
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
            stem_stride=m.stem_stride,
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
        """What must not change under a running study: everything but `name` and `search`."""
        # Defaults left out: a later version that adds a knob with a default does not make
        # every existing study look changed.
        data = self.spec.model_dump(mode="json", exclude={"name", "search"}, exclude_defaults=True)
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
            out += ("." if out else "") + str(part)
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
        msg = f"{err.get('input')!r}: {msg[0].lower()}{msg[1:]}"
    return f"{where}: {msg}"


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("nas.spaces").iterdir() if p.name.endswith(".yaml"))


def _read(ref: str) -> tuple[str, str]:
    path = Path(ref)
    if path.is_file():
        return path.read_text(encoding="utf-8"), str(path)
    if path.exists():
        raise NasError(f"space file {ref} is not a file")
    # A preset name, or reference/NAME for the published networks shipped beside them.
    preset = resources.files("nas.spaces").joinpath(*f"{ref}.yaml".split("/", 1))
    if re.fullmatch(r"(reference/)?[\w.-]+", ref) and not ref.endswith((".yaml", ".yml")) and preset.is_file():
        return preset.read_text(encoding="utf-8"), f"preset {ref}"
    raise NasError(f"space file {ref} not found (and no preset of that name; presets: {', '.join(preset_names())})")


def space_from_dict(data: Any, source: str = "<dict>") -> SearchSpace:
    if not isinstance(data, dict):
        raise NasError(f"{source}: a space file must be a mapping with name, model, ... at its top level")
    try:
        return SearchSpace(SpaceSpec.model_validate(data), source, data)
    except ValidationError as exc:
        raise NasError(f"{source}: {format_validation_error(exc)}") from None


def load_space(ref: str) -> SearchSpace:
    """Load a space from a file path or a preset name; every problem is a one-line NasError."""
    text, source = _read(ref)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise NasError(f"{source}: {where}invalid YAML ({problem})") from None
    if isinstance(data, dict) and source == str(Path(ref)):
        data = _with_absolute_paths(data, Path(ref).resolve().parent)
    return space_from_dict(data, source)


def _with_absolute_paths(data: dict[str, Any], base: Path) -> dict[str, Any]:
    """Data paths in a space file are relative to the file, so a study (and `nas worker`,
    which reads the space from the study) finds them from any working folder."""
    dataset = data.get("dataset")
    if not isinstance(dataset, dict):
        return data
    fixed = dict(dataset)
    for key in ("path", "validation_path"):
        value = fixed.get(key)
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            fixed[key] = str(base / value)
        elif isinstance(value, str) and value:
            fixed[key] = str(Path(value).expanduser())
    return {**data, "dataset": fixed}

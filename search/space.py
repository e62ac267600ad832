"""The space file: schema (pydantic), loading with one-line errors, and the Candidate it yields."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import optuna
import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from .errors import NasError
from .params import Check, Kind, Param, between, one_of, parse_param


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


class StageSpec(_Spec):
    filters: int = Field(ge=1, le=4096)
    stride: Literal[1, 2] = 1
    depth: Annotated[Param, _parsed("int", between(1, 16))] = Param("int", value=1)
    kernel: Annotated[Param, _parsed("int", one_of([3, 5, 7]))] = Param("int", value=3)
    expansion: Annotated[Param, _parsed("int", between(1, 8))] = Param("int", value=6)
    se: Annotated[Param, _parsed("bool")] = Param("bool", value=False)


class ModelSpec(_Spec):
    family: Literal["mobilenet_v2"] = "mobilenet_v2"
    width_multiplier: Annotated[Param, _parsed("float", between(0.1, 4.0))] = Param("float", value=1.0)
    stem_filters: int = Field(32, ge=1, le=4096)
    stem_stride: Literal[1, 2] = 2
    head_filters: int = Field(1280, ge=1, le=8192)
    dropout: Annotated[Param, _parsed("float", between(0.0, 0.9))] = Param("float", value=0.2)
    stages: list[StageSpec] = Field(min_length=1, max_length=12)


class TrainingSpec(_Spec):
    epochs: int = Field(5, ge=1, le=10000)
    batch_size: Annotated[Param, _parsed("int", between(1, 65536))] = Param("int", value=32)
    optimizer: Annotated[Param, _parsed("str", one_of(["adam", "adamw", "sgd", "rmsprop"]))] = Param(
        "str", value="adam"
    )
    learning_rate: Annotated[Param, _parsed("float", between(1e-7, 10.0))] = Param("float", value=1e-3)


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


class ComputeSpec(_Spec):
    precision: Annotated[Param, _parsed("str", one_of(PRECISIONS))] = Param("str", value="float32")
    xla: Annotated[Param, _parsed("bool")] = Param("bool", value=False)


class ConstraintsSpec(_Spec):
    """Limits a candidate must meet; static ones are checked before measuring, measured ones
    before training."""

    max_params: int | None = Field(None, ge=1)
    max_flops: int | None = Field(None, ge=1)
    max_latency_ms: float | None = Field(None, gt=0)
    min_throughput: float | None = Field(None, gt=0)


class SearchSpec(_Spec):
    sampler: Literal["tpe", "nsga2", "gp", "random"] = "tpe"
    trials: int = Field(20, ge=1, le=1_000_000)
    seed: int = 0


OBJECTIVES: dict[str, Literal["maximize", "minimize"]] = {
    "accuracy": "maximize",
    "throughput": "maximize",
}


class SpaceSpec(_Spec):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
    dataset: DatasetSpec = DatasetSpec()
    model: ModelSpec
    training: TrainingSpec = TrainingSpec()
    objectives: dict[str, Literal["maximize", "minimize"]] = Field(default_factory=lambda: dict(OBJECTIVES))
    compute: ComputeSpec = ComputeSpec()
    constraints: ConstraintsSpec = ConstraintsSpec()
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


@dataclass(frozen=True)
class StagePlan:
    filters: int
    stride: int
    depth: int
    kernel: int
    expansion: int
    se: bool


@dataclass(frozen=True)
class Candidate:
    """Everything one trial sampled: with the space's fixed values it determines the model."""

    num_classes: int
    image_size: int
    channels: int
    width_multiplier: float
    stem_filters: int
    stem_stride: int
    head_filters: int
    dropout: float
    stages: tuple[StagePlan, ...]
    epochs: int
    batch_size: int
    optimizer: str
    learning_rate: float
    precision: str = "float32"
    xla: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SearchSpace:
    """A validated space: names its searchable parameters and turns samples into Candidates."""

    def __init__(self, spec: SpaceSpec, source: str = "<dict>", document: dict[str, Any] | None = None) -> None:
        self.spec = spec
        self.source = source
        # The mapping the space was read from: stored on the study so that `nas worker` on
        # another machine rebuilds the same space without the file.
        self.document = document

    @property
    def name(self) -> str:
        return self.spec.name

    def parameters(self) -> dict[str, Param]:
        """Every parameter by its Optuna name, fixed ones included, in sampling order."""
        m, t = self.spec.model, self.spec.training
        out: dict[str, Param] = {"width_multiplier": m.width_multiplier, "dropout": m.dropout}
        for i, stage in enumerate(m.stages):
            for field in ("depth", "kernel", "expansion", "se"):
                out[f"stage{i}.{field}"] = getattr(stage, field)
        out.update(batch_size=t.batch_size, optimizer=t.optimizer, learning_rate=t.learning_rate)
        out.update(precision=self.spec.compute.precision, xla=self.spec.compute.xla)
        return out

    def searchable(self) -> dict[str, Param]:
        return {name: p for name, p in self.parameters().items() if not p.fixed}

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        return {name: p.distribution() for name, p in self.searchable().items()}

    def sample(self, trial: optuna.Trial, *, num_classes: int, channels: int) -> Candidate:
        values = {name: p.suggest(trial, name) for name, p in self.parameters().items()}
        return self._candidate(values, num_classes=num_classes, channels=channels)

    def candidate(self, params: dict[str, Any], *, num_classes: int, channels: int) -> Candidate:
        """Rebuild the Candidate of a stored trial from its parameters."""
        values = {}
        for name, p in self.parameters().items():
            if p.fixed:
                values[name] = p.value
            elif name in params:
                values[name] = params[name]
            else:
                raise NasError(f"trial parameters lack '{name}' (was the space changed?)")
        return self._candidate(values, num_classes=num_classes, channels=channels)

    def _candidate(self, v: dict[str, Any], *, num_classes: int, channels: int) -> Candidate:
        m, t = self.spec.model, self.spec.training
        stages = tuple(
            StagePlan(
                filters=s.filters,
                stride=s.stride,
                depth=int(v[f"stage{i}.depth"]),
                kernel=int(v[f"stage{i}.kernel"]),
                expansion=int(v[f"stage{i}.expansion"]),
                se=bool(v[f"stage{i}.se"]),
            )
            for i, s in enumerate(m.stages)
        )
        return Candidate(
            num_classes=num_classes,
            image_size=self.spec.dataset.image_size,
            channels=channels,
            width_multiplier=float(v["width_multiplier"]),
            stem_filters=m.stem_filters,
            stem_stride=m.stem_stride,
            head_filters=m.head_filters,
            dropout=float(v["dropout"]),
            stages=stages,
            epochs=t.epochs,
            batch_size=int(v["batch_size"]),
            optimizer=str(v["optimizer"]),
            learning_rate=float(v["learning_rate"]),
            precision=str(v["precision"]),
            xla=bool(v["xla"]),
        )

    def with_precisions(self, allowed: list[str]) -> SearchSpace:
        """This space with only `allowed` precision policies (for a device that cannot run
        the others)."""
        param = Param("str", value=allowed[0]) if len(allowed) == 1 else Param("str", choices=tuple(allowed))
        compute = self.spec.compute.model_copy(update={"precision": param})
        return SearchSpace(self.spec.model_copy(update={"compute": compute}), self.source, self.document)

    def fingerprint(self) -> str:
        """What must not change under a running study: everything but `name` and `search`."""
        data = self.spec.model_dump(mode="json", exclude={"name", "search"})
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
    if err["type"] == "value_error" and (key := re.match(r"^([a-z_]+): ", msg)):
        # A check across keys names the key it is about: report it at that key's path.
        return f"{where}.{key.group(1)}: {msg[key.end() :]}"
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
    preset = resources.files("nas.spaces") / f"{ref}.yaml"
    if "/" not in ref and not ref.endswith((".yaml", ".yml")) and preset.is_file():
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

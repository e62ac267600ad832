"""The space file's schema (pydantic): dataset, training, measurement, compute, constraints,
search and objectives; the model and compression parts live in model_spec and
compression_spec, each strategy's settings in its package (added by schema.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from nas.search.records import SamplerName
from nas.search.space.base import Spec, fixed, parsed
from nas.search.space.builtin_sets import BUILTIN_SETS
from nas.search.space.compression_spec import CompressionSpec
from nas.search.space.model_spec import ModelSpec, check_scope
from nas.search.space.params import Check, Kind, Param, between, one_of, shown
from nas.search.space.units import parse_bytes, parse_count
from nas.search.strategies import space_part

# NumPy's and scikit-learn's seeds are unsigned 32-bit; another one fails only once a search runs.
MAX_SEED = 2**32 - 1


class TFRecordSpec(Spec):
    """`dataset.tfrecord` (source: tfrecord only): the features of a `tf.train.Example` that hold image and label."""

    image_feature: str = Field("image", description="name of the bytes feature holding the image")
    image_type: Literal["encoded", "raw"] = Field("encoded", description="encoded: JPEG/PNG/BMP/GIF bytes")
    raw_shape: tuple[int, int, int] | None = Field(None, description="(H, W, C) of raw uint8 images")
    label_feature: str = Field("label", description="name of the feature holding the label")
    label_type: Literal["int64", "string"] = Field(
        "int64", description="int64: the class index; string: the class name (sorted names give the indices)"
    )

    @model_validator(mode="after")
    def _raw_needs_shape(self) -> TFRecordSpec:
        if self.image_type == "raw" and self.raw_shape is None:
            raise ValueError("raw_shape: required when image_type is raw")
        return self


class AugmentationSpec(Spec):
    """Random transforms of training batches, run on the device as Keras preprocessing layers."""

    flip: Literal["none", "horizontal", "vertical", "both"] = Field(
        "none", description="random flips of training images"
    )
    rotation: float = Field(0.0, ge=0, le=0.5, description="up to this fraction of a full turn")
    crop: float = Field(0.0, ge=0, lt=1, description="zoom in by up to this fraction (a random crop)")
    contrast: float = Field(
        0.0, ge=0, le=1, description="scale contrast by a random factor in [1 - contrast, 1 + contrast]"
    )
    erasing: float = Field(
        0.0,
        ge=0,
        le=1,
        description="random erasing (Zhong et al. 2017): with this probability one rectangle of 2-40% of the "
        "image, aspect ratio 0.3 to 3.3, is filled with uniform random values",
    )

    # Knobs added after final figures were first stored with their recipe: left out of the
    # stored recipe at their default, so a recipe stored before them still compares equal.
    LATER: ClassVar[tuple[str, ...]] = ("erasing",)

    @property
    def active(self) -> bool:
        return self.flip != "none" or bool(self.rotation or self.crop or self.contrast or self.erasing)

    def recorded(self) -> dict[str, Any]:
        """The form stored in a final training's recipe."""
        data = self.model_dump(mode="json")
        return {k: v for k, v in data.items() if not (k in self.LATER and v == type(self).model_fields[k].default)}


class DatasetSpec(Spec):
    """`dataset:` where the images come from, and how they are decoded, split, cached and augmented."""

    source: Literal["digits", "folder", "npz", "tfrecord", "fashion_mnist", "mnist", "cifar10", "cifar100"] = Field(
        "digits",
        description="fashion_mnist, mnist, cifar10, cifar100: Keras' data sets with their official test split, "
        "read from Keras' cache folder, dataset.path or Debian's /usr/share/datasets (never downloaded)",
    )
    path: str | None = Field(
        None,
        description="folder, .npz file, or TFRecord file/folder; for a Keras data set, a folder holding its "
        "original files (default: Keras' cache, then Debian's folder)",
    )
    validation_path: str | None = Field(None, description="an explicit validation set of the same kind")
    test_path: str | None = Field(
        None, description="a test set of the same kind as path, which the search never reads (scored at the end)"
    )
    test_fraction: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="hold this share of the data out as a test set the search never reads (stratified, seeded; "
        "before the validation split)",
    )
    image_size: int = Field(16, ge=8, le=512, description="images are resized once to this size")
    channels: Literal[1, 3] | None = Field(
        None, description="default: 1 for digits, mnist and fashion_mnist, 3 otherwise"
    )
    classes: list[str] | None = Field(
        None, min_length=2, description="names of integer labels 0..K-1 (a Keras data set's own by default)"
    )
    validation_fraction: float = Field(
        0.2, gt=0, lt=1, description="share of the training data held out for validation (stratified, seeded)"
    )
    subset: int | None = Field(None, ge=20, description="use only this many training images (stratified)")
    seed: int = Field(0, ge=0, le=MAX_SEED, description="seed of the subset, test and validation splits")
    on_corrupt: Literal["skip", "error"] = Field(
        "skip", description="an unreadable image: skip (counted, one warning) or error (names the file)"
    )
    cache: Literal["auto", "memory", "disk"] = Field(
        "auto", description="auto: in memory up to a quarter of RAM, else memory-mapped files; memory, disk: force one"
    )
    tfrecord: TFRecordSpec = Field(TFRecordSpec(), description="features of the examples (source: tfrecord only)")
    augmentation: AugmentationSpec = Field(
        AugmentationSpec(), description="random transforms of training batches (also final training's default)"
    )

    @model_validator(mode="before")
    @classmethod
    def _builtin_defaults(cls, data: Any) -> Any:
        """A Keras data set's channels and class names are known without reading it: filled in
        here, so the networks' shapes follow from the space file alone."""
        source = data.get("source") if isinstance(data, dict) else None
        if not isinstance(source, str) or source not in BUILTIN_SETS:  # a wrong value is the field's to report
            return data
        known = BUILTIN_SETS[source]
        filled = dict(data)
        if filled.get("channels") is None:
            filled["channels"] = known.channels
        if filled.get("classes") is None:
            filled["classes"] = list(known.classes)
        return filled

    @model_validator(mode="after")
    def _path_matches_source(self) -> DatasetSpec:
        if self.source == "digits" and (self.path or self.validation_path or self.test_path):
            raise ValueError("path: the built-in digits take no path (set source: folder, npz or tfrecord)")
        if self.source in BUILTIN_SETS:
            self._check_builtin()
        elif self.source != "digits" and not self.path:
            raise ValueError(f"path: required for source {self.source}")
        if self.source == "digits" and self.channels == 3:
            raise ValueError("channels: digits are grayscale (1 channel)")
        if self.test_path and self.test_fraction is not None:
            raise ValueError("test_fraction: a test set comes from test_path or test_fraction, not both")
        return self

    def _check_builtin(self) -> None:
        known = BUILTIN_SETS[self.source]
        why = {
            "validation_path": "validation comes out of its training split",
            "test_path": "it carries its official test split",
            "test_fraction": "it carries its official test split",
        }
        for key, reason in why.items():
            if getattr(self, key) is not None:
                raise ValueError(f"{key}: {self.source} takes none ({reason})")
        if self.classes is not None and len(self.classes) != len(known.classes):
            raise ValueError(f"classes: {self.source} has {len(known.classes)} classes, not {len(self.classes)}")


TRAINING_FIELDS: dict[str, tuple[Kind, Check | None]] = {
    "batch_size": ("int", between(1, 65536)),
    "optimizer": ("str", one_of(["adam", "adamw", "sgd", "rmsprop"])),
    "learning_rate": ("float", between(1e-7, 10.0)),
}
TRAINING_DEFAULTS: dict[str, Any] = {"batch_size": 32, "optimizer": "adam", "learning_rate": 1e-3}


class TrainingSpec(Spec):
    """`training:` how each trial trains its candidate, with a cosine-decayed learning rate."""

    epochs: int = Field(5, ge=1, le=10000, description="training epochs of each trial")
    batch_size: Annotated[
        Param, parsed(*TRAINING_FIELDS["batch_size"]), Field(description="searchable: training batch size")
    ] = fixed(TRAINING_FIELDS, TRAINING_DEFAULTS, "batch_size")
    optimizer: Annotated[
        Param,
        parsed(*TRAINING_FIELDS["optimizer"]),
        Field(description="searchable: the optimizer (sgd: with Nesterov momentum 0.9)"),
    ] = fixed(TRAINING_FIELDS, TRAINING_DEFAULTS, "optimizer")
    learning_rate: Annotated[
        Param,
        parsed(*TRAINING_FIELDS["learning_rate"]),
        Field(description="searchable: the learning rate the cosine decay starts from"),
    ] = fixed(TRAINING_FIELDS, TRAINING_DEFAULTS, "learning_rate")

    def params(self) -> dict[str, Param]:
        return {f: getattr(self, f) for f in TRAINING_FIELDS}

    @model_validator(mode="after")
    def _conditions(self) -> TrainingSpec:
        check_scope(self.params(), TRAINING_FIELDS, "")
        return self


class MeasureSpec(Spec):
    """`measure:` how inference throughput and latency are measured on this device."""

    batch_sizes: list[Annotated[int, Field(ge=1, le=65536)]] = Field(
        default_factory=lambda: [64],
        min_length=1,
        description="inference batch sizes; the first is the objective",
    )
    # Unset by default: at a second per network, latency is cheap beside a trial's training but
    # not beside a supernet subnet's few seconds, where thousands are scored (issue 47).
    latency: bool | None = Field(
        None,
        description="also measure latency (ms, p50 and p95) at batch 1; unset: yes, except for a supernet "
        "study's subnets (a max_latency_ms constraint measures it always)",
    )
    rounds: int = Field(15, ge=3, le=100, description="timed rounds; the median is reported")
    round_seconds: float = Field(0.1, gt=0, le=60, description="target length of one timed round")
    reference: bool = Field(
        True, description="interleave the rounds with a fixed reference network and keep the ratio (cancels drift)"
    )
    confirm: bool = Field(
        True, description="at the end of a search, measure the front again together, interleaved, with more rounds"
    )
    max_spread: float = Field(0.10, gt=0, le=1, description="relative spread above which to re-measure")
    # What each measurement costs besides its rounds; a test or a smoke run sets them small.
    warmup_seconds: float = Field(
        20.0, gt=0, le=600, description="longest warm-up before the rounds (single calls until their times settle)"
    )
    latency_seconds: float = Field(1.0, gt=0, le=60, description="how long latency's single calls are timed")
    baseline_rounds: int = Field(
        15, ge=3, le=100, description="rounds of the device's reference baseline (measured once per device)"
    )
    peak_seconds: float = Field(1.0, gt=0, le=60, description="how long the device's matmul peak is timed (once)")


PRECISIONS = ["float32", "mixed_float16", "mixed_bfloat16"]


COMPUTE_FIELDS: dict[str, tuple[Kind, Check | None]] = {"precision": ("str", one_of(PRECISIONS)), "xla": ("bool", None)}
COMPUTE_DEFAULTS: dict[str, Any] = {"precision": "float32", "xla": False}


class ComputeSpec(Spec):
    """`compute:` the numeric precision and compilation of training and inference."""

    precision: Annotated[
        Param,
        parsed(*COMPUTE_FIELDS["precision"]),
        Field(description="searchable: Keras dtype policy of training and inference"),
    ] = fixed(COMPUTE_FIELDS, COMPUTE_DEFAULTS, "precision")
    xla: Annotated[
        Param, parsed(*COMPUTE_FIELDS["xla"]), Field(description="searchable: XLA-compile training and inference")
    ] = fixed(COMPUTE_FIELDS, COMPUTE_DEFAULTS, "xla")

    def params(self) -> dict[str, Param]:
        return {f: getattr(self, f) for f in COMPUTE_FIELDS}

    @model_validator(mode="after")
    def _conditions(self) -> ComputeSpec:
        check_scope(self.params(), COMPUTE_FIELDS, "")
        return self


Positive = Annotated[int, Field(ge=1)]


class ConstraintsSpec(Spec):
    """Limits a candidate must meet; static ones (params, FLOPs, size) are checked right after
    sampling, before a model is built, measured ones before training."""

    # The bound sits on the int alone: on `int | None` pydantic compares None too (a TypeError).
    max_params: Annotated[
        Positive | None,
        BeforeValidator(parse_count),
        Field(description="static: at most this many parameters; 200k, 3.5M"),
    ] = None
    max_flops: Annotated[
        Positive | None,
        BeforeValidator(parse_count),
        Field(description="static: at most this many FLOPs (2 x multiply-accumulates); 5M"),
    ] = None
    max_model_size: Annotated[
        Positive | None, BeforeValidator(parse_bytes), Field(description="bytes of float32 weights; 4MB, 3.5MiB")
    ] = None
    max_latency_ms: float | None = Field(
        None, gt=0, description="measured: p95 latency in ms at batch 1, checked before training"
    )
    min_throughput: float | None = Field(
        None, gt=0, description="measured: images/s at the first of measure.batch_sizes, checked before training"
    )


class EarlyStoppingSpec(Spec):
    """`search.early_stopping`: hopeless trials stopped at rungs (multi-objective successive halving)."""

    method: Literal["none", "asha"] = Field(
        "none", description="asha: stop trials at rungs (epochs min_epochs * eta**k) unless in the best 1/eta there"
    )
    min_epochs: int = Field(1, ge=1, le=10000, description="epoch of the first rung")
    eta: int = Field(3, ge=2, le=100, description="rungs grow by eta; 1/eta of the trials at a rung continue")


class SearchSpec(Spec):
    """`search:` the sampler, the trial budget, early stopping and the strategy that scores candidates."""

    sampler: SamplerName = Field(
        SamplerName.TPE, description="the Optuna sampler (tpe: multivariate, with constant liar); --sampler overrides"
    )
    trials: int = Field(20, ge=1, le=1_000_000, description="budget of finished trials (--trials overrides)")
    seed: int = Field(
        0, ge=0, le=MAX_SEED, description="seed of the sampler and, plus the trial's number, of each trial's training"
    )
    early_stopping: EarlyStoppingSpec = Field(
        EarlyStoppingSpec(), description="stop hopeless trials at rungs (off by default)"
    )
    # The registered names, and each strategy's settings under its own name (`search.supernet:`),
    # are added by space_schema (schema.py) from the strategies' registry.
    strategy: str = Field("trials", description="the strategy that scores candidates")

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any:
            """A strategy's settings (typed by the strategy's own accessor)."""


class FinalSpec(Spec):
    """`nas train`: the recipe the chosen architectures are trained with after the search, from
    scratch (or, in a supernet study, from their inherited weights), before each is scored once
    on the test set. Not in the study's fingerprint: it acts after the search, and each final
    figure is stored with the recipe that made it."""

    epochs: int = Field(30, ge=1, le=10_000, description="epochs of the final training")
    warmup_epochs: int = Field(
        2, ge=0, le=1000, description="linear warm-up of the learning rate before its cosine decay"
    )
    learning_rate: float | None = Field(
        None, gt=0, le=10, description="peak rate (default: the trial's; a tenth of it from inherited weights)"
    )
    batch_size: int | None = Field(None, ge=1, le=65_536, description="default: the trial's")
    label_smoothing: float = Field(0.1, ge=0, lt=1, description="label smoothing of the cross-entropy loss")
    augmentation: AugmentationSpec | None = Field(
        None, description="random transforms of training batches (default: dataset.augmentation)"
    )
    data: Literal["train+validation", "train"] = Field(
        "train+validation",
        description="train+validation: the search's validation images join the training set; train: they stay out "
        "and are scored after each epoch",
    )
    trials: int = Field(8, ge=1, le=1000, description="at most this many front members, most accurate first")
    seed: int = Field(0, ge=0, le=2**32 - 1, description="seed of each final training, plus the trial's number")


OBJECTIVES: dict[str, Literal["maximize", "minimize"]] = {
    "accuracy": "maximize",  # of the deployable form: after pruning and quantization
    "throughput": "maximize",  # images/s of the Keras model on this device
    "model_size": "minimize",  # bytes: the TFLite file when trials convert, else float32 weights
    "tflite_latency": "minimize",  # ms at batch 1 in the LiteRT interpreter
}


DEFAULT_OBJECTIVES: dict[str, Literal["maximize", "minimize"]] = {"accuracy": "maximize", "throughput": "maximize"}


class SpaceSpec(Spec):
    """A space file: the data, the networks to search, and how candidates are trained, measured and compared."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$",
        description="the study's default name: a letter or digit, then letters, digits, _ . - (at most 100)",
    )
    dataset: DatasetSpec = Field(DatasetSpec(), description="the images: source, size, splits, caching, augmentation")
    model: ModelSpec = Field(description="the network family, its global knobs and its stages")
    training: TrainingSpec = Field(TrainingSpec(), description="how each trial trains its candidate")
    objectives: dict[str, Literal["maximize", "minimize"]] = Field(
        default_factory=lambda: dict(DEFAULT_OBJECTIVES),
        description="in study order; accuracy, throughput: maximize; model_size, tflite_latency: minimize",
    )
    compute: ComputeSpec = Field(ComputeSpec(), description="precision and XLA of training and inference")
    constraints: ConstraintsSpec = Field(ConstraintsSpec(), description="limits a candidate must meet (all optional)")
    compression: CompressionSpec = Field(
        CompressionSpec(), description="pruning and quantization; accuracy is then the deployable form's"
    )
    measure: MeasureSpec = Field(MeasureSpec(), description="how throughput and latency are measured")
    final: FinalSpec = Field(
        FinalSpec(), description="nas train's recipe: the front trained again, then scored once on the test set"
    )
    search: SearchSpec = Field(SearchSpec(), description="sampler, budget, seed, early stopping and strategy")

    @field_validator("objectives")
    @classmethod
    def _known_objectives(
        cls, value: dict[str, Literal["maximize", "minimize"]]
    ) -> dict[str, Literal["maximize", "minimize"]]:
        if not value:
            raise ValueError("at least one objective is needed")
        for name, direction in value.items():
            if name not in OBJECTIVES:
                raise ValueError(f"unknown objective {shown(name)} (available: {', '.join(OBJECTIVES)})")
            if direction != OBJECTIVES[name]:
                raise ValueError(f"objective '{name}' can only be {OBJECTIVES[name]}d")
        return value

    def search_measure(self) -> MeasureSpec:
        """`measure:` as the search applies it: an unset `latency` resolved for the strategy."""
        if self.measure.latency is not None:
            return self.measure
        latency = space_part(self.search.strategy).measures_latency
        return self.measure.model_copy(update={"latency": latency})

    @model_validator(mode="after")
    def _classes_agree(self) -> SpaceSpec:
        classes, names = self.model.num_classes, self.dataset.classes
        if classes is not None and names is not None and classes != len(names):
            raise ValueError(f"model.num_classes: {classes}, but dataset.classes names {len(names)}")
        if classes is not None and self.dataset.source == "digits" and classes != 10:
            raise ValueError(f"model.num_classes: {classes}, but the digits have 10 classes")
        return self

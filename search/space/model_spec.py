"""The `model:` part of a space file: family, global knobs, compound scaling, shared and
per-stage parameters, and the checks of `when:` conditions that span a scope."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from nas.search.space.base import Spec, fixed, parsed
from nas.search.space.params import Check, Kind, Param, between, one_of, parse_param, shown

Family = Literal["mobilenet_v2", "mobilenet_v3", "efficientnet", "efficientnet_v2", "efficientnet_lite"]
ACTIVATIONS = ["relu", "relu6", "swish", "hard_swish"]
# mbconv: 1x1 expansion, depthwise kxk, 1x1 projection (MobileNetV2). fused: one regular kxk
# convolution that expands, then the 1x1 projection (EfficientNetV2's Fused-MBConv): more
# arithmetic per byte moved, so faster on CPUs and GPUs at small maps.
BLOCK_TYPES = ["mbconv", "fused"]

# Kind and domain check of every parameter a stage can set; `shared:` takes the same ones
# except filters and stride, which only make sense per stage.
STAGE_FIELDS: dict[str, tuple[Kind, Check | None]] = {
    "block": ("str", one_of(BLOCK_TYPES)),
    "filters": ("int", between(1, 4096)),
    "stride": ("int", one_of([1, 2])),
    "depth": ("int", between(1, 16)),
    "kernel": ("int", one_of([3, 5, 7])),
    "expansion": ("float", between(1.0, 8.0)),
    "activation": ("str", one_of(ACTIVATIONS)),
    "se": ("bool", None),
    "se_ratio": ("float", between(0.01, 1.0)),
}
SHARED_FIELDS = [f for f in STAGE_FIELDS if f not in ("filters", "stride")]
# What a stage gets for a parameter that neither it nor `shared:` sets (activation: the model's).
STAGE_DEFAULTS: dict[str, Any] = {
    "block": "mbconv",
    "stride": 1,
    "depth": 1,
    "kernel": 3,
    "expansion": 6.0,
    "se": False,
    "se_ratio": 0.25,
}

# What a global parameter is when a `when:` condition switches it off (activation and
# resolution come from the family and the dataset).
GLOBAL_OFF: dict[str, Any] = {
    "width_multiplier": 1.0,
    "depth_multiplier": 1.0,
    "dropout": 0.0,
    "drop_connect_rate": 0.0,
    "stem_filters": 32,
    "head_hidden": 0,
}
GLOBAL_FIELDS: dict[str, tuple[Kind, Check | None]] = {
    "width_multiplier": ("float", between(0.1, 4.0)),
    "depth_multiplier": ("float", between(0.1, 4.0)),
    "resolution": ("int", between(8, 1024)),
    # 1 keeps a small image's detail through the stem (28x28 Fashion-MNIST) at 4x the cost.
    "stem_stride": ("int", one_of([1, 2])),
    "stem_filters": ("int", between(1, 4096)),
    "head_hidden": ("int", between(0, 8192)),
    "activation": ("str", one_of(ACTIVATIONS)),
    "dropout": ("float", between(0.0, 0.9)),
    "drop_connect_rate": ("float", between(0.0, 0.9)),
}


def _stage(field: str) -> BeforeValidator:
    return parsed(*STAGE_FIELDS[field])


def _global(field: str) -> BeforeValidator:
    return parsed(*GLOBAL_FIELDS[field])


class SharedSpec(Spec):
    """Parameters sampled once and used by every stage that does not set its own."""

    block: Annotated[
        Param | None,
        _stage("block"),
        Field(description="searchable: the block type, mbconv (depthwise-separable) or fused (default mbconv)"),
    ] = None
    depth: Annotated[Param | None, _stage("depth"), Field(description="searchable: blocks per stage (default 1)")] = (
        None
    )
    kernel: Annotated[
        Param | None,
        _stage("kernel"),
        Field(description="searchable: kernel size of the depthwise (mbconv) or fused convolution (default 3)"),
    ] = None
    expansion: Annotated[
        Param | None,
        _stage("expansion"),
        Field(description="searchable: a block's hidden channels per input channel, may be fractional (default 6)"),
    ] = None
    activation: Annotated[
        Param | None,
        _stage("activation"),
        Field(description="searchable: the blocks' activation (default: the model's)"),
    ] = None
    se: Annotated[
        Param | None,
        _stage("se"),
        Field(description="searchable: squeeze-and-excitation in each block (default false)"),
    ] = None
    se_ratio: Annotated[
        Param | None,
        _stage("se_ratio"),
        Field(
            description="searchable: SE width, a ratio of the expanded (MobileNets) or input channels (default 0.25)"
        ),
    ] = None

    def set_params(self) -> dict[str, Param]:
        return {f: p for f in SHARED_FIELDS if (p := getattr(self, f)) is not None}


class StageSpec(SharedSpec):
    """One stage: `depth` blocks of the same width; unset parameters come from `shared:`."""

    filters: Annotated[
        Param,
        _stage("filters"),
        Field(description="searchable: output channels of the stage's blocks, before width_multiplier"),
    ]
    stride: Annotated[Param, _stage("stride"), Field(description="searchable: stride of the stage's first block")] = (
        fixed(STAGE_FIELDS, STAGE_DEFAULTS, "stride")
    )

    def set_params(self) -> dict[str, Param]:
        return {f: p for f in STAGE_FIELDS if (p := getattr(self, f)) is not None}


class CompoundSpec(Spec):
    """EfficientNet's compound scaling: depth x alpha^phi, width x beta^phi, resolution x gamma^phi."""

    phi: Annotated[
        Param,
        parsed("float", between(0.0, 8.0)),
        Field(description="searchable: the scale, the exponent of alpha, beta and gamma"),
    ]
    alpha: float = Field(1.2, ge=1.0, le=4.0, description="depth coefficient")
    beta: float = Field(1.1, ge=1.0, le=4.0, description="width coefficient")
    gamma: float = Field(1.15, ge=1.0, le=4.0, description="resolution coefficient")


class ModelSpec(Spec):
    """`model:` the network family, its global knobs, compound scaling, and shared and per-stage parameters."""

    family: Family = Field(
        "mobilenet_v2",
        description="the network family: its blocks, activation, squeeze-and-excitation and scaling rules",
    )
    num_classes: int | None = Field(None, ge=2, le=100_000, description="default: the dataset's")
    width_multiplier: Annotated[
        Param,
        _global("width_multiplier"),
        Field(description="searchable: channels x this, rounded to multiples of 8 (never losing more than 10%)"),
    ] = Param("float", value=1.0)
    depth_multiplier: Annotated[
        Param, _global("depth_multiplier"), Field(description="searchable: a stage repeats ceil(depth x this) times")
    ] = Param("float", value=1.0)
    resolution: Annotated[
        Param | None,
        _global("resolution"),
        Field(
            description="searchable: the network's input size, resized inside the model (default: dataset.image_size)"
        ),
    ] = None
    activation: Annotated[
        Param | None,
        _global("activation"),
        Field(description="searchable: stem, head and default stage activation (default: the family's)"),
    ] = None
    dropout: Annotated[
        Param, _global("dropout"), Field(description="searchable: dropout rate before the classifier")
    ] = Param("float", value=0.2)
    drop_connect_rate: Annotated[
        Param | None,
        _global("drop_connect_rate"),
        Field(description="searchable: stochastic depth, rising over the residual blocks (default: the family's)"),
    ] = None
    compound: CompoundSpec | None = Field(
        None, description="EfficientNet's compound scaling of depth, width and resolution"
    )
    stem_filters: Annotated[
        Param,
        _global("stem_filters"),
        Field(
            description="searchable: channels of the stem's 3x3 convolution "
            "(x width_multiplier unless the family fixes the stem)"
        ),
    ] = Param("int", value=32)
    stem_stride: Annotated[
        Param,
        _global("stem_stride"),
        Field(description="searchable: stride of the stem (1 keeps a small image's detail)"),
    ] = Param("int", value=2)
    head_filters: int = Field(
        1280,
        ge=1,
        le=8192,
        description="channels of the 1x1 convolution before pooling (x width_multiplier as the family says)",
    )
    head_hidden: Annotated[
        Param | None,
        _global("head_hidden"),
        Field(
            description="searchable: units of a dense layer after pooling, 0 for none "
            "(default: the family's, 1280 for mobilenet_v3, else 0)"
        ),
    ] = None
    shared: SharedSpec = Field(
        SharedSpec(), description="stage parameters sampled once, for the stages that do not set their own"
    )
    stages: list[StageSpec] = Field(
        min_length=1, max_length=12, description="the stages in order, from the stem to the head"
    )

    def global_params(self) -> dict[str, Param]:
        return {f: p for f in GLOBAL_FIELDS if (p := getattr(self, f)) is not None}

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        check_scope(self.global_params(), GLOBAL_FIELDS, "")
        shared = self.shared.set_params()
        check_scope(shared, STAGE_FIELDS, "shared.", only_set=True)
        for i, stage in enumerate(self.stages):
            own = stage.set_params()
            check_scope({**shared, **own}, STAGE_FIELDS, f"stages[{i}].", report=set(own))
        if self.family == "efficientnet_lite":
            scopes = [("shared", shared)] + [(f"stages[{i}]", s.set_params()) for i, s in enumerate(self.stages)]
            for where, params in scopes:
                se = params.get("se")
                if se is not None and True in se.values():
                    raise ValueError(
                        f"{where}.se: efficientnet_lite has no squeeze-and-excitation (use family efficientnet)"
                    )
        return self


def check_scope(
    params: dict[str, Param],
    fields: dict[str, tuple[Kind, Check | None]],
    prefix: str,
    *,
    only_set: bool = False,
    report: set[str] | None = None,
) -> None:
    """Check the `when:` conditions of one scope: each names a parameter of the scope that
    takes a list of values, with values of its type, and no chain of conditions loops.
    Errors are `ValueError("<path>.when: ...")` so they are reported at that key."""
    for name, param in params.items():
        if report is not None and name not in report:
            continue
        for key, allowed in param.when:
            where = f"{prefix}{name}.when"
            if key == name:
                raise ValueError(f"{where}: a parameter cannot depend on itself")
            if key not in fields:
                raise ValueError(f"{where}: unknown parameter {shown(key)} (this scope has {', '.join(fields)})")
            if only_set and key not in params:
                raise ValueError(f"{where}: '{key}' must be set in the same scope (it is sampled once for all stages)")
            target = params.get(key)
            if target is not None and not target.discrete:
                raise ValueError(f"{where}: '{key}' is a float range; a condition needs one with a list of values")
            kind, check = fields[key]
            for value in allowed:
                try:
                    parse_param(value, kind, check)
                except ValueError as exc:
                    raise ValueError(f"{where}: {key} = {shown(value)}: {exc}") from None
    sampling_order(params, prefix)


def sampling_order(params: dict[str, Param], prefix: str = "") -> list[str]:
    """The scope's parameters with every one after those its conditions name (stable
    topological order); a loop of conditions is an error."""
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(name: str, chain: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "open":
            raise ValueError(f"{prefix}{name}.when: conditions form a loop ({' -> '.join([*chain, name])})")
        state[name] = "open"
        for key, _ in params[name].when:
            if key in params:
                visit(key, [*chain, name])
        state[name] = "done"
        order.append(name)

    for name in params:
        visit(name, [])
    return order

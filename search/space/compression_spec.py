"""The `compression:` part of a space file: pruning and post-training quantization as knobs."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from nas.search.records import QuantizeMode
from nas.search.space.base import Spec, fixed, parsed
from nas.search.space.model_spec import check_scope
from nas.search.space.params import Check, Kind, Param, between, one_of

PRUNING_METHODS = ["none", "magnitude", "n_m", "channel"]
QUANTIZATION = [mode.value for mode in QuantizeMode]
# Layer kinds of the networks (by the builder's layer names) that pruning can skip.
LayerKind = Literal["stem", "expand", "depthwise", "fused", "se", "project", "head", "classifier"]
DEFAULT_EXCLUDE: list[LayerKind] = ["stem", "depthwise", "se", "classifier"]

COMPRESSION_FIELDS: dict[str, tuple[Kind, Check | None]] = {
    "method": ("str", one_of(PRUNING_METHODS)),
    "sparsity": ("float", between(0.0, 0.9)),
    "quantization": ("str", one_of(QUANTIZATION)),
}
COMPRESSION_DEFAULTS: dict[str, Any] = {"method": "none", "sparsity": 0.5, "quantization": "none"}


def _p(field: str) -> BeforeValidator:
    return parsed(*COMPRESSION_FIELDS[field])


class PruningSpec(Spec):
    """`compression.pruning`: what training removes (weights or channels), and when."""

    method: Annotated[
        Param, _p("method"), Field(description="searchable: magnitude, n_m (N:M) or channel pruning, or none")
    ] = fixed(COMPRESSION_FIELDS, COMPRESSION_DEFAULTS, "method")
    sparsity: Annotated[
        Param,
        _p("sparsity"),
        Field(description="searchable: share of the weights (magnitude) or expanded channels (channel) removed"),
    ] = fixed(COMPRESSION_FIELDS, COMPRESSION_DEFAULTS, "sparsity")
    begin: float = Field(0.2, ge=0, lt=1, description="start, as a fraction of training steps (channel: epochs)")
    end: float = Field(0.8, gt=0, le=1, description="magnitude: reach the target sparsity here")
    frequency: int = Field(10, ge=1, description="magnitude: steps between mask updates")
    exclude: list[LayerKind] = Field(
        default_factory=lambda: list(DEFAULT_EXCLUDE),
        description="layer kinds never pruned (unstructured and N:M)",
    )
    n: int = Field(2, ge=1, description="N:M: keep n of every m weights along the input channels")
    m: int = Field(4, ge=2, le=16, description="N:M: the group size m")

    @model_validator(mode="after")
    def _check(self) -> PruningSpec:
        if self.end <= self.begin:
            raise ValueError(f"end: {self.end} must come after begin {self.begin}")
        if self.n >= self.m:
            raise ValueError(f"n: {self.n} must be below m {self.m}")
        check_scope(self.params(), COMPRESSION_FIELDS, "")
        return self

    def params(self) -> dict[str, Param]:
        return {"method": self.method, "sparsity": self.sparsity}


class CompressionSpec(Spec):
    """`compression:` pruning and post-training quantization as knobs; accuracy is then the deployable form's."""

    pruning: PruningSpec = Field(PruningSpec(), description="pruning method, sparsity and schedule")
    quantization: Annotated[
        Param, _p("quantization"), Field(description="searchable: post-training quantization of the TFLite form")
    ] = fixed(COMPRESSION_FIELDS, COMPRESSION_DEFAULTS, "quantization")
    tflite_threads: int = Field(1, ge=1, le=64, description="LiteRT threads for tflite_latency")

    def params(self) -> dict[str, Param]:
        """Flat names in the study: pruning.method, pruning.sparsity, quantization."""
        return {f"pruning.{k}": p for k, p in self.pruning.params().items()} | {"quantization": self.quantization}

    @property
    def converts(self) -> bool:
        """Whether trials convert to TFLite (to score the quantized form)."""
        q = self.quantization
        return bool(q.choices) or q.value != "none"

    @model_validator(mode="after")
    def _conditions(self) -> CompressionSpec:
        check_scope({"quantization": self.quantization}, COMPRESSION_FIELDS, "")
        return self

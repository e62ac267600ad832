"""`search.flops:` in the space: the scale of the FLOPs score, in the study's fingerprint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from nas.errors import NasError
from nas.search.space.base import Spec
from nas.search.strategies import StrategySettings

if TYPE_CHECKING:
    from nas.search.space import SearchSpace


class FlopsSpec(Spec):
    """`search.strategy: flops`: each candidate's score is flops / (flops + scale)."""

    scale: float = Field(1e6, gt=0, description="FLOPs at which the score is one half")
    note: str = Field("", description="a label that never changes what a score means")


class FlopsSettings(StrategySettings):
    schema = FlopsSpec
    summary = "random architectures scored by their FLOPs"

    def unfingerprinted(self, settings: Any) -> set[str]:
        return {"note"}

    def check(self, space: SearchSpace) -> None:
        if "accuracy" not in space.spec.objectives:
            raise NasError("search.strategy: flops scores the accuracy objective; add it to objectives")


SETTINGS = FlopsSettings("flops")

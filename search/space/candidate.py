"""What one trial sampled, with every default and compound-scaling factor applied."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from nas.search.space.model_spec import STAGE_DEFAULTS


@dataclass(frozen=True)
class StagePlan:
    filters: int
    stride: int
    depth: int
    kernel: int
    expansion: float
    se: bool
    se_ratio: float = STAGE_DEFAULTS["se_ratio"]
    activation: str = "relu6"
    block: str = STAGE_DEFAULTS["block"]


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
    family: str = "mobilenet_v2"
    depth_multiplier: float = 1.0
    resolution: int = 0  # 0: the data's image size
    activation: str = "relu6"
    drop_connect_rate: float = 0.0
    head_hidden: int = 0
    pruning: str = "none"  # none, magnitude, n_m, channel
    sparsity: float = 0.5
    quantization: str = "none"  # none, dynamic, float16, int8 (TFLite post-training)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
